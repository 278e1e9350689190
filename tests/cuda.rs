//! The CUDA backend: the emitted CUDA C of every example at P = 4 (insta snapshots), NVRTC
//! compiles of every translation unit and GPU runs (both `#[ignore]`d: `.ci/run` runs the NVRTC
//! ones with `--ignored`, `scripts/gpu-check.sh` all of them with `--include-ignored`; without
//! NVRTC or a GPU they fail), the no-driver errors, and the CUDA emulation (which needs a C++
//! compiler and fails without one).
#![cfg(feature = "cuda")]

mod emulation;
#[path = "../examples/plan_histogram.rs"]
#[allow(dead_code)]
mod plan_histogram;
#[path = "../examples/plan_sample_local.rs"]
#[allow(dead_code)]
mod plan_sample_local;
#[path = "../examples/plan_stencil.rs"]
#[allow(dead_code)]
mod plan_stencil;
mod tutorial;
use emulation::cxx;
use tutorial::*;

use eagle::codegen::{self, cuda, Artifact, Target};
use eagle::ir::EagleFn;
use eagle::plan::{plan, Planes, Structure};
use eagle::{Platform, Session, Tensor};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Every artifact the tutorial steps launch at P = 4, compiled for `cuda` (and run on `sim`),
/// by snapshot name `cuda_<step>_<host function>_p4`.
fn step_artifacts() -> BTreeMap<String, Arc<Artifact>> {
    let mut out = BTreeMap::new();
    for st in steps() {
        for mode in modes(&st) {
            let s = Session::sim(4)
                .unwrap()
                .with_mode(mode.clone())
                .with_target(Target::Cuda);
            let o = st.execute(&s);
            assert!(
                o.result.is_ok(),
                "step {:02} {mode:?}: {:?}",
                st.number,
                o.result
            );
            for r in o.reports {
                let name = format!("cuda_{:02}_{}_p4", st.number, r.artifact.root);
                out.insert(name, r.artifact);
            }
        }
    }
    out
}

/// The sample kernels of the plan examples, specialized for 1000 samples.
fn plan_sources() -> Vec<(&'static str, String)> {
    vec![
        (
            "cuda_plan_histogram",
            eagle::cuda_c::<plan_histogram::histogram>(1, &[("N", 1000)]).unwrap(),
        ),
        (
            "cuda_plan_sample_local",
            eagle::cuda_c::<plan_sample_local::polar>(1, &[("N", 1000)]).unwrap(),
        ),
        (
            "cuda_plan_stencil",
            eagle::cuda_c::<plan_stencil::smooth>(1, &[("N", 1000)]).unwrap(),
        ),
    ]
}

#[test]
fn cuda_c_snapshots_of_every_example_at_p4() {
    let arts = step_artifacts();
    // Every step's host programs, with a device entry for each per-device program.
    assert!(arts.len() >= 20, "only {} artifacts", arts.len());
    for (name, art) in &arts {
        let code = art.cuda.as_ref().expect("compiled for cuda");
        assert!(
            code.entries
                .values()
                .all(|e| e.kind == cuda::EntryKind::Device),
            "{name}"
        );
        insta::assert_snapshot!(name.as_str(), code.kernels());
    }
    for (name, src) in plan_sources() {
        insta::assert_snapshot!(name, src);
    }
}

#[test]
fn mapreduce_kernels_get_a_rows_entry_and_others_do_not() {
    let hist = plan_sources()[0].1.clone();
    assert!(!hist.contains("void histogram__samples("));
    assert!(hist.contains("void histogram__rows("));
    assert!(hist.contains("v2 += (row - row_lo) * 64LL; // this row's partial"));
    let polar = &plan_sources()[1].1;
    assert!(polar.contains("void polar__samples("));
    assert!(!polar.contains("__rows("));
}

/// Fails the test when NVRTC cannot be loaded (the NVRTC tests are `#[ignore]`d, and run with
/// `--ignored` where NVRTC is installed).
fn nvrtc() {
    assert!(
        cuda::nvrtc_available(),
        "NVRTC (libnvrtc.so) is not on the library path; `.ci/run` installs it (pip wheel nvidia-cuda-nvrtc-cu12); run without `--ignored` to leave the NVRTC tests out"
    );
}

#[test]
#[ignore = "needs NVRTC (libnvrtc.so.12); run by .ci/run and scripts/gpu-check.sh"]
fn nvrtc_compiles_every_translation_unit() {
    nvrtc();
    let mut units: Vec<(String, cuda::CudaCode)> = step_artifacts()
        .into_iter()
        .map(|(n, a)| (n, a.cuda.clone().unwrap()))
        .collect();
    for (name, m) in [
        ("histogram", plan_histogram::histogram::module().unwrap()),
        ("polar", plan_sample_local::polar::module().unwrap()),
        ("smooth", plan_stencil::smooth::module().unwrap()),
    ] {
        let mut b = codegen::Bindings::world(1);
        b.dims.insert("N".into(), 1000);
        let (a, _) = codegen::compile(&m, name, &b, Target::Cuda).unwrap();
        units.push((name.to_string(), a.cuda.clone().unwrap()));
    }
    for (name, code) in &units {
        for arch in ["compute_80", "compute_90"] {
            let ptx =
                cuda::compile_ptx(code, arch).unwrap_or_else(|e| panic!("{name} for {arch}: {e}"));
            for sym in code.entries.keys() {
                assert!(
                    ptx.contains(&format!(".entry {sym}(")),
                    "{name}: no entry `{sym}` in the PTX for {arch}"
                );
            }
            // Contraction is off: no fused multiply-add unless the source asked for one.
            if !code.kernels().contains("fma") {
                assert!(!ptx.contains("fma.rn"), "{name}: contracted to fma");
            }
        }
        // What a run loads: a cubin (an ELF image) for the device's real architecture.
        let cubin = cuda::compile_cubin(code, "sm_90").unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(&cubin[..4], b"\x7fELF", "{name}");
    }
}

