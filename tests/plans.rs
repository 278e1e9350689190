//! Execution plans: access categories, HostTeam / DeviceKernel / RankPartition (simulated
//! ranks), bit-exact mapreduce at every world size and thread count, and bad input.

use eagle::ir::{AccessCategory, EagleFn, ReduceKind};
use eagle::plan::{plan, Partition, Planes, RankPartition, Structure, ROW};
use eagle::prelude::*;

const N: Dim = dynamic!("N");

/// Sum of all samples: a mapreduce with one cell.
#[eagle::kernel(sample)]
pub fn total(s: usize, x: Tensor<f64, N>, out: Out<Tensor<f64, 1>>) {
    out[0] = out[0] + x[s];
}

/// `y = 2x + 1`, and the norm of a width-2 plane: sample-local.
#[eagle::kernel(sample, category = "sample_local")]
pub fn affine(
    s: usize,
    x: Tensor<f64, N>,
    v: Tensor<f64, 2, N>,
    y: Out<Tensor<f64, N>>,
    norm: Out<Tensor<f64, N>>,
) {
    y[s] = x[s] * 2.0 + 1.0;
    norm[s] = sqrt(v[0][s] * v[0][s] + v[1][s] * v[1][s]);
}

/// Three-point periodic stencil: reads its neighbours, a cross-sample read.
#[eagle::kernel(sample)]
pub fn stencil(s: usize, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    let left = (s + N - 1) % N;
    let right = (s + 1) % N;
    y[s] = x[left] + x[s] + x[right];
}

/// A 16-bin histogram of values in [0, 1): a mapreduce over an array of cells.
#[eagle::kernel(sample, category = "mapreduce(sum)")]
pub fn histogram(s: usize, x: Tensor<f64, N>, hist: Out<Tensor<f64, 16>>) {
    let b = (x[s] * 16.0) as usize;
    hist[b] += 1.0;
}

/// Writes its neighbour: cross-sample write.
#[eagle::kernel(sample)]
pub fn scatter(s: usize, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    y[(s + 1) % N] = x[s];
}

/// Declares the wrong category.
#[eagle::kernel(sample, category = "sample_local")]
pub fn mislabeled(s: usize, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    y[s] = x[(s + 1) % N];
}

/// f32 output.
#[eagle::kernel(sample)]
pub fn narrow(s: usize, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>) {
    y[s] = x[s];
}

fn wide_values(n: usize) -> Vec<f64> {
    // Magnitudes from 1e-300 to 1e300, mixed signs: a sum whose value depends on the order.
    (0..n)
        .map(|i| {
            let e = (i * 7919 % 601) as i32 - 300;
            let m = 1.0 + (i % 97) as f64 / 97.0;
            let sign = if (i * 31) % 3 == 0 { -1.0 } else { 1.0 };
            sign * m * 10f64.powi(e)
        })
        .collect()
}

/// The documented order: rows of 32 folded left to right from 0.0, rows folded in order.
fn reference_sum(x: &[f64], drop_rows: Option<std::ops::Range<usize>>) -> f64 {
    let mut acc = 0.0;
    for (r, row) in x.chunks(ROW).enumerate() {
        if drop_rows.as_ref().is_some_and(|d| d.contains(&r)) {
            continue;
        }
        acc += row.iter().fold(0.0, |a, v| a + v);
    }
    acc
}

#[test]
fn categories_are_inferred_from_the_ir() {
    let cat = |m: eagle::ir::Module, name: &str| {
        eagle::ir::access_category(m.function(name).unwrap())
            .unwrap()
            .category
    };
    assert_eq!(
        cat(total::module().unwrap(), "total"),
        AccessCategory::Mapreduce(ReduceKind::Sum)
    );
    assert_eq!(
        cat(affine::module().unwrap(), "affine"),
        AccessCategory::SampleLocal
    );
    assert_eq!(
        cat(stencil::module().unwrap(), "stencil"),
        AccessCategory::CrossSampleRead
    );
    assert_eq!(
        cat(histogram::module().unwrap(), "histogram"),
        AccessCategory::Mapreduce(ReduceKind::Sum)
    );
    assert_eq!(
        cat(scatter::module().unwrap(), "scatter"),
        AccessCategory::CrossSampleWrite
    );
    let e = mislabeled::module().unwrap_err().to_string();
    assert!(
        e.contains("declared category `sample_local` but the body is `cross_sample_read`"),
        "{e}"
    );
}

/// A mapreduce body declared `cross_sample_write`: the stricter declaration is honoured.
#[eagle::kernel(sample, category = "cross_sample_write")]
pub fn declared_sequential(s: usize, x: Tensor<f64, N>, acc: Out<Tensor<f64, 4>>) {
    acc[s % 4] += x[s];
}

/// A sample-local body declared `cross_sample_read` (stricter, so accepted).
#[eagle::kernel(sample, category = "cross_sample_read")]
pub fn declared_reader(s: usize, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    y[s] = x[s] * 2.0;
}

