//! Remote loads read in place (the CPU backend's `get_view` path: a `remote_load` used only by
//! elementwise ops reads the peer's bytes where `sim` maps them, with no copy) and elementwise
//! results written straight into a window: values against host goldens, an input that
//! overlaps the output, and the race detector seeing reads that no longer copy.

use eagle::prelude::*;
use eagle::runtime::Platform;

const B: usize = 64;
/// The shifted window: `2 * B`.
const B2: usize = 128;
const NR: Dim = dynamic!("NR");

/// `win[0, 1..B+1] = win[0, 0..B] + z` on this rank's own window, after filling it with `x`:
/// the store's destination overlaps its remote-load operand one element further on, so an
/// in-place loop would read elements it has already written.
#[eagle::kernel(device)]
pub fn shift_own(
    ctx: Ctx,
    x: Tensor<f32, 1, B2>,
    z: Tensor<f32, 1, B>,
    y: Out<Tensor<f32, 1, B2>>,
    win: Window<f32, 1, B2>,
) {
    let me = rank(ctx);
    store(win, [0, 0], load(x, [0, 0], [1, B2]));
    store(
        win,
        [0, 1],
        remote_load(win, me, [0, 0], [1, B]) + load(z, [0, 0], [1, B]),
    );
    store(y, [0, 0], load(win, [0, 0], [1, B2]));
    barrier(ctx);
}

#[eagle::host]
pub fn shift(x: Tensor<f32, NR, 1, B2>, z: Tensor<f32, 1, B>, y: Out<Tensor<f32, NR, 1, B2>>) {
    let buf = alloc_window_buffer([1, B2], f32);
    for r in 0..world_size() {
        shift_own(x[r], z, y[r], window(buf, [1, B2], f32), device = r);
    }
}

#[test]
fn an_in_place_remote_load_that_overlaps_the_store_reads_the_old_values() {
    let p = 2;
    let x = Tensor::<f32>::from_vec(&[p, 1, 2 * B], (0..p * 2 * B).map(|i| i as f32).collect())
        .unwrap();
    let z = Tensor::<f32>::from_vec(&[1, B], vec![0.5; B]).unwrap();
    let mut y = Tensor::<f32>::zeros(&[p, 1, 2 * B]);
    for s in [
        Session::sim(p).unwrap(),
        Session::new(Platform::Cpu, (0..p).collect()).unwrap(),
    ] {
        shift.launch(&s, &x, &z, &mut y).unwrap();
        for r in 0..p {
            let xs = &x.data()[r * 2 * B..(r + 1) * 2 * B];
            let mut want = xs.to_vec();
            for i in 0..B {
                want[i + 1] = xs[i] + 0.5;
            }
            assert_eq!(&y.data()[r * 2 * B..(r + 1) * 2 * B], &want[..], "rank {r}");
        }
    }
}

/// `y = remote(prev) * 2 + remote(next)`: both operands read in place from two peers, the
/// result written straight into this rank's `out` window, then copied out.
#[eagle::kernel(device)]
pub fn combine_peers(
    ctx: Ctx,
    x: Tensor<f32, 1, B>,
    y: Out<Tensor<f32, 1, B>>,
    win: Window<f32, 1, B>,
    out: Window<f32, 1, B>,
) {
    let me = rank(ctx);
    let n = nranks(ctx);
    store(win, [0, 0], load(x, [0, 0], [1, B]));
    barrier(ctx);
    let prev = remote_load(win, (me + n - 1) % n, [0, 0], [1, B]);
    let next = remote_load(win, (me + 1) % n, [0, 0], [1, B]);
    store(out, [0, 0], prev * load(x, [0, 0], [1, B]) + next);
    store(y, [0, 0], load(out, [0, 0], [1, B]));
    barrier(ctx);
}

#[eagle::host]
pub fn neighbours(x: Tensor<f32, NR, 1, B>, y: Out<Tensor<f32, NR, 1, B>>) {
    let a = alloc_window_buffer([1, B], f32);
    let o = alloc_window_buffer([1, B], f32);
    for r in 0..world_size() {
        combine_peers(
            x[r],
            y[r],
            window(a, [1, B], f32),
            window(o, [1, B], f32),
            device = r,
        );
    }
}

#[test]
fn remote_loads_read_in_place_combine_into_a_window_bit_for_bit() {
    for p in [1, 2, 3, 4] {
        let x = eagle_runner::random_tensor(&[p, 1, B], 7 + p as u64);
        let mut y = Tensor::<f32>::zeros(&[p, 1, B]);
        neighbours
            .launch(&Session::sim(p).unwrap(), &x, &mut y)
            .unwrap();
        let row = |r: usize| &x.data()[r * B..(r + 1) * B];
        for r in 0..p {
            let (prev, next) = (row((r + p - 1) % p), row((r + 1) % p));
            let want: Vec<u32> = (0..B)
                .map(|i| (prev[i] * row(r)[i] + next[i]).to_bits())
                .collect();
            let got: Vec<u32> = y.data()[r * B..(r + 1) * B]
                .iter()
                .map(|v| v.to_bits())
                .collect();
            assert_eq!(got, want, "P = {p}, rank {r}");
        }
    }
}

/// The read of the next rank's window is not ordered after that rank's write (no barrier).
#[eagle::kernel(device)]
pub fn unordered_in_place(
    ctx: Ctx,
    x: Tensor<f32, 1, B>,
    y: Out<Tensor<f32, 1, B>>,
    win: Window<f32, 1, B>,
) {
    store(win, [0, 0], load(x, [0, 0], [1, B]));
    let next = remote_load(win, (rank(ctx) + 1) % nranks(ctx), [0, 0], [1, B]);
    store(y, [0, 0], next + load(x, [0, 0], [1, B]));
    barrier(ctx);
}

#[eagle::host]
pub fn unordered(x: Tensor<f32, NR, 1, B>, y: Out<Tensor<f32, NR, 1, B>>) {
    let buf = alloc_window_buffer([1, B], f32);
    for r in 0..world_size() {
        unordered_in_place(x[r], y[r], window(buf, [1, B], f32), device = r);
    }
}

#[test]
fn the_race_detector_sees_a_remote_load_read_in_place() {
    let x = eagle_runner::random_tensor(&[2, 1, B], 3);
    let mut y = Tensor::<f32>::zeros(&[2, 1, B]);
    let e = unordered
        .launch(&Session::sim(2).unwrap(), &x, &mut y)
        .unwrap_err()
        .to_string();
    assert!(e.contains("data race: rank"), "{e}");
    assert!(
        e.contains("with no notify -> wait (or barrier) ordering"),
        "{e}"
    );
    assert!(e.contains("unordered_in_place"), "{e}");
}
