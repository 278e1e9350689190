//! Real programs against the peers a user would pick instead (issue 40, item 1), one thread,
//! in the same run:
//!
//! - eagle on platform `cpu` (arguments in place) and on `sim` (copied in and out per launch),
//!   P = 1, the examples' own programs (`examples/tp_ffn.rs`, `softmax.rs`, `layernorm.rs`,
//!   `log_softmax.rs`, `gelu.rs`, `rotary.rs`) at their sizes, and single-head attention
//!   (`attention` here: 128 queries over 128 keys, d = 64) and the MoE expert FFN
//!   (`expert_ffn`: `relu(x W1) W2` at `moe_dispatch_combine`'s sizes), both checked against the
//!   peer;
//! - the same computation in plain Rust with `ndarray` (`dot` is `matrixmultiply`'s GEMM) and
//!   `std`'s `f32` math;
//! - numpy (`benches/peers.py`, OpenBLAS's sgemm and numpy's ufuncs), run when `python3` (or
//!   `$EAGLE_PEERS_PYTHON`) imports numpy, with one BLAS thread; otherwise its column is empty
//!   (`NaN`) and the note says so.
//!
//! Each cell is the median over 7 rounds of the mean time per call of a round (eagle's and the
//! Rust peers' rounds interleaved); the last two columns are the peers' median divided by
//! eagle `cpu`'s (above 1: eagle is faster). eagle's results are the programs' goldens bit for
//! bit (the runner checks them); the peers compute the same functions with their own rounding
//! (numpy's and `std`'s `exp`, `tanh`, `sin` differ from eagle's in the last bits).
//!
//! Built with `--features mpi` (and with `mpirun` on the path), a second table (issue 40, item
//! 4) puts `tp_ffn` under `mpirun -np 2` (this binary again, eagle's MPI executor) against
//! `benches/tp_ffn_mpi.py` under `mpirun -np 2` (mpi4py + numpy, `MPI_Allreduce`), at the same
//! sizes.
//!
//! `cargo bench --bench peers [--features mpi]` (`-- --quick`: a tenth of the calls per round;
//! `-- --save` writes `docs/bench/peers.json` and its tables in `docs/performance.md`).

use eagle::prelude::*;
use ndarray::{s, Array2, ArrayView2, Axis};

#[path = "report/mod.rs"]
mod report;

#[allow(dead_code)]
#[path = "../examples/tp_ffn.rs"]
mod tp_ffn;

#[allow(dead_code)]
#[path = "../examples/softmax.rs"]
mod softmax;

#[allow(dead_code)]
#[path = "../examples/layernorm.rs"]
mod layernorm;

#[allow(dead_code)]
#[path = "../examples/log_softmax.rs"]
mod log_softmax;

#[allow(dead_code)]
#[path = "../examples/gelu.rs"]
mod gelu;

#[allow(dead_code)]
#[path = "../examples/rotary.rs"]
mod rotary;

const NR: Dim = dynamic!("NR");
/// The row programs' block (the examples' `ROWS` x `COLS`).
const ROWS: usize = 16;
const COLS: usize = 256;
/// Rotary's tokens, head dimension and pairs (the example's `T`, `D`, `H`).
const RT: usize = 16;
const RD: usize = 128;
const RH: usize = 64;

use gelu::gelu_rows;

/// `gelu`'s `f32` program alone (the example's host also runs `f64` and `bf16`).
#[eagle::host]
pub fn gelu_f32(x: Tensor<f32, NR, ROWS, COLS>, y: Out<Tensor<f32, NR, ROWS, COLS>>) {
    for r in 0..world_size() {
        gelu_rows(x[r], y[r], device = r);
    }
}

/// Single-head attention's queries (and keys) and head dimension.
const AQ: usize = 128;
const AD: usize = 64;