/// Issue 35, item 8: a declared category is an upper bound of the body's. The stricter
/// `cross_sample_write` on a `mapreduce(sum)` body runs the samples in order on one thread,
/// adding to the output's previous values, and RankPartition refuses it; the looser
/// `sample_local` on a `cross_sample_read` body stays an error.
#[test]
fn a_declared_category_stricter_than_the_body_is_honoured() {
    let n = 1000;
    let x = Tensor::from_vec(&[n], wide_values(n)).unwrap();
    let mut want = [1.0, 2.0, 3.0, 4.0];
    for (s, v) in x.data().iter().enumerate() {
        want[s % 4] += v;
    }
    for threads in [1, 4] {
        let p = plan(
            declared_sequential,
            Structure::HostTeam,
            Structure::HostTeam,
        )
        .unwrap()
        .with_threads(threads);
        assert_eq!(p.category(), AccessCategory::CrossSampleWrite);
        let mut acc = Tensor::from_vec(&[4], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        p.run(0, &mut Planes::new().input("x", &x).output("acc", &mut acc))
            .unwrap();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(acc.data()), bits(&want), "threads = {threads}");
    }
    let e = plan(
        declared_sequential,
        Structure::RankPartition,
        Structure::HostTeam,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("is cross_sample_write"), "{e}");
    let p = plan(declared_reader, Structure::HostTeam, Structure::HostTeam).unwrap();
    assert_eq!(p.category(), AccessCategory::CrossSampleRead);
    let mut y = Tensor::<f64>::zeros(&[n]);
    p.run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
        .unwrap();
    assert_eq!(y.data()[7].to_bits(), (x.data()[7] * 2.0).to_bits());
    let e = mislabeled::module().unwrap_err().to_string();
    assert!(
        e.contains("a declaration may be stricter than the body, never looser"),
        "{e}"
    );
}

#[test]
fn mapreduce_sum_is_bit_identical_at_every_world_size_and_thread_count() {
    let n = 1_000_000;
    let x = Tensor::from_vec(&[n], wide_values(n)).unwrap();
    let want = reference_sum(x.data(), None);
    let mut seen = vec![];
    for threads in 1..=4 {
        let p = plan(total, Structure::HostTeam, Structure::HostTeam)
            .unwrap()
            .with_threads(threads);
        let mut out = Tensor::<f64>::zeros(&[1]);
        p.run(0, &mut Planes::new().input("x", &x).output("out", &mut out))
            .unwrap();
        seen.push(out.data()[0].to_bits());
    }
    for r in 1..=8 {
        for threads in [1, 3] {
            let p = plan(total, Structure::RankPartition, Structure::HostTeam)
                .unwrap()
                .with_threads(threads)
                .with_simulated_ranks(r);
            let mut out = Tensor::<f64>::zeros(&[1]);
            p.run(0, &mut Planes::new().input("x", &x).output("out", &mut out))
                .unwrap();
            seen.push(out.data()[0].to_bits());
        }
    }
    let p = plan(total, Structure::DeviceKernel, Structure::HostTeam).unwrap();
    let mut out = Tensor::<f64>::zeros(&[1]);
    p.run(0, &mut Planes::new().input("x", &x).output("out", &mut out))
        .unwrap();
    seen.push(out.data()[0].to_bits());
    assert!(
        seen.iter().all(|&b| b == want.to_bits()),
        "{seen:?} vs {}",
        want.to_bits()
    );
    // The check is sensitive: dropping one rank's rows (rank 3 of 8) changes the bits.
    let rows = n.div_ceil(ROW);
    let dropped = reference_sum(x.data(), Some(Partition::new(rows, 8).share(3)));
    assert_ne!(dropped.to_bits(), want.to_bits());
}

#[test]
fn sample_local_stencil_and_histogram_match_their_goldens_everywhere() {
    let n = 1001;
    let x = eagle_runner::random_tensor(&[n], 40);
    let x64 = Tensor::from_vec(
        &[n],
        x.data().iter().map(|&v| (v as f64 + 1.0) / 2.0).collect(),
    )
    .unwrap();
    let v = Tensor::from_vec(&[2, n], (0..2 * n).map(|i| i as f64 * 0.5 - 3.0).collect()).unwrap();
    let structures = [
        (Structure::HostTeam, None),
        (Structure::DeviceKernel, None),
        (Structure::RankPartition, Some(1)),
        (Structure::RankPartition, Some(3)),
        (Structure::RankPartition, Some(8)),
    ];
    for (st, ranks) in structures {
        let with = |p: eagle::plan::Plan| match ranks {
            Some(r) => p.with_simulated_ranks(r).with_threads(2),
            None => p.with_threads(2),
        };
        // sample-local
        let mut y = Tensor::<f64>::zeros(&[n]);
        let mut norm = Tensor::<f64>::zeros(&[n]);
        with(plan(affine, st, Structure::HostTeam).unwrap())
            .run(
                0,
                &mut Planes::new()
                    .input("x", &x64)
                    .input("v", &v)
                    .output("y", &mut y)
                    .output("norm", &mut norm),
            )
            .unwrap();
        for s in 0..n {
            assert_eq!(
                y.data()[s].to_bits(),
                (x64.data()[s] * 2.0 + 1.0).to_bits(),
                "{st:?} {ranks:?} y[{s}]"
            );
            let (a, b) = (v.data()[s], v.data()[n + s]);
            assert_eq!(norm.data()[s].to_bits(), (a * a + b * b).sqrt().to_bits());
        }
        // cross-sample read
        let mut y = Tensor::<f64>::zeros(&[n]);
        with(plan(stencil, st, Structure::DeviceKernel).unwrap())
            .run(0, &mut Planes::new().input("x", &x64).output("y", &mut y))
            .unwrap();
        for s in 0..n {
            let d = x64.data();
            let want = d[(s + n - 1) % n] + d[s] + d[(s + 1) % n];
            assert_eq!(
                y.data()[s].to_bits(),
                want.to_bits(),
                "{st:?} {ranks:?} stencil[{s}]"
            );
        }
        // histogram mapreduce
        let mut hist = Tensor::<f64>::zeros(&[16]);
        with(plan(histogram, st, Structure::HostTeam).unwrap())
            .run(
                0,
                &mut Planes::new().input("x", &x64).output("hist", &mut hist),
            )
            .unwrap();
        let mut want = [0.0f64; 16];
        for &val in x64.data() {
            want[(val * 16.0) as usize] += 1.0;
        }
        assert_eq!(hist.data(), &want, "{st:?} {ranks:?}");
        assert_eq!(hist.data().iter().sum::<f64>(), n as f64);
    }
}

