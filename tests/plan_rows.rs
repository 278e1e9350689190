//! The rows entry of a mapreduce plan (`src/plan/rows.rs`): accumulators kept in variables,
//! full rows interleaved in groups, tail rows one at a time, and memory accumulators for
//! anything else. Every case is checked bit for bit against plain Rust that sums in the
//! documented order (rows of `ROW` samples from +0.0, then the row partials in row order), at
//! several sample counts, thread counts and structures, and a failure names its samples.

use eagle::plan::{plan, Planes, Structure, ROW};
use eagle::prelude::*;

const N: Dim = dynamic!("N");

/// Two accumulators in variables: a sum and a sum of squares.
#[eagle::kernel(sample)]
pub fn moments(s: usize, x: Tensor<f64, N>, out: Out<Tensor<f64, 2>>) {
    out[0] = out[0] + x[s];
    out[1] = out[1] + x[s] * x[s];
}

/// An accumulator too large for variables (16 cells), written at a constant index.
#[eagle::kernel(sample)]
pub fn wide(s: usize, x: Tensor<f64, N>, out: Out<Tensor<f64, 16>>) {
    out[3] = out[3] + x[s];
}

/// An integer sum that divides by the input: a zero sample fails at run time.
#[eagle::kernel(sample)]
pub fn quotients(s: usize, x: Tensor<i64, N>, out: Out<Tensor<i64, 1>>) {
    out[0] = out[0] + 1000 / x[s];
}

/// Rust in the documented order: per row of `ROW` from +0.0, then the rows in order.
fn rows_sum(x: &[f64], f: impl Fn(f64) -> f64) -> f64 {
    let mut acc = 0.0;
    for row in x.chunks(ROW) {
        let mut p = 0.0;
        for &v in row {
            p += f(v);
        }
        acc += p;
    }
    acc
}

/// Values whose sum depends on the order: large and small magnitudes, both signs.
fn values(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let m = [1e16, 1.0, -1e16, 3.5, 1e-3, -7.25][i % 6];
            m * (1.0 + (i as f64) * 1e-7)
        })
        .collect()
}

fn structures() -> Vec<(String, eagle::plan::Plan)> {
    let mut v = vec![];
    for t in [1usize, 2, 3] {
        v.push((
            format!("moments HostTeam x{t}"),
            plan(moments, Structure::HostTeam, Structure::HostTeam)
                .expect("plan")
                .with_threads(t),
        ));
    }
    v.push((
        "moments DeviceKernel".into(),
        plan(moments, Structure::DeviceKernel, Structure::HostTeam).expect("plan"),
    ));
    v.push((
        "moments RankPartition x3 (2 threads each)".into(),
        plan(moments, Structure::RankPartition, Structure::HostTeam)
            .expect("plan")
            .with_threads(2)
            .with_simulated_ranks(3),
    ));
    v
}

#[test]
fn variables_and_interleaved_rows_keep_each_rows_order_bit_for_bit() {
    // Fewer than one group, one group exactly, groups plus tail rows, a partial last row.
    for n in [
        1usize,
        31,
        32,
        33,
        127,
        128,
        129,
        4 * ROW * 3 + 5,
        1000,
        4133,
    ] {
        let xs = values(n);
        let x = Tensor::from_vec(&[n], xs.clone()).expect("x");
        let want = [rows_sum(&xs, |v| v), rows_sum(&xs, |v| v * v)];
        for (name, p) in structures() {
            let mut out = Tensor::<f64>::zeros(&[2]);
            p.run(0, &mut Planes::new().input("x", &x).output("out", &mut out))
                .expect("run");
            for (k, w) in want.iter().enumerate() {
                assert_eq!(
                    out.data()[k].to_bits(),
                    w.to_bits(),
                    "{name}, n = {n}, out[{k}]: {} vs {w}",
                    out.data()[k]
                );
            }
        }
    }
    // The order is visible: a sample-order sum of the same values differs.
    let xs = values(4133);
    let flat: f64 = xs.iter().sum();
    assert_ne!(flat.to_bits(), rows_sum(&xs, |v| v).to_bits());
}