/// Single-head attention, 128 queries over 128 keys, d = 64: `softmax(Q K^T / 8) V`, the
/// program a user of the tile algebra writes (`matmul`, `transpose`, the row softmax).
#[eagle::kernel(device)]
pub fn attention_d(
    ctx: Ctx,
    q: Tensor<f32, AQ, AD>,
    k: Tensor<f32, AQ, AD>,
    v: Tensor<f32, AQ, AD>,
    o: Out<Tensor<f32, AQ, AD>>,
) {
    let s = matmul(
        load(q, [0, 0], [AQ, AD]),
        transpose(load(k, [0, 0], [AQ, AD])),
    ) * 0.125;
    let e = exp(s - row_max(s));
    let p = e / row_sum(e);
    store(o, [0, 0], matmul(p, load(v, [0, 0], [AQ, AD])));
}

/// Host: one head per rank.
#[eagle::host]
pub fn attention(
    q: Tensor<f32, NR, AQ, AD>,
    k: Tensor<f32, NR, AQ, AD>,
    v: Tensor<f32, NR, AQ, AD>,
    o: Out<Tensor<f32, NR, AQ, AD>>,
) {
    for r in 0..world_size() {
        attention_d(q[r], k[r], v[r], o[r], device = r);
    }
}

/// The MoE expert FFN at `moe_dispatch_combine`'s sizes: 64 token rows, D = 128, H = 128.
const ER: usize = 64;
const ED: usize = 128;
const EH: usize = 128;

/// One expert's FFN, `relu(x W1) W2`, as the tile algebra writes it.
#[eagle::kernel(device)]
pub fn expert_ffn_d(
    ctx: Ctx,
    x: Tensor<f32, ER, ED>,
    w1: Tensor<f32, ED, EH>,
    w2: Tensor<f32, EH, ED>,
    y: Out<Tensor<f32, ER, ED>>,
) {
    let h = max(
        matmul(load(x, [0, 0], [ER, ED]), load(w1, [0, 0], [ED, EH])),
        0.0,
    );
    store(y, [0, 0], matmul(h, load(w2, [0, 0], [EH, ED])));
}

/// Host: one expert per rank.
#[eagle::host]
pub fn expert_ffn(
    x: Tensor<f32, NR, ER, ED>,
    w1: Tensor<f32, NR, ED, EH>,
    w2: Tensor<f32, NR, EH, ED>,
    y: Out<Tensor<f32, NR, ER, ED>>,
) {
    for r in 0..world_size() {
        expert_ffn_d(x[r], w1[r], w2[r], y[r], device = r);
    }
}

fn attention_nd(q: ArrayView2<f32>, k: ArrayView2<f32>, v: ArrayView2<f32>) -> Array2<f32> {
    let s = q.dot(&k.t()) * 0.125;
    softmax_nd(s.view()).dot(&v)
}

fn gelu_std(v: f32) -> f32 {
    let inner = (v + v * v * v * 0.044715) * 0.797_884_6;
    v * 0.5 * (inner.tanh() + 1.0)
}

fn nd(t: &Tensor<f32>, rows: usize, cols: usize) -> Array2<f32> {
    Array2::from_shape_vec((rows, cols), t.data().to_vec()).expect("shape")
}

/// Row softmax with `ndarray` and `std`.
fn softmax_nd(x: ArrayView2<f32>) -> Array2<f32> {
    let mut y = x.to_owned();
    for mut row in y.rows_mut() {
        let m = row.fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        row.mapv_inplace(|v| (v - m).exp());
        let s = row.sum();
        row.mapv_inplace(|v| v / s);
    }
    y
}

fn layernorm_nd(x: ArrayView2<f32>, g: ArrayView2<f32>, b: ArrayView2<f32>) -> Array2<f32> {
    let n = x.ncols() as f32;
    let mean = x.sum_axis(Axis(1)).insert_axis(Axis(1)) / n;
    let d = &x - &mean;
    let var = (&d * &d).sum_axis(Axis(1)).insert_axis(Axis(1)) / n;
    let inv = var.mapv(|v| 1.0 / (v + 1e-5).sqrt());
    &d * &inv * g + b
}