#[test]
fn rank_partition_rules_and_bad_input() {
    // Contiguous blocks, the first n % R ranks take one extra.
    let p = Partition::new(10, 4);
    assert_eq!(
        (0..4).map(|r| p.share(r)).collect::<Vec<_>>(),
        vec![0..3, 3..6, 6..8, 8..10]
    );
    assert_eq!(Partition::new(2, 4).share(3), 2..2);
    assert_eq!(RankPartition::world(), (0, 1));
    assert_eq!(RankPartition::local(&p), 0..3);
    #[cfg(not(feature = "mpi"))]
    {
        assert!(!RankPartition::available());
        let e = RankPartition::allgather_plane(&[1.0], &p)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`mpi` feature") && e.contains("--features mpi"),
            "{e}"
        );
    }
    // cross_sample_write is refused by the plan itself, whatever the world size.
    let e = plan(scatter, Structure::RankPartition, Structure::HostTeam)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cross_sample_write")
            && e.contains("cannot be rank-partitioned at any world size"),
        "{e}"
    );
    // ... but runs (single-threaded, in sample order) on a HostTeam.
    let x = Tensor::from_vec(&[5], vec![1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    let mut y = Tensor::<f64>::zeros(&[5]);
    plan(scatter, Structure::HostTeam, Structure::HostTeam)
        .unwrap()
        .with_threads(4)
        .run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
        .unwrap();
    assert_eq!(y.data(), &[5.0, 1.0, 2.0, 3.0, 4.0]);
    // f32 outputs are refused by name before anything launches.
    let xf = Tensor::<f32>::zeros(&[4]);
    let mut yf = Tensor::<f32>::zeros(&[4]);
    let e = plan(narrow, Structure::RankPartition, Structure::HostTeam)
        .unwrap()
        .with_simulated_ranks(2)
        .run(0, &mut Planes::new().input("x", &xf).output("y", &mut yf))
        .unwrap_err()
        .to_string();
    assert!(e.contains("output plane `y` is f32"), "{e}");
    // RankPartition without MPI and without simulated ranks names the feature.
    #[cfg(not(feature = "mpi"))]
    {
        let mut y = Tensor::<f64>::zeros(&[5]);
        let e = plan(stencil, Structure::RankPartition, Structure::HostTeam)
            .unwrap()
            .run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`mpi` feature"), "{e}");
    }
    // Missing, extra and mis-sized planes.
    let st = plan(stencil, Structure::HostTeam, Structure::HostTeam).unwrap();
    let e = st
        .run(0, &mut Planes::new().input("x", &x))
        .unwrap_err()
        .to_string();
    assert!(e.contains("plane `y` of `stencil` is missing"), "{e}");
    let mut y = Tensor::<f64>::zeros(&[5]);
    let e = st
        .run(
            0,
            &mut Planes::new()
                .input("x", &x)
                .output("y", &mut y)
                .input("z", &x),
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("plane `z` is not a parameter of `stencil`"),
        "{e}"
    );
    let mut y4 = Tensor::<f64>::zeros(&[4]);
    let e = st
        .run(0, &mut Planes::new().input("x", &x).output("y", &mut y4))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("plane `y` has 4 samples along its last dim, but an earlier plane has n = 5"),
        "{e}"
    );
    // n = 0 and n < R run, with empty shares.
    let x0 = Tensor::<f64>::zeros(&[0]);
    let mut out = Tensor::<f64>::zeros(&[1]);
    plan(total, Structure::RankPartition, Structure::HostTeam)
        .unwrap()
        .with_simulated_ranks(4)
        .run(
            0,
            &mut Planes::new().input("x", &x0).output("out", &mut out),
        )
        .unwrap();
    assert_eq!(out.data(), &[0.0]);
    let x2 = Tensor::from_vec(&[2], vec![3.0, 4.0]).unwrap();
    let mut y2 = Tensor::<f64>::zeros(&[2]);
    plan(stencil, Structure::RankPartition, Structure::HostTeam)
        .unwrap()
        .with_simulated_ranks(5)
        .run(0, &mut Planes::new().input("x", &x2).output("y", &mut y2))
        .unwrap();
    assert_eq!(y2.data(), &[11.0, 10.0]);
}