/// NVRTC's images go through the persistent cache: after the in-process images are
/// forgotten, the same source is read from disk (no NVRTC call), a source with another
/// constant is a miss, and a damaged entry is a logged miss that NVRTC rebuilds with the
/// same bytes.
#[test]
#[ignore = "needs NVRTC (libnvrtc.so.12); run by .ci/run and scripts/gpu-check.sh"]
fn nvrtc_images_are_kept_on_disk_and_a_damaged_entry_is_rebuilt() {
    nvrtc();
    let Some(disk) = codegen::disk::global() else {
        panic!("the disk cache is off (EAGLE_CACHE_DIR=off): this test needs it on");
    };
    let unit = |c: f32| {
        let m = eagle::ir::parse_module(&format!(
            "device @k(%0 ctx: ctx, %1 x: tensor<[1, 8], f32>, out %2 y: tensor<[1, 8], f32>) {{
  %3 = const 0 : index
  %4 = load %1[%3, %3] : tile<[1, 8], f32>
  %5 = const {c:?} : f32
  %6 = add %4, %5 : tile<[1, 8], f32>
  store %6, %2[%3, %3]
}}

host @h(%0 x: tensor<[1, 8], f32>, out %1 y: tensor<[1, 8], f32>) {{
  %2 = const 0 : index
  dispatch @k(%0, %1) device %2
}}
"
        ))
        .unwrap();
        let (a, _) = codegen::compile(&m, "h", &codegen::Bindings::world(1), Target::Cuda).unwrap();
        a.cuda.clone().unwrap()
    };
    // A constant no other test uses, so the first lookup may only miss or hit this test's
    // own earlier run.
    let one = unit(1.0625);
    let path = disk.entry_path(
        "nvrtc",
        &cuda::nvrtc_disk_key(&one, "compute_80", None),
        "ptx",
    );
    let _ = std::fs::remove_file(&path);
    cuda::clear_image_cache();
    let s0 = codegen::disk::stats();
    let first = cuda::compile_ptx(&one, "compute_80").unwrap();
    let s1 = codegen::disk::stats();
    assert_eq!((s1.misses - s0.misses, s1.writes - s0.writes), (1, 1));
    assert!(path.exists(), "{}", path.display());
    cuda::clear_image_cache();
    let again = cuda::compile_ptx(&one, "compute_80").unwrap();
    let s2 = codegen::disk::stats();
    assert_eq!((s2.hits - s1.hits, s2.writes - s1.writes), (1, 0));
    assert_eq!(again, first);
    // Another constant: another key.
    let two = unit(2.0625);
    assert_ne!(
        cuda::nvrtc_disk_key(&two, "compute_80", None),
        cuda::nvrtc_disk_key(&one, "compute_80", None)
    );
    assert_ne!(
        cuda::nvrtc_disk_key(&one, "compute_80", Some(12080)),
        cuda::nvrtc_disk_key(&one, "compute_80", None),
        "the driver's version is part of the key"
    );
    // Truncated: a miss, rebuilt by NVRTC with the same PTX.
    let b = std::fs::read(&path).unwrap();
    std::fs::write(&path, &b[..b.len() / 2]).unwrap();
    cuda::clear_image_cache();
    let rebuilt = cuda::compile_ptx(&one, "compute_80").unwrap();
    let s3 = codegen::disk::stats();
    assert_eq!((s3.corrupt - s2.corrupt, s3.writes - s2.writes), (1, 1));
    assert_eq!(rebuilt, first);
    assert_eq!(std::fs::read(&path).unwrap().len(), b.len());
}

#[test]
#[ignore = "needs NVRTC (libnvrtc.so.12); run by .ci/run and scripts/gpu-check.sh"]
fn nvrtc_errors_show_the_log_and_the_kernels() {
    nvrtc();
    let code = cuda::CudaCode {
        source: "extern \"C\" __global__ void broken(const int* p) { undefined_name(p); }".into(),
        sites: vec![],
        entries: [(
            "broken".to_string(),
            cuda::Entry {
                function: "broken".into(),
                symbol: "broken".into(),
                kind: cuda::EntryKind::Device,
            },
        )]
        .into(),
        atomic_signals: false,
    };
    let e = cuda::compile_ptx(&code, "compute_80").unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(&e, codegen::CodegenError::Nvrtc { kernels, arch, .. } if kernels == "`broken`" && arch == "compute_80"),
        "{e:?}"
    );
    assert!(msg.contains("undefined_name"), "{msg}");
}