fn log_softmax_nd(x: ArrayView2<f32>) -> Array2<f32> {
    let mut y = x.to_owned();
    for mut row in y.rows_mut() {
        let m = row.fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        row.mapv_inplace(|v| v - m);
        let l = row.mapv(f32::exp).sum().ln();
        row.mapv_inplace(|v| v - l);
    }
    y
}

fn rotary_nd(x: ArrayView2<f32>, cos: ArrayView2<f32>, sin: ArrayView2<f32>) -> Array2<f32> {
    let (x1, x2) = (x.slice(s![.., ..RH]), x.slice(s![.., RH..]));
    let mut y = Array2::<f32>::zeros((RT, RD));
    y.slice_mut(s![.., ..RH]).assign(&(&x1 * &cos - &x2 * &sin));
    y.slice_mut(s![.., RH..]).assign(&(&x2 * &cos + &x1 * &sin));
    y
}

/// (min, median, max) of one contender's rounds, ms per call.
type Stats = (f64, f64, f64);

/// The largest difference between `got` and `want`, relative where `|want|` is above 1.
fn worst(got: &[f32], want: &Array2<f32>) -> f32 {
    got.iter()
        .zip(want.iter())
        .map(|(a, b)| (a - b).abs() / b.abs().max(1.0))
        .fold(0f32, f32::max)
}

/// numpy's [min, median, max] per program (ms) with `threads` BLAS threads, of the programs
/// `only` names (all when empty), or why there are none.
fn numpy(
    threads: usize,
    only: &[&str],
) -> Result<std::collections::HashMap<String, Vec<f64>>, String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/peers.py");
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/target/py-venv/bin/python");
    let python = std::env::var("EAGLE_PEERS_PYTHON").unwrap_or_else(|_| {
        if std::path::Path::new(venv).exists() {
            venv.into()
        } else {
            "python3".into()
        }
    });
    let n = threads.to_string();
    let out = std::process::Command::new(&python)
        .arg(script)
        .args(only)
        .env("OPENBLAS_NUM_THREADS", &n)
        .env("OMP_NUM_THREADS", &n)
        .env("MKL_NUM_THREADS", &n)
        .output()
        .map_err(|e| format!("`{python}` did not start: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "`{python} benches/peers.py` failed: {}",
            err.lines().last().unwrap_or("")
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("peers.py printed no JSON: {e}"))
}

/// `tp_ffn` at P = 2 on `cpu` and `sim` (the ranks on two threads), in interleaved rounds.
fn tp_ffn_p2() -> ((f64, f64, f64), (f64, f64, f64)) {
    use tp_ffn::{D, F, T};
    let sim = Session::sim(2).expect("sim").with_race_check(false);
    let cpu = Session::new(eagle::runtime::Platform::Cpu, vec![0, 1]).expect("cpu");
    let x = eagle_runner::random_tensor(&[T, D], 1);
    let w1 = eagle_runner::random_tensor(&[2, D, F / 2], 2);
    let w2 = eagle_runner::random_tensor(&[2, F / 2, D], 3);
    let (mut h, mut y) = (
        Tensor::<f32>::zeros(&[2, T, F / 2]),
        Tensor::<f32>::zeros(&[2, T, D]),
    );
    let (mut hs, mut ys) = (h.clone(), y.clone());
    let r = report::interleaved(
        20,
        &mut [
            &mut || {
                tp_ffn::tp_ffn
                    .launch(&cpu, &x, &w1, &w2, &mut h, &mut y)
                    .expect("cpu");
            },
            &mut || {
                tp_ffn::tp_ffn
                    .launch(&sim, &x, &w1, &w2, &mut hs, &mut ys)
                    .expect("sim");
            },
        ],
    );
    (r[0], r[1])
}