#[test]
fn plugins_deploy_load_run_and_refuse_tampering() {
    use eagle::plugin::{deploy, load};
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugin-histogram");
    let _ = std::fs::remove_dir_all(&dir);
    deploy(
        &plan(histogram, Structure::HostTeam, Structure::HostTeam).unwrap(),
        &dir,
    )
    .unwrap();
    deploy(
        &plan(stencil, Structure::HostTeam, Structure::HostTeam).unwrap(),
        &dir,
    )
    .unwrap();
    let manifest = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    assert!(
        manifest.contains("\"histogram\"") && manifest.contains("\"stencil\""),
        "{manifest}"
    );
    let sidecar = std::fs::read_to_string(dir.join("histogram.json")).unwrap();
    for f in [
        "\"category\": \"mapreduce(sum)\"",
        "\"op\": \"sum\"",
        "\"world_size\": \"any\"",
        "\"targets\"",
        "\"content_hash\": \"sha256:",
        "\"dtype\": \"f64\"",
    ] {
        assert!(sidecar.contains(f), "{f} missing from {sidecar}");
    }
    // Loaded without its source, it plans and runs like the original.
    let k = load(&dir, "histogram").unwrap();
    let n = 777;
    let x = Tensor::from_vec(&[n], (0..n).map(|i| (i as f64 * 0.618).fract()).collect()).unwrap();
    let mut a = Tensor::<f64>::zeros(&[16]);
    let mut b = Tensor::<f64>::zeros(&[16]);
    k.plan(Structure::RankPartition, Structure::HostTeam)
        .unwrap()
        .with_simulated_ranks(3)
        .run(0, &mut Planes::new().input("x", &x).output("hist", &mut a))
        .unwrap();
    plan(histogram, Structure::HostTeam, Structure::HostTeam)
        .unwrap()
        .run(0, &mut Planes::new().input("x", &x).output("hist", &mut b))
        .unwrap();
    assert_eq!(a.data(), b.data());
    // Unknown kernel.
    let e = load(&dir, "nope").unwrap_err().to_string();
    assert!(e.contains("has no kernel `nope`"), "{e}");
    // A tampered artifact is refused by its hash.
    let art = dir.join("cpu").join("histogram.eir");
    let text = std::fs::read_to_string(&art).unwrap();
    std::fs::write(&art, text.replace("const 16", "const 17")).unwrap();
    let e = load(&dir, "histogram").unwrap_err().to_string();
    assert!(e.contains("field `content_hash`"), "{e}");
    std::fs::write(&art, &text).unwrap();
    // A sidecar whose category disagrees with the artifact is refused by field.
    std::fs::write(
        dir.join("histogram.json"),
        sidecar.replace("mapreduce(sum)", "sample_local"),
    )
    .unwrap();
    let e = load(&dir, "histogram").unwrap_err().to_string();
    assert!(
        e.contains("field `category`")
            && e.contains("`mapreduce(sum)` (inferred from the artifact)"),
        "{e}"
    );
    std::fs::write(
        dir.join("histogram.json"),
        sidecar.replace("\"dtype\": \"f64\"", "\"dtype\": \"f32\""),
    )
    .unwrap();
    let e = load(&dir, "histogram").unwrap_err().to_string();
    assert!(e.contains("field `signature`"), "{e}");
    std::fs::write(dir.join("histogram.json"), &sidecar).unwrap();
    assert!(load(&dir, "histogram").is_ok());
}

/// A fresh plugin directory named `name` holding the histogram kernel.
fn deployed_histogram(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    eagle::plugin::deploy(
        &plan(histogram, Structure::HostTeam, Structure::HostTeam).unwrap(),
        &dir,
    )
    .unwrap();
    dir
}

#[test]
fn plugin_hashes_are_sha256_of_the_artifact() {
    use sha2::Digest;
    let dir = deployed_histogram("plugin-sha256");
    let art = std::fs::read(dir.join("cpu").join("histogram.eir")).unwrap();
    let hex: String = sha2::Sha256::digest(&art)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let k = eagle::plugin::load(&dir, "histogram").unwrap();
    assert_eq!(k.sidecar.content_hash, format!("sha256:{hex}"));
    assert_eq!(hex.len(), 64);
}

#[test]
fn plugin_files_that_are_not_regular_files_are_refused_without_blocking() {
    use eagle::plugin::load;
    let dir = deployed_histogram("plugin-fifo");
    let art = dir.join("cpu").join("histogram.eir");
    std::fs::remove_file(&art).unwrap();
    // A FIFO in place of the artifact: opening it for reading would block until a writer came.
    let made = std::process::Command::new("mkfifo")
        .arg(&art)
        .status()
        .unwrap();
    assert!(made.success());
    let (tx, rx) = std::sync::mpsc::channel();
    let d = dir.clone();
    std::thread::spawn(move || {
        let _ = tx.send(load(&d, "histogram").map(|_| ()).map_err(|e| e.to_string()));
    });
    let e = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("load returns instead of blocking on the FIFO")
        .unwrap_err();
    assert!(
        e.contains("histogram.eir`: expected a regular file of at most 67108864 bytes, found a special file (FIFO, socket or device)"),
        "{e}"
    );
    // A directory, and a file larger than the limit.
    std::fs::remove_file(&art).unwrap();
    std::fs::create_dir(&art).unwrap();
    let e = load(&dir, "histogram").unwrap_err().to_string();
    assert!(e.contains("found a directory"), "{e}");
    std::fs::remove_dir(&art).unwrap();
    let f = std::fs::File::create(&art).unwrap();
    f.set_len(eagle::plugin::MAX_FILE_BYTES + 1).unwrap();
    let e = load(&dir, "histogram").unwrap_err().to_string();
    assert!(e.contains("found a file of 67108865 bytes"), "{e}");
}

