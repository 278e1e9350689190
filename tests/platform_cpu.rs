//! Platform `cpu` runs device code on the host tensors in place (no copy in or out) when that
//! gives the results private copies give, and copies otherwise; `sim` always copies. Each case
//! is checked bit for bit against `sim`, with the bytes each run copied.

use eagle::prelude::*;
use eagle::runtime::Platform;

const NR: Dim = dynamic!("NR");
const W: usize = 64;

/// `y = x * 2 + 1`, elementwise over a row.
#[eagle::kernel(device)]
pub fn affine_d(ctx: Ctx, x: Tensor<f32, 1, W>, y: Out<Tensor<f32, 1, W>>) {
    let t = load(x, [0, 0], [1, W]);
    store(y, [0, 0], t * 2.0 + 1.0);
}

/// Each rank its own row: disjoint, in place on `cpu`.
#[eagle::host]
pub fn rows(x: Tensor<f32, NR, 1, W>, y: Out<Tensor<f32, NR, 1, W>>) {
    for r in 0..world_size() {
        affine_d(x[r], y[r], device = r);
    }
}

/// `y[0][i] = x[0][i - 1] + 1` for i >= 1, in increasing i, then `y[0][0] = 0`: reads its
/// input one element behind where it writes, so run in place on one buffer it would read
/// what it had just written.
#[eagle::kernel(device)]
pub fn shift_d(ctx: Ctx, x: Tensor<f32, 1, W>, y: Out<Tensor<f32, 1, W>>) {
    for i in 1..W {
        y[0][i] = x[0][i - 1] + 1.0;
    }
    y[0][0] = 0.0;
}

/// Every rank reads row r and writes row r of the same tensor: an input aliasing the output.
#[eagle::host]
pub fn shift_in_place(y: Out<Tensor<f32, NR, 1, W>>) {
    for r in 0..world_size() {
        shift_d(y[r], y[r], device = r);
    }
}

/// Every rank writes the whole of row 0: outputs of different ranks overlap.
#[eagle::host]
pub fn all_to_row0(x: Tensor<f32, NR, 1, W>, y: Out<Tensor<f32, NR, 1, W>>) {
    for r in 0..world_size() {
        affine_d(x[r], y[0], device = r);
    }
}

/// Two dispatches in order on rank 0: the second reads what the first wrote.
#[eagle::host]
pub fn chain(x: Tensor<f32, NR, 1, W>, y: Out<Tensor<f32, NR, 1, W>>) {
    affine_d(x[0], y[0], device = 0);
    affine_d(y[0], y[1], device = 0);
}

fn sessions(p: usize) -> (Session, Session) {
    let devs: Vec<usize> = (0..p).collect();
    (
        Session::sim(p).expect("sim"),
        Session::new(Platform::Cpu, devs).expect("cpu"),
    )
}

fn input(p: usize) -> Tensor<f32> {
    Tensor::from_vec(
        &[p, 1, W],
        (0..p * W).map(|i| (i as f32) * 0.25 - 7.0).collect(),
    )
    .expect("x")
}

fn bits(t: &Tensor<f32>) -> Vec<u32> {
    t.data().iter().map(|v| v.to_bits()).collect()
}

#[test]
fn disjoint_rows_run_in_place_with_the_bits_of_sim() {
    for p in [1usize, 3, 4] {
        let (sim, cpu) = sessions(p);
        let x = input(p);
        let (mut a, mut b) = (
            Tensor::<f32>::zeros(&[p, 1, W]),
            Tensor::<f32>::zeros(&[p, 1, W]),
        );
        let ra = rows.launch(&sim, &x, &mut a).expect("sim");
        let rb = rows.launch(&cpu, &x, &mut b).expect("cpu");
        assert_eq!(bits(&a), bits(&b), "P = {p}");
        let want: Vec<u32> = x.data().iter().map(|v| (v * 2.0 + 1.0).to_bits()).collect();
        assert_eq!(bits(&b), want);
        // sim copies x and y in and y out; cpu copies nothing.
        assert_eq!(ra.run.copied_bytes, 3 * p * W * 4, "P = {p}");
        assert_eq!(rb.run.copied_bytes, 0, "P = {p}");
    }
}