/// Under `mpirun`: `tp_ffn` over MPI at np = P, per launch in interleaved rounds; rank 0
/// prints `{"tp_ffn_mpi": [min, median, max]}` (ms).
#[cfg(feature = "mpi")]
fn mpi_part(p: usize) {
    use tp_ffn::{D, F, T};
    let s = Session::new(eagle::runtime::Platform::Sim, (0..p).collect()).expect("session");
    let x = eagle_runner::random_tensor(&[T, D], 1);
    let w1 = eagle_runner::random_tensor(&[p, D, F / p], 2);
    let w2 = eagle_runner::random_tensor(&[p, F / p, D], 3);
    let (mut h, mut y) = (
        Tensor::<f32>::zeros(&[p, T, F / p]),
        Tensor::<f32>::zeros(&[p, T, D]),
    );
    let r = report::interleaved(
        20,
        &mut [&mut || {
            tp_ffn::tp_ffn
                .launch(&s, &x, &w1, &w2, &mut h, &mut y)
                .expect("mpi");
        }],
    );
    if eagle::runtime::mpi_rt::world().0 == 0 {
        println!("{{\"tp_ffn_mpi\": [{}, {}, {}]}}", r[0].0, r[0].1, r[0].2);
    }
}

/// Runs `args` under `mpirun -np 2` and reads the JSON object rank 0 printed last.
fn under_mpirun(args: &[&str]) -> Result<Vec<f64>, String> {
    let out = std::process::Command::new("mpirun")
        .args(["--oversubscribe", "-np", "2"])
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OPENBLAS_NUM_THREADS", "1")
        .env("OMP_NUM_THREADS", "1")
        .output()
        .map_err(|e| format!("`mpirun` did not start: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().rev().find(|l| l.starts_with('{'));
    match (out.status.success(), line) {
        (true, Some(l)) => {
            let m: std::collections::HashMap<String, Vec<f64>> =
                serde_json::from_str(l).map_err(|e| format!("bad JSON `{l}`: {e}"))?;
            m.into_values().next().ok_or_else(|| "empty JSON".into())
        }
        _ => Err(format!(
            "`mpirun -np 2 {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        )),
    }
}

/// The MPI table: eagle's `tp_ffn` and the mpi4py + numpy program under `mpirun -np 2`.
fn mpi_table() -> report::Table {
    let mut t = report::Table::new(
        "`tp_ffn` under `mpirun -np 2` (ms per call; min, median, max of 7 rounds)",
        &[("min", "ms", 3), ("median", "ms", 3), ("max", "ms", 3)],
    );
    let exe = std::env::current_exe().expect("the bench's path");
    let eagle = under_mpirun(&[exe.to_str().unwrap_or(""), "--mpi-part"]);
    let python = std::env::var("EAGLE_PEERS_PYTHON").unwrap_or_else(|_| {
        let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/target/py-venv/bin/python");
        if std::path::Path::new(venv).exists() {
            venv.into()
        } else {
            "python3".into()
        }
    });
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/tp_ffn_mpi.py");
    let peer = under_mpirun(&[&python, script]);
    for (label, r) in [
        ("eagle (the MPI executor, one thread per rank)", &eagle),
        ("mpi4py + numpy (`MPI_Allreduce`, one BLAS thread)", &peer),
    ] {
        match r {
            Ok(v) => t.row(label, v.clone()),
            Err(why) => {
                t.row(label, vec![f64::NAN; 3]);
                t.notes.push(format!("{label}: not measured ({why})."));
            }
        }
    }
    if let (Ok(e), Ok(p)) = (&eagle, &peer) {
        t.notes.push(format!(
            "mpi4py + numpy / eagle (medians): {:.2} (below 1, the peer is faster).",
            p[1] / e[1]
        ));
    }
    t
}

fn main() {
    #[cfg(feature = "mpi")]
    {
        let (_, size) = eagle::runtime::mpi_rt::init();
        if size > 1 {
            mpi_part(size);
            eagle::runtime::mpi_rt::finalize();
            return;
        }
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let scale = if quick { 10 } else { 1 };
    let sim = Session::sim(1).expect("sim").with_race_check(false);
    let cpu = Session::new(eagle::runtime::Platform::Cpu, vec![0]).expect("cpu");
    // (program, eagle cpu, eagle sim, ndarray), each (min, median, max) ms per call.
    let mut rows: Vec<(&str, [Stats; 3])> = vec![];
    {
        use tp_ffn::{D, F, T};
        let x = eagle_runner::random_tensor(&[T, D], 1);
        let w1 = eagle_runner::random_tensor(&[1, D, F], 2);
        let w2 = eagle_runner::random_tensor(&[1, F, D], 3);
        let half = |t: &Tensor<f32>| {
            Tensor::from_vec(
                t.shape(),
                t.data().iter().map(|&v| bf16::from_f32(v)).collect(),
            )
            .expect("same shape")
        };
        let (b1, b2) = (half(&w1), half(&w2));
        let (mut h, mut y) = (
            Tensor::<f32>::zeros(&[1, T, F]),
            Tensor::<f32>::zeros(&[1, T, D]),
        );
        let (mut hs, mut ys) = (h.clone(), y.clone());
        let (mut h2, mut y2) = (h.clone(), y.clone());
        let (mut h2s, mut y2s) = (h.clone(), y.clone());
        let (xn, w1n, w2n) = (nd(&x, T, D), nd(&w1, D, F), nd(&w2, F, D));
        let mut sink = 0f32;
        let r = report::interleaved(
            20 / scale.min(20),
            &mut [
                &mut || {
                    tp_ffn::tp_ffn
                        .launch(&cpu, &x, &w1, &w2, &mut h, &mut y)
                        .expect("cpu");
                },
                &mut || {
                    tp_ffn::tp_ffn
                        .launch(&sim, &x, &w1, &w2, &mut hs, &mut ys)
                        .expect("sim");
                },
                &mut || {
                    let hh = xn.dot(&w1n).mapv(gelu_std);
                    sink += hh.dot(&w2n)[[0, 0]];
                },
                &mut || {
                    tp_ffn::tp_ffn_bf16
                        .launch(&cpu, &x, &b1, &b2, &mut h2, &mut y2)
                        .expect("cpu bf16");
                },
                &mut || {
                    tp_ffn::tp_ffn_bf16
                        .launch(&sim, &x, &b1, &b2, &mut h2s, &mut y2s)
                        .expect("sim bf16");
                },
            ],
        );
        std::hint::black_box(sink);
        rows.push(("tp_ffn", [r[0], r[1], r[2]]));
        rows.push(("tp_ffn (bf16 weights; peers f32)", [r[3], r[4], r[2]]));
    }
    let reps = 2000 / scale;
    let x = eagle_runner::random_tensor(&[1, ROWS, COLS], 4);
    let xn = nd(&x, ROWS, COLS);
    let y = Tensor::<f32>::zeros(&[1, ROWS, COLS]);
    let mut sink = 0f32;
    macro_rules! row_program {
        ($name:expr, $launch:expr, $peer:expr) => {{
            let (mut ya, mut yb) = (y.clone(), y.clone());
            let r = report::interleaved(
                reps,
                &mut [
                    &mut || $launch(&cpu, &mut ya),
                    &mut || $launch(&sim, &mut yb),
                    &mut || sink += $peer[[0, 0]],
                ],
            );
            rows.push(($name, [r[0], r[1], r[2]]));
        }};
    }
    row_program!(
        "softmax",
        |s: &Session, y: &mut Tensor<f32>| {
            softmax::softmax.launch(s, &x, y).expect("softmax");
        },
        softmax_nd(xn.view())
    );
    let g = eagle_runner::random_tensor(&[1, COLS], 5);
    let b = eagle_runner::random_tensor(&[1, COLS], 6);
    let (gn, bn) = (nd(&g, 1, COLS), nd(&b, 1, COLS));
    row_program!(
        "layernorm",
        |s: &Session, y: &mut Tensor<f32>| {
            layernorm::layernorm
                .launch(s, &x, &g, &b, y)
                .expect("layernorm");
        },
        layernorm_nd(xn.view(), gn.view(), bn.view())
    );
    row_program!(
        "log_softmax",
        |s: &Session, y: &mut Tensor<f32>| {
            log_softmax::log_softmax
                .launch(s, &x, y)
                .expect("log_softmax");
        },
        log_softmax_nd(xn.view())
    );
    row_program!(
        "gelu",
        |s: &Session, y: &mut Tensor<f32>| {
            gelu_f32.launch(s, &x, y).expect("gelu");
        },
        xn.mapv(gelu_std)
    );
    let xr = eagle_runner::random_tensor(&[1, RT, RD], 7);
    let xrn = nd(&xr, RT, RD);
    let mut yr = Tensor::<f32>::zeros(&[1, RT, RD]);
    let mut yrs = yr.clone();
    let theta: Vec<f32> = (0..RH)
        .map(|i| 10000f32.powf(i as f32 * (-2.0 / RD as f32)))
        .collect();
    let ang = Array2::from_shape_fn((RT, RH), |(t, i)| t as f32 * theta[i]);
    let r = report::interleaved(
        reps,
        &mut [
            &mut || {
                rotary::rotary.launch(&cpu, &xr, &mut yr).expect("rotary");
            },
            &mut || {
                rotary::rotary.launch(&sim, &xr, &mut yrs).expect("rotary");
            },
            &mut || {
                // The angles' cosines and sines are part of the program, as in the kernel.
                let (c, s) = (ang.mapv(f32::cos), ang.mapv(f32::sin));
                sink += rotary_nd(xrn.view(), c.view(), s.view())[[0, 0]];
            },
        ],
    );
    rows.push(("rotary", [r[0], r[1], r[2]]));
    let (qa, ka, va) = (
        eagle_runner::random_tensor(&[1, AQ, AD], 8),
        eagle_runner::random_tensor(&[1, AQ, AD], 9),
        eagle_runner::random_tensor(&[1, AQ, AD], 10),
    );
    let (qn, kn, vn) = (nd(&qa, AQ, AD), nd(&ka, AQ, AD), nd(&va, AQ, AD));
    let (mut oa, mut ob) = (
        Tensor::<f32>::zeros(&[1, AQ, AD]),
        Tensor::<f32>::zeros(&[1, AQ, AD]),
    );
    let r = report::interleaved(
        (200 / scale).max(1),
        &mut [
            &mut || {
                attention
                    .launch(&cpu, &qa, &ka, &va, &mut oa)
                    .expect("attention");
            },
            &mut || {
                attention
                    .launch(&sim, &qa, &ka, &va, &mut ob)
                    .expect("attention");
            },
            &mut || {
                sink += attention_nd(qn.view(), kn.view(), vn.view())[[0, 0]];
            },
        ],
    );
    // The program is the bench's own: it computes what the peer does (to f32 rounding and
    // the math libraries' last bits).
    let w = worst(oa.data(), &attention_nd(qn.view(), kn.view(), vn.view()));
    assert!(w < 1e-5, "attention differs from ndarray's by {w}");
    assert_eq!(
        oa.data(),
        ob.data(),
        "attention: cpu and sim give the same bits"
    );
    rows.push(("attention (128 x 128, d = 64)", [r[0], r[1], r[2]]));
    let (xe, w1e, w2e) = (
        eagle_runner::random_tensor(&[1, ER, ED], 11),
        eagle_runner::random_tensor(&[1, ED, EH], 12),
        eagle_runner::random_tensor(&[1, EH, ED], 13),
    );
    let (xen, w1en, w2en) = (nd(&xe, ER, ED), nd(&w1e, ED, EH), nd(&w2e, EH, ED));
    let expert_nd = || xen.dot(&w1en).mapv(|v| v.max(0.0)).dot(&w2en);
    let (mut ya, mut yb) = (
        Tensor::<f32>::zeros(&[1, ER, ED]),
        Tensor::<f32>::zeros(&[1, ER, ED]),
    );
    let r = report::interleaved(
        (200 / scale).max(1),
        &mut [
            &mut || {
                expert_ffn
                    .launch(&cpu, &xe, &w1e, &w2e, &mut ya)
                    .expect("expert");
            },
            &mut || {
                expert_ffn
                    .launch(&sim, &xe, &w1e, &w2e, &mut yb)
                    .expect("expert");
            },
            &mut || sink += expert_nd()[[0, 0]],
        ],
    );
    let w = worst(ya.data(), &expert_nd());
    assert!(
        w < 1e-4,
        "expert_ffn differs from ndarray's by {w} (relative)"
    );
    rows.push(("expert_ffn (MoE, 64 x 128 x 128)", [r[0], r[1], r[2]]));
    std::hint::black_box(sink);

    let np = numpy(1, &[]);
    let np2 = numpy(2, &["tp_ffn"]);
    let mut t = report::Table::new(
        "program, P = 1 on one thread unless the row says (ms per call, median of 7 rounds)",
        &[
            ("eagle `cpu`", "ms", 3),
            ("eagle `sim`", "ms", 3),
            ("ndarray + std", "ms", 3),
            ("numpy", "ms", 3),
            ("ndarray / eagle `cpu`", "", 2),
            ("numpy / eagle `cpu`", "", 2),
        ],
    );
    for (name, [c, s, n]) in &rows {
        let key = name.split(' ').next().unwrap_or(name);
        let p = np
            .as_ref()
            .ok()
            .and_then(|m| m.get(key))
            .map_or(f64::NAN, |v| v[1]);
        t.row(
            &format!("`{name}`"),
            vec![c.1, s.1, n.1, p, n.1 / c.1, p / c.1],
        );
    }
    // P = 2 on two threads (one rank each) against numpy with two BLAS threads and the same
    // one-thread ndarray run (ndarray's `dot` has no threads without its `rayon` feature).
    let (c2, s2) = tp_ffn_p2();
    let p2 = np2
        .as_ref()
        .ok()
        .and_then(|m| m.get("tp_ffn"))
        .map_or(f64::NAN, |v| v[1]);
    let n1 = rows[0].1[2].1;
    t.row(
        "`tp_ffn`, P = 2 (two threads; ndarray one)",
        vec![c2.1, s2.1, n1, p2, n1 / c2.1, p2 / c2.1],
    );
    t.notes.push(
        "The last two columns are the peer's time over eagle `cpu`'s: below 1, the peer is faster."
            .into(),
    );
    t.notes.push(match &np {
        Ok(_) => "numpy: `benches/peers.py` with `OPENBLAS_NUM_THREADS=1` (2 in the P = 2 row), the same sizes, f32 throughout (the bf16 row's peers use f32 weights).".into(),
        Err(why) => format!("numpy: not measured ({why}); its columns are n/a. Set `EAGLE_PEERS_PYTHON` to a Python that imports numpy (or create `target/py-venv` in the repository, as `.ci/run` does)."),
    });
    if quick {
        t.title
            .push_str(", `--quick`: a tenth of the calls per round");
    }
    let bars: Vec<(String, f64)> = t
        .rows
        .iter()
        .filter(|r| r.values[5].is_finite())
        .map(|r| {
            let name = r.label.trim_matches('`').split(' ').next().unwrap_or("");
            (name.to_string(), r.values[5])
        })
        .collect();
    report::save_plot("peers.svg", || {
        report::bar_chart(
            "numpy / eagle `cpu` per program (above 1: eagle is faster)",
            "numpy / eagle",
            (860, 380),
            &bars,
        )
    });
    let mut rep = report::Report::new("peers");
    rep.tables.push(t);
    if cfg!(feature = "mpi") {
        rep.tables.push(mpi_table());
        rep.command = Some("cargo bench --bench peers --features mpi".into());
    } else {
        rep.tables[0].notes.push(
            "The table of `tp_ffn` under `mpirun -np 2` (eagle's MPI executor against mpi4py + numpy) needs `--features mpi`.".into(),
        );
    }
    rep.finish();
}