#[test]
fn every_single_byte_corruption_of_a_plugin_is_refused_or_changes_nothing() {
    use eagle::plugin::{load, Manifest, Sidecar};
    let dir = deployed_histogram("plugin-corrupt");
    let good = load(&dir, "histogram").unwrap().sidecar;
    let files = ["manifest.json", "histogram.json"];
    let originals: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(dir.join(f)).unwrap())
        .collect();
    let manifest: Manifest = serde_json::from_slice(&originals[0]).unwrap();
    let (mut refused, mut same) = (0, 0);
    for (f, orig) in files.iter().zip(&originals) {
        for i in 0..orig.len() {
            // Flip the lowest bit of byte i: `a` <-> `` ` ``, `0` <-> `1`, `"` <-> `#`, ...
            let mut bad = orig.clone();
            bad[i] ^= 1;
            std::fs::write(dir.join(f), &bad).unwrap();
            match load(&dir, "histogram") {
                Err(_) => refused += 1,
                Ok(k) => {
                    // Accepted only if every field still means what was deployed (whitespace).
                    let m: Manifest =
                        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap())
                            .unwrap();
                    let text = String::from_utf8_lossy(&bad[i..=i]).into_owned();
                    assert_eq!(
                        (&k.sidecar, &m),
                        (&good, &manifest),
                        "{f}: byte {i} flipped to {text:?} was accepted with a different meaning"
                    );
                    same += 1;
                }
            }
        }
        std::fs::write(dir.join(f), orig).unwrap();
    }
    println!("plugin corruption: {refused} refused, {same} harmless (whitespace)");
    assert!(refused > 500, "{refused} refused");
    assert!(load(&dir, "histogram").is_ok());
    // The fields that were not checked before, by name.
    let sidecar: Sidecar = serde_json::from_slice(&originals[1]).unwrap();
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "histogram.json",
            serde_json::to_string(&Sidecar { world_size: "4".into(), ..sidecar.clone() }).unwrap(),
            "sidecar field `world_size`: expected `any` (a sample kernel serves every world size), found `4`",
        ),
        (
            "histogram.json",
            serde_json::to_string(&Sidecar {
                targets: vec!["cpu".into(), "cuda".into()],
                ..sidecar.clone()
            })
            .unwrap(),
            "sidecar field `targets`: expected [\"cpu\"] (the sidecar has no `cuda` part), found [\"cpu\", \"cuda\"]",
        ),
        (
            "manifest.json",
            serde_json::to_string(&Manifest { eagle_version: "0.0.9".into(), ..manifest.clone() }).unwrap(),
            "plugin manifest field `eagle_version`: expected `0.1.0` (this eagle), found `0.0.9`; deploy the plugin again with this eagle",
        ),
        (
            "manifest.json",
            serde_json::to_string(&Manifest { format: "eagle-plugin/1".into(), ..manifest.clone() }).unwrap(),
            "plugin manifest field `format`: expected `eagle-plugin/2`, found `eagle-plugin/1`",
        ),
        (
            "histogram.json",
            String::from_utf8_lossy(&originals[1]).replacen('{', "{\"extra\": 1, ", 1),
            "unknown field `extra`",
        ),
    ];
    for (f, text, want) in cases {
        std::fs::write(dir.join(f), &text).unwrap();
        let e = load(&dir, "histogram").unwrap_err().to_string();
        assert!(e.contains(want), "{f}: {e}");
        std::fs::write(
            dir.join(f),
            &originals[if f == "manifest.json" { 0 } else { 1 }],
        )
        .unwrap();
    }
}

/// Read-modify-write of the sample's own cell: sample-local, old values kept.
#[eagle::kernel(sample, category = "sample_local")]
pub fn accumulate(s: usize, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    y[s] += x[s];
}

/// Writes only positive samples: the others keep their values.
#[eagle::kernel(sample)]
pub fn positives(s: usize, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    if x[s] > 0.0 {
        y[s] = x[s];
    }
}

/// The largest sample: a max mapreduce.
#[eagle::kernel(sample, category = "mapreduce(max)")]
pub fn peak(s: usize, x: Tensor<f64, N>, m: Out<Tensor<f64, 1>>) {
    m[0] = max(m[0], x[s]);
}

/// Reads one past its sample: fails at the last sample.
#[eagle::kernel(sample)]
pub fn overrun(s: usize, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    y[s] = x[s + 1];
}

#[test]
fn outputs_keep_the_values_a_kernel_does_not_overwrite() {
    let x = Tensor::from_vec(&[5], vec![10.0, -20.0, 30.0, -40.0, 50.0]).unwrap();
    let start = vec![1.0, 2.0, 3.0, 4.0, 5.0];
    for (structure, ranks) in [
        (Structure::HostTeam, None),
        (Structure::DeviceKernel, None),
        (Structure::RankPartition, Some(1)),
        (Structure::RankPartition, Some(2)),
        (Structure::RankPartition, Some(3)),
    ] {
        let with = |p: eagle::plan::Plan| match ranks {
            Some(r) => p.with_simulated_ranks(r),
            None => p,
        };
        let mut y = Tensor::from_vec(&[5], start.clone()).unwrap();
        with(plan(accumulate, structure, Structure::HostTeam).unwrap())
            .run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
            .unwrap();
        assert_eq!(
            y.data(),
            &[11.0, -18.0, 33.0, -36.0, 55.0],
            "{structure:?} {ranks:?}"
        );
        let mut y = Tensor::from_vec(&[5], start.clone()).unwrap();
        with(plan(positives, structure, Structure::HostTeam).unwrap())
            .run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
            .unwrap();
        assert_eq!(
            y.data(),
            &[10.0, 2.0, 30.0, 4.0, 50.0],
            "{structure:?} {ranks:?}"
        );
    }
}

#[test]
fn max_mapreduce_propagates_nan_like_the_compiled_max() {
    let mut v: Vec<f64> = (0..100).map(|i| (i as f64 * 0.37).sin()).collect();
    let want = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    for ranks in [1, 3] {
        let x = Tensor::from_vec(&[100], v.clone()).unwrap();
        let mut m = Tensor::<f64>::zeros(&[1]);
        plan(peak, Structure::RankPartition, Structure::HostTeam)
            .unwrap()
            .with_simulated_ranks(ranks)
            .run(0, &mut Planes::new().input("x", &x).output("m", &mut m))
            .unwrap();
        assert_eq!(m.data()[0].to_bits(), want.to_bits(), "{ranks} ranks");
    }
    // A NaN in a late row wins, whatever row holds the maximum.
    v[70] = f64::NAN;
    let x = Tensor::from_vec(&[100], v).unwrap();
    let mut m = Tensor::<f64>::zeros(&[1]);
    plan(peak, Structure::HostTeam, Structure::HostTeam)
        .unwrap()
        .run(0, &mut Planes::new().input("x", &x).output("m", &mut m))
        .unwrap();
    assert!(m.data()[0].is_nan(), "{}", m.data()[0]);
}