#[test]
fn cuda_without_a_driver_is_an_error_that_names_the_fix() {
    if eagle::runtime::cuda::driver_available() {
        // With a driver the same call is no no-driver error (the no-driver path is checked
        // on machines without one, and with a fake library by
        // `cli::a_libcuda_without_the_driver_functions_is_the_no_driver_error`).
        match Session::new(Platform::Cuda, vec![0]) {
            Ok(s) => assert_eq!(s.world_size(), 1),
            Err(e) => assert!(
                matches!(
                    e,
                    eagle::Error::Runtime(
                        eagle::runtime::RuntimeError::Cuda { .. }
                            | eagle::runtime::RuntimeError::Devices(_)
                    )
                ),
                "{e:#?}"
            ),
        }
        return;
    }
    let e = Session::new(Platform::Cuda, vec![0]).unwrap_err();
    assert!(
        matches!(
            e,
            eagle::Error::Runtime(eagle::runtime::RuntimeError::NoCudaDriver { .. })
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(msg.contains("no CUDA driver was found"), "{msg}");
    assert!(msg.contains("-p sim"), "{msg}");
    assert_eq!(Platform::Cuda.max_devices(), 0);
    // A plan on the GPU says the same, at run time.
    let x = Tensor::from_vec(&[4], vec![0.5f64; 4]).unwrap();
    let mut counts = Tensor::<f64>::zeros(&[64]);
    let p = plan(
        plan_histogram::histogram,
        Structure::DeviceKernel,
        Structure::HostTeam,
    )
    .unwrap()
    .with_platform(Platform::Cuda);
    let e = p
        .run(
            0,
            &mut Planes::new().input("x", &x).output("counts", &mut counts),
        )
        .unwrap_err();
    assert!(
        matches!(
            e,
            eagle::Error::Runtime(eagle::runtime::RuntimeError::NoCudaDriver { .. })
        ),
        "{e:?}"
    );
}

/// The number of GPUs; fails the test without a driver or a device (the GPU tests are
/// `#[ignore]`d, and run with `--include-ignored` by `scripts/gpu-check.sh`).
fn gpu() -> usize {
    assert!(
        eagle::runtime::cuda::driver_available(),
        "no CUDA driver on this machine: this test needs a GPU (run without `--ignored`)"
    );
    match eagle::runtime::cuda::device_count() {
        Ok(n) if n > 0 => n,
        other => panic!("no CUDA device ({other:?}): this test needs a GPU"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU; run by scripts/gpu-check.sh"]
fn gpu_steps_match_sim_bit_for_bit() {
    gpu();
    steps_match_sim(&[1, 2, 4], "on cuda", &|p| {
        Session::new(Platform::Cuda, vec![0; p]).unwrap()
    });
}

/// Runs every step and mode at each world size in `ps` on `sim` and on `session(p)`, and
/// requires the same output digest.
fn steps_match_sim(ps: &[usize], on: &str, session: &dyn Fn(usize) -> Session) {
    for &p in ps {
        for st in steps()
            .into_iter()
            .filter(|st| st.world.refuses(p).is_none())
        {
            for mode in modes(&st) {
                let want = st.execute(
                    &Session::sim(p)
                        .unwrap()
                        .with_mode(mode.clone())
                        .with_digest(true),
                );
                assert!(want.result.is_ok());
                assert!(want.digest.is_some(), "the sim session computes digests");
                let got = st.execute(&session(p).with_mode(mode.clone()).with_digest(true));
                assert!(
                    got.result.is_ok(),
                    "step {:02} {mode:?} at P={p} {on}: {:?}",
                    st.number,
                    got.result
                );
                assert_eq!(
                    got.digest, want.digest,
                    "step {:02} {mode:?} P={p} {on}",
                    st.number
                );
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU; run by scripts/gpu-check.sh"]
fn gpu_mapreduce_is_bit_identical_to_the_cpu() {
    gpu();
    let n = 100_003;
    let x = Tensor::from_vec(
        &[n],
        (0..n)
            .map(|i| ((i as f64) * 0.618_033_988_75).fract())
            .collect(),
    )
    .unwrap();
    let mut want = Tensor::<f64>::zeros(&[64]);
    plan(
        plan_histogram::histogram,
        Structure::DeviceKernel,
        Structure::HostTeam,
    )
    .unwrap()
    .run(
        0,
        &mut Planes::new().input("x", &x).output("counts", &mut want),
    )
    .unwrap();
    let mut got = Tensor::<f64>::zeros(&[64]);
    plan(
        plan_histogram::histogram,
        Structure::DeviceKernel,
        Structure::HostTeam,
    )
    .unwrap()
    .with_platform(Platform::Cuda)
    .run(
        0,
        &mut Planes::new().input("x", &x).output("counts", &mut got),
    )
    .unwrap();
    let bits = |t: &Tensor<f64>| t.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&got), bits(&want));
}

#[test]
fn emulated_cuda_steps_match_sim_bit_for_bit() {
    cxx();
    steps_match_sim(&[1, 3, 4], "in the CUDA emulation", &|p| {
        Session::cuda_emulated(vec![0; p]).unwrap()
    });
}

#[path = "../examples/planted_failure.rs"]
#[allow(dead_code)]
mod planted_failure;

#[test]
fn emulated_failure_on_one_rank_ends_the_run_with_its_error() {
    cxx();
    let s = Session::cuda_emulated(vec![0, 0])
        .unwrap()
        .with_wait_timeout(std::time::Duration::from_secs(30));
    let t0 = std::time::Instant::now();
    let e = planted_failure::run(&s).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with("rank 1 failed: function `faulty`, op `%"),
        "{msg}"
    );
    assert!(
        msg.contains("the offset in dim 0 is 8 but the largest offset that fits a tile of extent 8 in extent 8 is 0 (in the CUDA emulation)"),
        "{msg}"
    );
    // Rank 0 stopped waiting when rank 1 failed, long before the wait timeout.
    assert!(t0.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn emulated_wait_timeout_names_the_signal_value() {
    cxx();
    // One rank: rank 0 waits for a notify that only rank 1 would send.
    let s = Session::cuda_emulated(vec![0])
        .unwrap()
        .with_wait_timeout(std::time::Duration::from_millis(300));
    let e = planted_failure::run(&s).unwrap_err();
    assert_eq!(
        e.to_string(),
        "rank 0 failed: a wait timed out: the signal held 0, waiting for 1; check that a peer notifies it (run on `-p sim` to get the deadlock report) (in the CUDA emulation)"
    );
}

fn plan_outputs(platform: Option<bool>, structure: Structure) -> Vec<Vec<u64>> {
    let n = 1000;
    let xs: Vec<f64> = (0..n)
        .map(|i| ((i as f64) * 0.618_033_988_75).fract())
        .collect();
    let x = Tensor::from_vec(&[n], xs.clone()).unwrap();
    let p2 =
        Tensor::from_vec(&[2, n], xs.iter().chain(xs.iter().rev()).copied().collect()).unwrap();
    let on = |p: eagle::plan::Plan| match platform {
        Some(emulate) => p.with_platform(Platform::Cuda).with_cuda_emulation(emulate),
        None => p,
    };
    let bits = |t: &Tensor<f64>| t.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    let mut counts = Tensor::<f64>::zeros(&[64]);
    on(plan(
        plan_histogram::histogram,
        structure,
        Structure::DeviceKernel,
    )
    .unwrap()
    .with_simulated_ranks(3))
    .run(
        0,
        &mut Planes::new().input("x", &x).output("counts", &mut counts),
    )
    .unwrap();
    let (mut r, mut r2) = (Tensor::<f64>::zeros(&[n]), Tensor::<f64>::zeros(&[n]));
    on(
        plan(plan_sample_local::polar, structure, Structure::DeviceKernel)
            .unwrap()
            .with_simulated_ranks(3),
    )
    .run(
        0,
        &mut Planes::new()
            .input("p", &p2)
            .output("r", &mut r)
            .output("r2", &mut r2),
    )
    .unwrap();
    let mut y = Tensor::<f64>::zeros(&[n]);
    on(
        plan(plan_stencil::smooth, structure, Structure::DeviceKernel)
            .unwrap()
            .with_simulated_ranks(3),
    )
    .run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
    .unwrap();
    vec![bits(&counts), bits(&r), bits(&r2), bits(&y)]
}

#[test]
fn emulated_plans_match_the_cpu_bit_for_bit() {
    cxx();
    for structure in [Structure::DeviceKernel, Structure::RankPartition] {
        let want = plan_outputs(None, structure);
        let got = plan_outputs(Some(true), structure);
        assert_eq!(got, want, "{structure:?}");
        // The histogram counts every sample once.
        let total: f64 = want[0].iter().map(|b| f64::from_bits(*b)).sum();
        assert_eq!(total, 1000.0);
    }
}

#[test]
#[ignore = "needs NVRTC (libnvrtc.so.12); run by .ci/run and scripts/gpu-check.sh"]
fn plugins_deployed_with_the_cuda_target_carry_ptx() {
    nvrtc();
    use eagle::plugin::{deploy_with, load, DeployOptions};
    let dir = std::env::temp_dir().join(format!("eagle-cuda-plugin-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let p = plan(
        plan_histogram::histogram,
        Structure::DeviceKernel,
        Structure::HostTeam,
    )
    .unwrap();
    let opts = DeployOptions {
        cuda_dims: vec![("N".into(), 1000)],
        cuda_archs: vec!["compute_80".into(), "compute_90".into()],
    };
    deploy_with(&p, &dir, &opts).unwrap();
    for f in [
        "histogram.cu",
        "histogram.compute_80.ptx",
        "histogram.compute_90.ptx",
    ] {
        assert!(dir.join("cuda").join(f).is_file(), "{f}");
    }
    // The PTX on disk is what a run uses after loading (marked here to tell it from NVRTC's).
    let ptx_path = dir.join("cuda").join("histogram.compute_90.ptx");
    let mut ptx = std::fs::read_to_string(&ptx_path).unwrap();
    ptx.push_str("\n// carried by the plugin\n");
    std::fs::write(&ptx_path, &ptx).unwrap();
    // Its hash no longer matches: refused by name, and nothing reaches the PTX cache.
    let e = load(&dir, "histogram").unwrap_err().to_string();
    assert!(
        e.starts_with("plugin sidecar field `cuda.ptx_hashes[1]`: expected `sha256:"),
        "{e}"
    );
    // With the sidecar carrying the new hash (as a deploy of that PTX would write) it loads.
    let sc = dir.join("histogram.json");
    let mut sidecar: eagle::plugin::Sidecar =
        serde_json::from_str(&std::fs::read_to_string(&sc).unwrap()).unwrap();
    {
        use sha2::Digest;
        let hex: String = sha2::Sha256::digest(ptx.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        sidecar.cuda.as_mut().unwrap().ptx_hashes[1] = format!("sha256:{hex}");
    }
    std::fs::write(&sc, serde_json::to_string_pretty(&sidecar).unwrap()).unwrap();
    let loaded = load(&dir, "histogram").unwrap();
    let c = loaded.sidecar.cuda.clone().expect("cuda sidecar");
    assert_eq!(loaded.sidecar.targets, vec!["cpu", "cuda"]);
    assert_eq!(c.dims.get("N"), Some(&1000));
    let code = cuda::CudaCode {
        source: std::fs::read_to_string(dir.join("cuda").join("histogram.cu")).unwrap(),
        sites: vec![],
        entries: Default::default(),
        atomic_signals: false,
    };
    assert!(cuda::compile_ptx(&code, "compute_90")
        .unwrap()
        .ends_with("// carried by the plugin\n"));
    // A modified CUDA C file is refused by name.
    let cu = dir.join("cuda").join("histogram.cu");
    let mut src = std::fs::read_to_string(&cu).unwrap();
    src.push_str("// edited\n");
    std::fs::write(&cu, src).unwrap();
    let e = load(&dir, "histogram").unwrap_err().to_string();
    assert!(
        e.starts_with("plugin sidecar field `cuda.source_hash`"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tiles_too_large_for_a_gpu_thread_are_refused_by_the_cuda_backend() {
    // A sample kernel runs one sample per GPU thread: a 16384-element f64 tile is 128 KiB of
    // thread-local storage, over the 16 KiB a sample thread may hold. The CPU backend takes it.
    let text =
        "sample @big(%0 s: index, %1 x: tensor<[16384], f64>, out %2 y: tensor<[16384], f64>) {
  %3 = const 0 : index
  %4 = load %1[%3] : tile<[16384], f64>
  store %4, %2[%3]
}
";
    let m = eagle::ir::parse_module(text).unwrap();
    let b = codegen::Bindings::world(1);
    codegen::compile(&m, "big", &b, Target::Cpu).unwrap();
    let e = codegen::compile(&m, "big", &b, Target::Cuda).unwrap_err();
    assert!(
        matches!(&e, codegen::CodegenError::Unsupported { backend: "cuda", function, .. } if function == "big"),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "cuda backend: function `big`: its tiles need 131072 bytes per GPU thread (this tile of 16384 f64 elements: 131072), more than the 16384 a sample kernel's thread may hold; use smaller tiles"
    );
}

#[test]
fn tiles_too_large_for_a_gpu_block_are_refused_naming_the_op_and_its_line() {
    // A per-device program stages a tile op's operands in its block's shared memory: two
    // [128, 64] f32 operands are 64 KiB, over the 48 KiB.
    let text = "device @wide(%0 ctx: ctx, %1 a: tensor<[128, 64], f32>, out %2 c: tensor<[128, 128], f32>) {
  %3 = const 0 : index
  %4 = load %1[%3, %3] : tile<[128, 64], f32>
  %5 = transpose %4 : tile<[64, 128], f32>
  %6 = matmul %4, %5 : tile<[128, 128], f32>
  store %6, %2[%3, %3]
}
";
    let m = eagle::ir::parse_module(text).unwrap();
    let b = codegen::Bindings::world(1);
    codegen::compile(&m, "wide", &b, Target::Cpu).unwrap();
    let e = codegen::compile(&m, "wide", &b, Target::Cuda).unwrap_err();
    assert_eq!(
        e.to_string(),
        "cuda backend: function `wide`: op `%6 = matmul %4, %5 : tile<[128, 128], f32>`: `matmul` stages 65536 bytes of tiles in shared memory, more than the 49152 a per-device program's block may hold; use smaller tiles (its tile operands together under 49152 bytes)"
    );
}

#[test]
#[ignore = "needs a CUDA GPU; run by scripts/gpu-check.sh"]
fn gpu_device_the_machine_lacks_is_named() {
    let n = gpu();
    let e = Session::new(Platform::Cuda, vec![0, n]).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "device list (`-d/--devices`): device {n} does not exist: this machine has {n} CUDA device(s), 0 to {}; several ranks may share one, e.g. `-p cuda -d 0,0,0,0`",
            n - 1
        )
    );
}

/// The bytes of `n` values of dtype `d` drawn from edge cases and a fixed pattern; `nonzero`
/// keeps integers away from 0 (divisors).
fn edge_values(d: eagle::ir::DType, n: usize, seed: u64, nonzero: bool) -> Vec<u8> {
    use eagle::ir::DType as D;
    let mut out = vec![];
    let mut x = seed;
    for i in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let r = (x >> 33) as i64 - (1 << 30);
        let k = i % 10;
        match d {
            D::I32 => {
                let v = [
                    i32::MIN,
                    i32::MAX,
                    -1,
                    1,
                    0,
                    7,
                    -7,
                    r as i32,
                    (r >> 8) as i32,
                    3,
                ][k];
                let v = if nonzero && v == 0 { 5 } else { v };
                out.extend(v.to_le_bytes());
            }
            D::I64 | D::Index => {
                let v = [i64::MIN, i64::MAX, -1, 1, 0, 7, -7, r << 20, r, 3][k];
                let v = if nonzero && v == 0 { 5 } else { v };
                out.extend(v.to_le_bytes());
            }
            D::U32 => {
                let v = [
                    u32::MAX,
                    1,
                    0,
                    7,
                    2_147_483_648,
                    r as u32,
                    3,
                    9,
                    100,
                    65_536,
                ][k];
                let v = if nonzero && v == 0 { 5 } else { v };
                out.extend(v.to_le_bytes());
            }
            D::U64 => {
                let v = [u64::MAX, 1, 0, 7, 1 << 63, r as u64, 3, 9, 100, 1 << 40][k];
                let v = if nonzero && v == 0 { 5 } else { v };
                out.extend(v.to_le_bytes());
            }
            D::F32 => {
                let v = [
                    f32::NAN,
                    f32::INFINITY,
                    f32::NEG_INFINITY,
                    -0.0,
                    0.0,
                    3.0e38,
                    1e-40,
                    r as f32 * 1e-3,
                    -2.5,
                    1.0,
                ][k];
                out.extend(v.to_le_bytes());
            }
            D::F64 => {
                let v = [
                    f64::NAN,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                    -0.0,
                    0.0,
                    1.7e308,
                    5e-324,
                    r as f64 * 1e-3,
                    -2.5,
                    1.0,
                ][k];
                out.extend(v.to_le_bytes());
            }
            D::Bool => out.push((r & 1) as u8),
            D::I8 => {
                let v = [
                    i8::MIN,
                    i8::MAX,
                    -1,
                    1,
                    0,
                    7,
                    -7,
                    r as i8,
                    (r >> 8) as i8,
                    3,
                ][k];
                out.extend((if nonzero && v == 0 { 5 } else { v }).to_le_bytes());
            }
            D::U8 => {
                let v = [u8::MAX, 1, 0, 7, 128, r as u8, 3, 9, 100, 255][k];
                out.extend((if nonzero && v == 0 { 5 } else { v }).to_le_bytes());
            }
            D::I16 => {
                let v = [
                    i16::MIN,
                    i16::MAX,
                    -1,
                    1,
                    0,
                    7,
                    -7,
                    r as i16,
                    (r >> 8) as i16,
                    3,
                ][k];
                out.extend((if nonzero && v == 0 { 5 } else { v }).to_le_bytes());
            }
            D::U16 => {
                let v = [u16::MAX, 1, 0, 7, 32768, r as u16, 3, 9, 100, 256][k];
                out.extend((if nonzero && v == 0 { 5 } else { v }).to_le_bytes());
            }
            D::F16 | D::BF16 => {
                // NaN, inf, -inf, -0, 0, the largest finite, a subnormal, any, -2.5, 1.
                let f16 = [
                    0x7e00u16,
                    0x7c00,
                    0xfc00,
                    0x8000,
                    0,
                    0x7bff,
                    0x0001,
                    r as u16 & 0x7bff,
                    0xc100,
                    0x3c00,
                ];
                let bf = [
                    0x7fc0u16,
                    0x7f80,
                    0xff80,
                    0x8000,
                    0,
                    0x7f7f,
                    0x0001,
                    r as u16 & 0x7f7f,
                    0xc020,
                    0x3f80,
                ];
                let v = if d == D::F16 { f16[k] } else { bf[k] };
                out.extend(v.to_le_bytes());
            }
            D::F8E4M3 => {
                // NaN, -NaN, the largest and its negation, -0, 0, the smallest subnormal,
                // any, -2.5, 1.
                let v = [0x7fu8, 0xff, 0x7e, 0xfe, 0x80, 0, 0x01, r as u8, 0xc2, 0x38][k];
                out.push(v);
            }
            D::F8E5M2 => {
                // NaN, inf, -inf, -0, 0, the largest, the smallest subnormal, any, -2.5, 1.
                let v = [0x7eu8, 0x7c, 0xfc, 0x80, 0, 0x7b, 0x01, r as u8, 0xc1, 0x3c][k];
                out.push(v);
            }
            D::E8M0 => {
                // NaN, 2^-127, 2^127, 1, 2, any, 0.5, 2^-126, 2^73, 2^-27.
                let v = [0xffu8, 0, 254, 127, 128, r as u8, 126, 1, 200, 100][k];
                out.push(v);
            }
        }
    }
    out
}

/// A host program whose per-device program applies every binary, unary, comparison and cast
/// op of the IR to tiles of dtype `d` (2 x 40 elements per rank), one output row per op.
fn every_op_module(d: eagle::ir::DType) -> (String, usize, Vec<eagle::ir::DType>) {
    use eagle::ir::DType as D;
    let t = d.name();
    let float = d.is_float();
    let mut bin = vec!["add", "sub", "mul", "div", "min", "max"];
    let mut un = if d.is_signed() || float {
        vec!["neg", "abs"]
    } else {
        vec![]
    };
    if float {
        un.push("sqrt");
    } else {
        bin.extend(["rem", "and", "or", "xor"]);
        un.push("not");
    }
    let casts: Vec<D> = D::ALL
        .into_iter()
        .filter(|&c| c != d && c != D::Index)
        .collect();
    let rows = bin.len() + un.len() + 6 + 2 + usize::from(float);
    let tile = format!("tile<[2, 40], {t}>");
    let mut body = String::new();
    let mut v = 100;
    let mut next = || {
        v += 1;
        v
    };
    let mut row = 0;
    let mut store = |body: &mut String, val: usize, next: &mut dyn FnMut() -> i32| {
        let k = next();
        let s = next();
        body.push_str(&format!(
            "  %{k} = const {row} : index\n  %{s} = slice %3[%{k}] : tensor<[2, 40], {t}>\n  store %{val}, %{s}[%50, %50]\n"
        ));
        row += 1;
    };
    body.push_str(&format!(
        "  %50 = const 0 : index\n  %51 = load %1[%50, %50] : {tile}\n  %52 = load %2[%50, %50] : {tile}\n"
    ));
    for op in &bin {
        let r = next();
        body.push_str(&format!("  %{r} = {op} %51, %52 : {tile}\n"));
        store(&mut body, r as usize, &mut next);
    }
    for op in &un {
        let r = next();
        body.push_str(&format!("  %{r} = {op} %51 : {tile}\n"));
        store(&mut body, r as usize, &mut next);
    }
    for c in ["eq", "ne", "lt", "le", "gt", "ge"] {
        let (b, r) = (next(), next());
        body.push_str(&format!(
            "  %{b} = cmp {c} %51, %52 : tile<[2, 40], bool>\n  %{r} = select %{b}, %51, %52 : {tile}\n"
        ));
        store(&mut body, r as usize, &mut next);
    }
    // A scalar broadcast, and a scalar op (the scalar path of the same code).
    let (s, r) = (next(), next());
    let three = if float { "3.0" } else { "3" };
    body.push_str(&format!(
        "  %{s} = const {three} : {t}\n  %{r} = mul %51, %{s} : {tile}\n"
    ));
    store(&mut body, r as usize, &mut next);
    let (e, q, r) = (next(), next(), next());
    body.push_str(&format!(
        "  %{e} = elem %1[%50, %50] : {t}\n  %{q} = add %{e}, %{s} : {t}\n  %{r} = add %52, %{q} : {tile}\n"
    ));
    store(&mut body, r as usize, &mut next);
    if float {
        let r = next();
        body.push_str(&format!("  %{r} = fma %51, %52, %51 : {tile}\n"));
        store(&mut body, r as usize, &mut next);
    }
    let mut cast_params = String::new();
    for (i, c) in casts.iter().enumerate() {
        let p = 4 + i;
        cast_params.push_str(&format!(", out %{p} c{i}: tensor<[2, 40], {}>", c.name()));
        let r = next();
        body.push_str(&format!(
            "  %{r} = cast %51 : tile<[2, 40], {}>\n  store %{r}, %{p}[%50, %50]\n",
            c.name()
        ));
    }
    assert_eq!(row, rows);
    let mut host_params = String::new();
    let mut host_slices = String::new();
    let mut host_args = String::new();
    for (i, c) in casts.iter().enumerate() {
        host_params.push_str(&format!(
            ", out %{} c{i}: tensor<[NR, 2, 40], {}>",
            3 + i,
            c.name()
        ));
        host_slices.push_str(&format!(
            "    %{} = slice %{}[%91] : tensor<[2, 40], {}>\n",
            200 + i,
            3 + i,
            c.name()
        ));
        host_args.push_str(&format!(", %{}", 200 + i));
    }
    let text = format!(
        "device @ops(%0 ctx: ctx, %1 x: tensor<[2, 40], {t}>, %2 z: tensor<[2, 40], {t}>, out %3 y: tensor<[{rows}, 2, 40], {t}>{cast_params}) {{\n{body}}}\n\n\
host @every_op(%0 x: tensor<[NR, 2, 40], {t}>, %1 z: tensor<[NR, 2, 40], {t}>, out %2 y: tensor<[NR, {rows}, 2, 40], {t}>{host_params}) {{\n  %89 = world_size : index\n  %90 = const 0 : index\n  for %91 in %90..%89 {{\n    %92 = slice %0[%91] : tensor<[2, 40], {t}>\n    %93 = slice %1[%91] : tensor<[2, 40], {t}>\n    %94 = slice %2[%91] : tensor<[{rows}, 2, 40], {t}>\n{host_slices}    dispatch @ops(%92, %93, %94{host_args}) device %91\n  }}\n}}\n"
    );
    (text, rows, casts)
}

#[test]
fn emulated_cuda_matches_the_cpu_on_every_op_and_dtype() {
    use eagle::ir::DType as D;
    use eagle::runtime::{run_with, Arg, RunOptions};
    cxx();
    let p = 2usize;
    for d in [
        D::I8,
        D::U8,
        D::I16,
        D::U16,
        D::F16,
        D::BF16,
        D::F8E4M3,
        D::F8E5M2,
        D::E8M0,
        D::I32,
        D::I64,
        D::U32,
        D::U64,
        D::F32,
        D::F64,
    ] {
        let (text, rows, casts) = every_op_module(d);
        let m = eagle::ir::parse_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        eagle::ir::verify_module(&m).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let mut b = codegen::Bindings::world(p as u64);
        b.dims.insert("NR".into(), p as u64);
        let (art, _) = codegen::compile(&m, "every_op", &b, Target::Cuda).unwrap();
        if cuda::nvrtc_available() {
            let code = art.cuda.as_ref().unwrap();
            cuda::compile_ptx(code, "compute_80").unwrap_or_else(|e| panic!("{d}: {e}"));
        }
        let x = edge_values(d, p * 80, 1, false);
        let z = edge_values(d, p * 80, 2, true);
        let run = |opts: &RunOptions| -> Vec<Vec<u8>> {
            let mut y = vec![0u8; p * rows * 80 * d.size()];
            let mut cs: Vec<Vec<u8>> = casts.iter().map(|c| vec![0u8; p * 80 * c.size()]).collect();
            let mut args = vec![
                Arg::In(vec![p, 2, 40], d, (&x[..]).into()),
                Arg::In(vec![p, 2, 40], d, (&z[..]).into()),
                Arg::Out(vec![p, rows, 2, 40], d, &mut y),
            ];
            for (c, buf) in casts.iter().zip(cs.iter_mut()) {
                args.push(Arg::Out(vec![p, 2, 40], *c, buf));
            }
            run_with(&art, &mut args, p, opts).unwrap_or_else(|e| panic!("{d}: {e}"));
            drop(args);
            std::iter::once(y).chain(cs).collect()
        };
        let want = run(&RunOptions::default());
        let got = run(&RunOptions {
            platform: Platform::Cuda,
            devices: vec![0; p],
            cuda_emulate: true,
            ..RunOptions::default()
        });
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            let what = if k == 0 {
                format!("ops on {d}")
            } else {
                format!("cast {d} -> {}", casts[k - 1])
            };
            let od = if k == 0 { d } else { casts[k - 1] };
            let es = od.size();
            // Bit for bit, except that any NaN equals any NaN: NaN bits are not portable
            // (docs/gpu.md, "Determinism").
            let nan = |b: &[u8]| match od {
                D::F32 => f32::from_le_bytes(b.try_into().unwrap()).is_nan(),
                D::F64 => f64::from_le_bytes(b.try_into().unwrap()).is_nan(),
                _ => false,
            };
            let differs = |i: usize| {
                let (a, b) = (&g[i * es..(i + 1) * es], &w[i * es..(i + 1) * es]);
                a != b && !(nan(a) && nan(b))
            };
            if let Some(i) = (0..w.len() / es).find(|&i| differs(i)) {
                panic!(
                    "{what}: element {i} (row {}) differs: emulated {:?}, cpu {:?}",
                    i / 80 % rows.max(1),
                    &g[i * es..(i + 1) * es],
                    &w[i * es..(i + 1) * es]
                );
            }
        }
    }
}

#[test]
fn a_sample_kernel_calling_a_compute_kernel_runs_in_thread_mode() {
    cxx();
    let text =
        "compute @square_at(%0 x: tensor<[N], f64>, out %1 y: tensor<[N], f64>, %2 s: index) {
  %3 = elem %0[%2] : f64
  %4 = mul %3, %3 : f64
  set_elem %4, %1[%2]
}

sample @squares(%0 s: index, %1 x: tensor<[N], f64>, out %2 y: tensor<[N], f64>) {
  call @square_at(%1, %2, %0)
}
";
    let m = eagle::ir::parse_module(text).unwrap();
    let src = {
        let mut b = codegen::Bindings::world(1);
        b.dims.insert("N".into(), 100);
        let (a, _) = codegen::compile(&m, "squares", &b, Target::Cuda).unwrap();
        a.cuda.as_ref().unwrap().kernels().to_string()
    };
    // The compute kernel is emitted in thread mode for the sample kernel that calls it.
    assert!(src.contains("__device__ int eg_f_square_at__t("), "{src}");
    assert!(
        src.contains("if (eg_f_square_at__t(rt, v1, v2, v0)) return 1;"),
        "{src}"
    );
    let run = |emulate: Option<bool>| {
        let x = Tensor::from_vec(&[100], (0..100).map(|i| i as f64 * 0.5 - 7.0).collect()).unwrap();
        let mut y = Tensor::<f64>::zeros(&[100]);
        let mut p =
            eagle::plan::plan_module(&m, "squares", Structure::DeviceKernel, Structure::HostTeam)
                .unwrap();
        if let Some(e) = emulate {
            p = p.with_platform(Platform::Cuda).with_cuda_emulation(e);
        }
        p.run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
            .unwrap();
        y.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    };
    let want = run(None);
    assert_eq!(f64::from_bits(want[3]), 30.25);
    assert_eq!(run(Some(true)), want);
}