#[test]
fn a_large_accumulator_stays_in_memory_with_the_same_bits() {
    for n in [5usize, 64, 1000] {
        let xs = values(n);
        let x = Tensor::from_vec(&[n], xs.clone()).expect("x");
        for t in [1usize, 2] {
            let p = plan(wide, Structure::HostTeam, Structure::HostTeam)
                .expect("plan")
                .with_threads(t);
            // Cells the kernel never writes end at +0.0 (the row identity), whatever they held.
            let mut out = Tensor::from_vec(&[16], vec![9.0f64; 16]).expect("out");
            p.run(0, &mut Planes::new().input("x", &x).output("out", &mut out))
                .expect("run");
            for (k, v) in out.data().iter().enumerate() {
                let want: f64 = if k == 3 { rows_sum(&xs, |v| v) } else { 0.0 };
                assert_eq!(v.to_bits(), want.to_bits(), "n = {n}, x{t}, cell {k}");
            }
        }
    }
}

#[test]
fn a_failing_sample_is_named_by_its_row_even_inside_a_group() {
    let n = 1000;
    let mut xs: Vec<i64> = (0..n as i64).map(|i| i % 7 + 1).collect();
    let x = Tensor::from_vec(&[n], xs.clone()).expect("x");
    let p = plan(quotients, Structure::HostTeam, Structure::HostTeam)
        .expect("plan")
        .with_threads(2);
    let mut out = Tensor::<i64>::zeros(&[1]);
    p.run(0, &mut Planes::new().input("x", &x).output("out", &mut out))
        .expect("run");
    let want: i64 = xs.iter().map(|v| 1000 / v).sum();
    assert_eq!(out.data()[0], want);
    // Sample 70 is in row 2 (samples 64..96), inside the first group of four rows.
    xs[70] = 0;
    let x = Tensor::from_vec(&[n], xs).expect("x");
    let e = p
        .run(0, &mut Planes::new().input("x", &x).output("out", &mut out))
        .unwrap_err()
        .to_string();
    assert!(e.contains("`quotients`"), "{e}");
    assert!(!e.contains("__plan_"), "{e}");
    assert!(e.ends_with("(while running samples 64..96)"), "{e}");
}

#[test]
fn the_rows_entry_bounds_its_samples_once_per_row_not_per_sample() {
    use eagle::ir::{BinOp, OpKind};
    let p = plan(moments, Structure::HostTeam, Structure::HostTeam).expect("plan");
    // The innermost loops (the sample wrapper's; a group's samples and a tail row's samples
    // in the rows entry) hold no clamp.
    for (name, loops) in [("__plan_moments", 1), ("__plan_rows_moments", 2)] {
        let f = p.module().function(name).expect("the wrapper");
        let mut inner = 0;
        f.walk(&mut |op| {
            if let OpKind::For { body, .. } = &op.kind {
                if !body
                    .iter(&f.ops)
                    .any(|o| matches!(o.kind, OpKind::For { .. }))
                {
                    inner += 1;
                    for o in body.iter(&f.ops) {
                        assert!(
                            !matches!(o.kind, OpKind::Binary(BinOp::Min | BinOp::Max, ..)),
                            "{name}: a clamp per sample: {}",
                            eagle::ir::print_op(f, o)
                        );
                    }
                }
            }
        });
        assert_eq!(inner, loops, "{name}'s innermost loops");
    }
    // Compiled at N = 1000: the row partials' slices are checked, no element read is (of the
    // rows entry or the sample wrapper).
    let mut b = eagle::codegen::Bindings::world(1);
    b.dims.insert("N".into(), 1000);
    b.dims
        .insert("__rows".into(), 1000usize.div_ceil(ROW) as u64);
    let (art, _) = eagle::codegen::compile(
        p.module(),
        "__plan_rows_moments",
        &b,
        eagle::codegen::Target::Cpu,
    )
    .expect("compile");
    let of_rows: Vec<&String> = art
        .code
        .sites
        .iter()
        .filter(|s| s.contains("`__plan_rows_moments`") || s.contains("`__plan_moments`"))
        .collect();
    assert!(of_rows.iter().any(|s| s.contains("slice")), "{of_rows:#?}");
    assert!(!of_rows.iter().any(|s| s.contains("elem")), "{of_rows:#?}");
}