#[test]
fn plan_and_plugin_mistakes_are_their_own_variants_not_command_line_errors() {
    let x = Tensor::from_vec(&[3], vec![1.0, 2.0, 3.0]).unwrap();
    let mut y = Tensor::<f64>::zeros(&[3]);
    let p = plan(accumulate, Structure::HostTeam, Structure::HostTeam).unwrap();
    let e = p
        .run(0, &mut Planes::new().input("x", &x).input("z", &x))
        .unwrap_err();
    assert!(
        matches!(&e, eagle::Error::Plan(m) if m.contains("plane `z` is not a parameter of `accumulate`")),
        "{e:#?}"
    );
    let e = p
        .run(4096, &mut Planes::new().input("x", &x).output("y", &mut y))
        .unwrap_err();
    assert!(
        matches!(&e, eagle::Error::Plan(m) if m.contains("argument `device`")),
        "{e:#?}"
    );
    let missing = std::env::temp_dir().join(format!("eagle-no-plugin-{}", std::process::id()));
    let e = eagle::plugin::load(&missing, "histogram").unwrap_err();
    assert!(matches!(&e, eagle::Error::Plugin(_)), "{e:#?}");
    assert!(
        !eagle_runner::is_usage(&e) && !eagle_runner::is_usage(&eagle::Error::Plan(String::new()))
    );
}

#[test]
fn plane_mistakes_and_kernel_failures_are_named() {
    let x = Tensor::from_vec(&[3], vec![1.0, 2.0, 3.0]).unwrap();
    let mut y = Tensor::<f64>::zeros(&[3]);
    let mut y2 = Tensor::<f64>::zeros(&[3]);
    let p = plan(accumulate, Structure::HostTeam, Structure::HostTeam).unwrap();
    let e = p
        .run(
            0,
            &mut Planes::new()
                .input("x", &x)
                .output("y", &mut y)
                .output("y", &mut y2),
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("plane `y` is passed twice"), "{e}");
    let mut x_out = Tensor::from_vec(&[3], vec![1.0, 2.0, 3.0]).unwrap();
    let e = p
        .run(
            0,
            &mut Planes::new().output("x", &mut x_out).output("y", &mut y),
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("plane `x` is an input of `accumulate`; pass it with `Planes::input`"),
        "{e}"
    );
    let e = p
        .run(4096, &mut Planes::new().input("x", &x).output("y", &mut y))
        .unwrap_err()
        .to_string();
    assert!(e.contains("device 4096 does not exist"), "{e}");
    assert!(e.contains("devices 0 to 4095"), "{e}");
    // A run-time failure names the sample kernel, the rank and the samples.
    let e = plan(overrun, Structure::RankPartition, Structure::HostTeam)
        .unwrap()
        .with_simulated_ranks(3)
        .run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("rank 2 failed: "), "{e}");
    assert!(e.contains("`overrun`"), "{e}");
    assert!(!e.contains("__plan_"), "{e}");
    assert!(
        e.contains(
            "index 3 in dim 0 is out of range; dim 0 has 3 elements, so the largest index is 2"
        ),
        "{e}"
    );
    assert!(e.ends_with("(while running samples 2..3)"), "{e}");
    // The op is named as the kernel's own IR names it (not as its copy in the sample loop).
    let op = e
        .split("op `")
        .nth(1)
        .and_then(|r| r.split('`').next())
        .unwrap();
    assert_eq!(op, "%5 = elem %1[%4] : f64");
    assert!(
        overrun.ir().unwrap().contains(op),
        "{}",
        overrun.ir().unwrap()
    );
}

#[test]
fn a_stored_wrapper_in_a_module_is_replaced() {
    use eagle::ir::{DType, Level, ModuleBuilder, Type};
    // A module whose `__plan_accumulate` does nothing: plan_module must build its own.
    let m = accumulate::module().unwrap();
    let f = m.function("accumulate").unwrap().clone();
    let mut mb = ModuleBuilder::from_module(m);
    mb.define("__plan_accumulate", Level::Device, |fb| {
        fb.param("lo", Type::Scalar(DType::Index), false);
        fb.param("hi", Type::Scalar(DType::Index), false);
        for p in &f.params[1..] {
            fb.param(&p.name, f.ty(p.value).clone(), p.out);
        }
        Ok(())
    })
    .unwrap();
    let p = eagle::plan::plan_module(
        &mb.finish(),
        "accumulate",
        Structure::HostTeam,
        Structure::HostTeam,
    )
    .unwrap();
    let x = Tensor::from_vec(&[3], vec![1.0, 2.0, 3.0]).unwrap();
    let mut y = Tensor::<f64>::zeros(&[3]);
    p.run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
        .unwrap();
    assert_eq!(y.data(), &[1.0, 2.0, 3.0]);
}

/// The added value reads the output: order-dependent, so not a mapreduce.
#[eagle::kernel(sample)]
pub fn doubling(s: usize, x: Tensor<f64, N>, t: Out<Tensor<f64, 1>>) {
    t[0] = t[0] + (x[s] + t[0]);
}

/// One cell's contribution reads another cell: order-dependent.
#[eagle::kernel(sample)]
pub fn chained(s: usize, x: Tensor<f64, N>, c: Out<Tensor<f64, 2>>) {
    c[1] = c[1] + c[0];
    c[0] = c[0] + x[s];
}

/// `f64 as usize` with Rust's saturating semantics.
#[eagle::kernel(sample)]
pub fn to_index(s: usize, x: Tensor<f64, N>, y: Out<Tensor<i64, N>>) {
    y[s] = (x[s] as usize) as i64;
}