#[test]
fn an_input_aliasing_an_output_is_copied_so_it_reads_the_old_values() {
    let p = 2;
    let (sim, cpu) = sessions(p);
    let start = input(p);
    let mut a = start.clone();
    let mut b = start.clone();
    shift_in_place.launch(&sim, &mut a).expect("sim");
    let r = shift_in_place.launch(&cpu, &mut b).expect("cpu");
    assert_eq!(bits(&a), bits(&b));
    // Each element is the old previous element plus one (in place it would be the first
    // element plus i).
    for row in 0..p {
        for i in 1..W {
            assert_eq!(b.data()[row * W + i], start.data()[row * W + i - 1] + 1.0);
        }
    }
    assert!(r.run.copied_bytes > 0, "aliasing must not run in place");
}

#[test]
fn overlapping_outputs_of_different_ranks_are_copied_and_the_last_rank_wins() {
    let p = 4;
    let (sim, cpu) = sessions(p);
    let x = input(p);
    let (mut a, mut b) = (
        Tensor::<f32>::zeros(&[p, 1, W]),
        Tensor::<f32>::zeros(&[p, 1, W]),
    );
    all_to_row0.launch(&sim, &x, &mut a).expect("sim");
    let r = all_to_row0.launch(&cpu, &x, &mut b).expect("cpu");
    assert_eq!(bits(&a), bits(&b));
    let last: Vec<f32> = x.data()[(p - 1) * W..]
        .iter()
        .map(|v| v * 2.0 + 1.0)
        .collect();
    assert_eq!(&b.data()[..W], &last[..]);
    assert!(r.run.copied_bytes > 0);
}

#[test]
fn dispatches_of_one_rank_see_each_others_writes_in_place() {
    let p = 2;
    let (sim, cpu) = sessions(p);
    let x = input(p);
    let (mut a, mut b) = (
        Tensor::<f32>::zeros(&[p, 1, W]),
        Tensor::<f32>::zeros(&[p, 1, W]),
    );
    chain.launch(&sim, &x, &mut a).expect("sim");
    let r = chain.launch(&cpu, &x, &mut b).expect("cpu");
    assert_eq!(bits(&a), bits(&b));
    let want: Vec<f32> = x.data()[..W]
        .iter()
        .map(|v| (v * 2.0 + 1.0) * 2.0 + 1.0)
        .collect();
    assert_eq!(&b.data()[W..2 * W], &want[..]);
    assert_eq!(r.run.copied_bytes, 0);
}

/// `y = x + 1` over a row of 3 (12 bytes: rows after the first are not 16-byte aligned).
#[eagle::kernel(device)]
pub fn inc3_d(ctx: Ctx, x: Tensor<f32, 1, 3>, y: Out<Tensor<f32, 1, 3>>) {
    let t = load(x, [0, 0], [1, 3]);
    store(y, [0, 0], t + 1.0);
}

/// Rows of 3, one per rank.
#[eagle::host]
pub fn rows3(x: Tensor<f32, NR, 1, 3>, y: Out<Tensor<f32, NR, 1, 3>>) {
    for r in 0..world_size() {
        inc3_d(x[r], y[r], device = r);
    }
}

#[test]
fn unaligned_ranges_are_copied_with_the_bits_of_sim() {
    let p = 3;
    let (sim, cpu) = sessions(p);
    let x = Tensor::from_vec(&[p, 1, 3], (0..3 * p).map(|i| i as f32 * 1.5).collect()).expect("x");
    let (mut a, mut b) = (
        Tensor::<f32>::zeros(&[p, 1, 3]),
        Tensor::<f32>::zeros(&[p, 1, 3]),
    );
    rows3.launch(&sim, &x, &mut a).expect("sim");
    let r = rows3.launch(&cpu, &x, &mut b).expect("cpu");
    assert_eq!(bits(&a), bits(&b));
    let want: Vec<f32> = x.data().iter().map(|v| v + 1.0).collect();
    assert_eq!(b.data(), &want[..]);
    assert_eq!(r.run.copied_bytes, 3 * p * 3 * 4);
}

/// Writes its row, then fails on the rank whose first input is 1000 (index out of range).
#[eagle::kernel(device)]
pub fn maybe_fail_d(ctx: Ctx, x: Tensor<f32, 1, W>, y: Out<Tensor<f32, 1, W>>) {
    for i in 0..W {
        y[0][i] = x[0][i] + 1.0;
    }
    let k = x[0][0] as usize;
    y[0][k] = 5.0;
}

/// One failing candidate per rank.
#[eagle::host]
pub fn maybe_fail(x: Tensor<f32, NR, 1, W>, y: Out<Tensor<f32, NR, 1, W>>) {
    for r in 0..world_size() {
        maybe_fail_d(x[r], y[r], device = r);
    }
}