#[test]
fn contributions_that_read_the_output_run_in_sample_order() {
    let cat = |m: eagle::ir::Module, name: &str| {
        eagle::ir::access_category(m.function(name).unwrap())
            .unwrap()
            .category
    };
    assert_eq!(
        cat(doubling::module().unwrap(), "doubling"),
        AccessCategory::CrossSampleWrite
    );
    assert_eq!(
        cat(chained::module().unwrap(), "chained"),
        AccessCategory::CrossSampleWrite
    );
    // Sequential results, bit for bit, on a HostTeam of 2 threads.
    let x = Tensor::from_vec(&[70], vec![1.0; 70]).unwrap();
    let mut t = Tensor::<f64>::zeros(&[1]);
    plan(doubling, Structure::HostTeam, Structure::HostTeam)
        .unwrap()
        .with_threads(2)
        .run(0, &mut Planes::new().input("x", &x).output("t", &mut t))
        .unwrap();
    let mut want = 0.0f64;
    for _ in 0..70 {
        want = want + (1.0 + want);
    }
    assert_eq!(t.data()[0].to_bits(), want.to_bits());
    let mut c = Tensor::<f64>::zeros(&[2]);
    plan(chained, Structure::HostTeam, Structure::HostTeam)
        .unwrap()
        .run(0, &mut Planes::new().input("x", &x).output("c", &mut c))
        .unwrap();
    assert_eq!(c.data(), &[70.0, 2415.0]);
    // And RankPartition refuses it, as any cross_sample_write kernel.
    let e = plan(doubling, Structure::RankPartition, Structure::HostTeam)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cross_sample_write"), "{e}");
}

#[test]
fn float_to_usize_casts_saturate_like_rust() {
    let xs = vec![-1.0, f64::NAN, 1e300, 2.7, -0.5, 7.0];
    let x = Tensor::from_vec(&[6], xs.clone()).unwrap();
    let mut y = Tensor::<i64>::zeros(&[6]);
    plan(to_index, Structure::HostTeam, Structure::HostTeam)
        .unwrap()
        .run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
        .unwrap();
    let want: Vec<i64> = xs.iter().map(|&v| (v as usize) as i64).collect();
    assert_eq!(want, vec![0, 0, -1, 2, 0, 7]);
    assert_eq!(y.data(), &want[..]);
    // The constant folder agrees with the compiled cast.
    use eagle::ir::eval::{cast, Scalar};
    use eagle::ir::DType;
    for (v, w) in xs.iter().zip(&want) {
        assert_eq!(
            cast(Scalar::F64(*v), DType::Index),
            Scalar::Index(*w),
            "{v}"
        );
    }
}

/// A prefix sum that reads the previous sample's output: order-dependent.
#[eagle::kernel(sample)]
pub fn scan(s: usize, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    if s > 0 {
        y[s] = y[s - 1] + x[s];
    } else {
        y[s] = x[s];
    }
}

/// Reads another sample of an output plane it never writes: order-dependent too.
#[eagle::kernel(sample)]
pub fn reads_other_output(
    s: usize,
    x: Tensor<f64, N>,
    y: Out<Tensor<f64, N>>,
    z: Out<Tensor<f64, N>>,
) {
    if s > 0 {
        z[s] = y[s - 1] + x[s];
    } else {
        z[s] = x[s];
    }
}

#[test]
fn reading_another_sample_of_an_output_is_cross_sample_write() {
    let cat = |m: eagle::ir::Module, name: &str| {
        eagle::ir::access_category(m.function(name).unwrap())
            .unwrap()
            .category
    };
    assert_eq!(
        cat(scan::module().unwrap(), "scan"),
        AccessCategory::CrossSampleWrite
    );
    assert_eq!(
        cat(reads_other_output::module().unwrap(), "reads_other_output"),
        AccessCategory::CrossSampleWrite
    );
    // HostTeam with 2 threads runs it in sample order: the sequential prefix sum, every time.
    let n = 100;
    let xs: Vec<f64> = (0..n).map(|i| 0.1 + i as f64 / 7.0).collect();
    let mut want = vec![0.0f64; n];
    for i in 0..n {
        want[i] = if i > 0 { want[i - 1] + xs[i] } else { xs[i] };
    }
    let x = Tensor::from_vec(&[n], xs).unwrap();
    let p = plan(scan, Structure::HostTeam, Structure::HostTeam)
        .unwrap()
        .with_threads(2);
    for _ in 0..10 {
        let mut y = Tensor::<f64>::zeros(&[n]);
        p.run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
            .unwrap();
        let got: Vec<u64> = y.data().iter().map(|v| v.to_bits()).collect();
        let w: Vec<u64> = want.iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, w);
    }
    // RankPartition (simulated ranks) refuses both, by name.
    for (name, e) in [
        (
            "scan",
            plan(scan, Structure::RankPartition, Structure::HostTeam)
                .map(|p| p.with_simulated_ranks(3)),
        ),
        (
            "reads_other_output",
            plan(
                reads_other_output,
                Structure::RankPartition,
                Structure::HostTeam,
            )
            .map(|p| p.with_simulated_ranks(3)),
        ),
    ] {
        let e = e.unwrap_err().to_string();
        assert!(
            e.contains(&format!("kernel `{name}` is cross_sample_write"))
                && e.contains("cannot be rank-partitioned"),
            "{e}"
        );
    }
}

/// Whether every sample is positive: a mapreduce over `bool` (`land`).
#[eagle::kernel(sample)]
pub fn all_positive(s: usize, x: Tensor<f64, N>, out: Out<Tensor<bool, 1>>) {
    out[0] = out[0] & (x[s] > 0.0);
}

#[test]
fn mapreduce_land_runs_on_bool_tensors_everywhere() {
    let m = all_positive::module().unwrap();
    let info = eagle::ir::access_category(m.function("all_positive").unwrap()).unwrap();
    assert_eq!(info.category, AccessCategory::Mapreduce(ReduceKind::Land));
    let n = 100_003;
    let ones = vec![1.0f64; n];
    let mut one_negative = ones.clone();
    one_negative[77_777] = -1.0;
    for (data, want) in [(ones, true), (one_negative, false)] {
        let x = Tensor::from_vec(&[n], data).unwrap();
        let mut seen = vec![];
        let mut run = |p: eagle::plan::Plan| {
            // Start from the other value: the plan writes the fold over its identity.
            let mut out = Tensor::from_vec(&[1], vec![!want]).unwrap();
            p.run(0, &mut Planes::new().input("x", &x).output("out", &mut out))
                .unwrap();
            seen.push(out.data()[0]);
        };
        for threads in 1..=4 {
            run(plan(all_positive, Structure::HostTeam, Structure::HostTeam)
                .unwrap()
                .with_threads(threads));
        }
        run(plan(all_positive, Structure::DeviceKernel, Structure::HostTeam).unwrap());
        assert_eq!(seen.len(), 5);
        assert!(seen.iter().all(|&b| b == want), "{seen:?}, want {want}");
    }
    // RankPartition keeps the seed's rule: what it gathers is f64.
    let x = Tensor::from_vec(&[n], vec![1.0f64; n]).unwrap();
    let mut out = Tensor::from_vec(&[1], vec![false]).unwrap();
    let e = plan(all_positive, Structure::RankPartition, Structure::HostTeam)
        .unwrap()
        .with_simulated_ranks(2)
        .run(0, &mut Planes::new().input("x", &x).output("out", &mut out))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "RankPartition gathers outputs as f64: output plane `out` is bool; declare it `f64`"
    );
}

/// A sum of `f16` samples: each add in `f32` rounded to `f16`, in the rows-of-32 order.
#[eagle::kernel(sample)]
pub fn sum_f16(s: usize, x: Tensor<f16, N>, out: Out<Tensor<f16, 1>>) {
    out[0] = out[0] + x[s];
}

#[test]
fn mapreduce_over_f16_rounds_after_each_add() {
    let n = 1000;
    let xs: Vec<f16> = (0..n)
        .map(|i| f16::from_f32(0.1 + (i % 7) as f32 * 0.37))
        .collect();
    let x = Tensor::from_vec(&[n], xs.clone()).unwrap();
    // The documented order: rows of ROW samples, each summed from 0 in sample order with an
    // f16 rounding per add, then the rows folded in row order (f16 adds too).
    let add = |a: f16, b: f16| f16::from_f32(a.to_f32() + b.to_f32());
    let want = xs
        .chunks(ROW)
        .map(|row| row.iter().fold(f16::ZERO, |a, &b| add(a, b)))
        .fold(f16::ZERO, add);
    for st in [Structure::HostTeam, Structure::DeviceKernel] {
        let mut out = Tensor::<f16>::zeros(&[1]);
        plan(sum_f16, st, Structure::HostTeam)
            .unwrap()
            .run(0, &mut Planes::new().input("x", &x).output("out", &mut out))
            .unwrap();
        assert_eq!(
            out.data()[0].to_bits(),
            want.to_bits(),
            "{st:?}: {} vs {want}",
            out.data()[0]
        );
    }
}

/// Names in a manifest become file names: one that is not a function name (a path such as
/// `../x`) is refused before any file is read.
#[test]
fn plugin_manifest_names_must_be_function_names() {
    let dir = deployed_histogram("plugin-path-name");
    let mp = dir.join("manifest.json");
    let text = std::fs::read_to_string(&mp).unwrap();
    std::fs::write(&mp, text.replace("\"histogram\"", "\"../histogram\"")).unwrap();
    let e = eagle::plugin::load(&dir, "../histogram")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "plugin manifest field `kernels`: expected function names (letters, digits and `_`), found `../histogram`; deploy the plugin again with this eagle"
    );
}

/// Simulated ranks each hold a copy of the outputs: more than 65,536 is refused, not an
/// allocation failure.
#[test]
fn too_many_simulated_ranks_is_an_error() {
    let n = 100;
    let x = Tensor::from_vec(&[n], vec![0.5; n]).unwrap();
    let mut y = Tensor::<f64>::zeros(&[n]);
    let e = plan(stencil, Structure::RankPartition, Structure::HostTeam)
        .unwrap()
        .with_simulated_ranks(1 << 40)
        .run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("argument `ranks`: simulate at most 65536 ranks in one process"),
        "{e}"
    );
}

/// A plane of width w read with one index: an elementwise op of a row is refused when the plan
/// is built, with the sample kernel's form of the fix.
#[eagle::kernel(sample)]
pub fn wide_plane_read_whole(s: usize, x: Tensor<f64, 2, N>, y: Out<Tensor<f64, N>>) {
    y[s] = 2.0 * x[s];
}

#[test]
fn a_plane_read_with_too_few_indices_and_a_plane_of_another_n_name_the_fix_and_the_planes() {
    let e = plan(
        wide_plane_read_whole,
        Structure::HostTeam,
        Structure::HostTeam,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("`mul` takes scalars or tiles, found `tensor<[N], f64>`; index it down to an element (`x[i]`; in a sample kernel a plane of width w is `x[c][s]`)"),
        "{e}"
    );
    let st = plan(stencil, Structure::HostTeam, Structure::HostTeam).unwrap();
    let x = Tensor::<f64>::zeros(&[5]);
    let mut y4 = Tensor::<f64>::zeros(&[4]);
    let e = st
        .run(0, &mut Planes::new().input("x", &x).output("y", &mut y4))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "plane `y` has 4 samples along its last dim, but an earlier plane has n = 5 (`x`); every per-sample plane has n samples"
    );
}