/// A zero-sized tensor next to the others.
#[eagle::host]
pub fn with_empty(x: Tensor<f32, NR, 1, W>, e: Tensor<f32, NR, 0>, y: Out<Tensor<f32, NR, 1, W>>) {
    for r in 0..world_size() {
        affine_d(x[r], y[r], device = r);
    }
}

#[test]
fn a_failed_launch_names_the_same_rank_and_error_on_both_platforms() {
    let p = 4;
    let (sim, cpu) = sessions(p);
    let mut x = Tensor::from_vec(&[p, 1, W], vec![1.0f32; p * W]).expect("x");
    x.data_mut()[2 * W] = 1000.0;
    let start = Tensor::from_vec(&[p, 1, W], vec![-9.0f32; p * W]).expect("y");
    let (mut a, mut b) = (start.clone(), start.clone());
    let ea = maybe_fail.launch(&sim, &x, &mut a).unwrap_err().to_string();
    let eb = maybe_fail.launch(&cpu, &x, &mut b).unwrap_err().to_string();
    assert!(ea.starts_with("rank 2 failed"), "{ea}");
    assert_eq!(ea, eb);
    // sim leaves the outputs untouched; cpu (in place) may hold what ranks wrote (documented).
    assert_eq!(bits(&a), bits(&start));
}

#[test]
fn an_empty_tensor_does_not_force_copies() {
    let p = 2;
    let (sim, cpu) = sessions(p);
    let x = input(p);
    let e = Tensor::<f32>::zeros(&[p, 0]);
    let (mut a, mut b) = (
        Tensor::<f32>::zeros(&[p, 1, W]),
        Tensor::<f32>::zeros(&[p, 1, W]),
    );
    with_empty.launch(&sim, &x, &e, &mut a).expect("sim");
    let r = with_empty.launch(&cpu, &x, &e, &mut b).expect("cpu");
    assert_eq!(bits(&a), bits(&b));
    assert_eq!(r.run.copied_bytes, 0);
}

/// Rows of the big-tile kernel: 3 MiB of `f32` tiles (three `[ROWS_BIG, W]` tiles of 1 MiB).
const ROWS_BIG: usize = 4096;

/// `y = (x * 2 + 1) * x` with every step a tile of its own (1 MiB each).
#[eagle::kernel(device)]
pub fn big_tiles_d(ctx: Ctx, x: Tensor<f32, ROWS_BIG, W>, y: Out<Tensor<f32, ROWS_BIG, W>>) {
    let t = load(x, [0, 0], [ROWS_BIG, W]);
    let u = transpose(transpose(t * 2.0 + 1.0));
    store(y, [0, 0], u * t);
}

#[eagle::host]
pub fn big_tiles(x: Tensor<f32, ROWS_BIG, W>, y: Out<Tensor<f32, ROWS_BIG, W>>) {
    big_tiles_d(x, y, device = 0);
}

/// A launch whose ranks run on one thread runs on the caller's thread only when its stack has
/// room for the tiles (`pool::run_all_here`): from a thread of 2 MiB of stack, 3 MiB of tiles go
/// to a device worker (running them there would overflow and kill the process: taking the
/// check out does), and the results are the same from a thread with room.
#[test]
fn a_launch_from_a_small_stack_runs_its_big_tiles_on_a_device_thread() {
    let x: Tensor<f32> = eagle_runner::random_tensor(&[ROWS_BIG, W], 31);
    let want: Vec<u32> = x
        .data()
        .iter()
        .map(|&v| ((v * 2.0 + 1.0) * v).to_bits())
        .collect();
    for stack in [2 << 20, 64 << 20] {
        let x = x.clone();
        let got = std::thread::Builder::new()
            .stack_size(stack)
            .spawn(move || {
                let s = Session::new(Platform::Cpu, vec![0]).unwrap();
                let mut y = Tensor::<f32>::zeros(&[ROWS_BIG, W]);
                let report = big_tiles.launch(&s, &x, &mut y).unwrap();
                // The tiles the stack check weighs: the three 1 MiB steps.
                let tiles = report.artifact.code.stack.get("big_tiles_d").copied();
                assert!(tiles.is_some_and(|t| t >= 3 << 20), "{tiles:?}");
                bits(&y)
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(got, want, "from a thread of {stack} bytes of stack");
    }
}
