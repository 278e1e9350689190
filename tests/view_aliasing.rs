//! Aliasing of in-place reads and in-place stores (the CPU backend's views and direct
//! stores), written by a break-it review: a store into a sub-view of the tensor or window its
//! operand is read from, two windows over one buffer, shifts by +-1 and +-4 elements with
//! constant offsets, broadcasts, views across barriers, the race detector through views, and
//! the collectives at P = 1..5 with ragged sizes against host goldens in rank order. E1, E1w,
//! E1l and E2 gave wrong values before the run-time overlap check of direct stores.

use eagle::codegen::lower::chunk;
use eagle::prelude::*;

const B: usize = 16;
const B2: usize = 32;
const C: usize = 16;
const NR: Dim = dynamic!("NR");
const N: Dim = dynamic!("N");

fn seq(n: usize, k: f32) -> Vec<f32> {
    (0..n).map(|i| i as f32 * k + 1.0).collect()
}

// ---------- E1: store into a subview of the loaded tensor (rows shifted by 1)
#[eagle::kernel(device)]
pub fn sv_tensor_d(ctx: Ctx, x: Tensor<f32, 4, C>, y: Out<Tensor<f32, 4, C>>) {
    store(y, [0, 0], load(x, [0, 0], [4, C]));
    let d = subview(y, 1, 3);
    store(d, [0, 0], load(y, [0, 0], [2, C]) + 0.5);
}
#[eagle::host]
pub fn sv_tensor(x: Tensor<f32, NR, 4, C>, y: Out<Tensor<f32, NR, 4, C>>) {
    for r in 0..world_size() {
        sv_tensor_d(x[r], y[r], device = r);
    }
}

fn want_rowshift(x: &[f32]) -> Vec<f32> {
    let mut w = x.to_vec();
    for i in 0..2 * C {
        w[C + i] = x[i] + 0.5;
    }
    w
}

#[test]
fn e1_store_into_subview_of_loaded_tensor() {
    let x = Tensor::<f32>::from_vec(&[1, 4, C], seq(4 * C, 1.0)).unwrap();
    let mut y = Tensor::<f32>::zeros(&[1, 4, C]);
    sv_tensor
        .launch(&Session::sim(1).unwrap(), &x, &mut y)
        .unwrap();
    assert_eq!(y.data(), &want_rowshift(x.data())[..]);
}

// ---------- E1w: the same through a window subview and a remote_load of my own window
#[eagle::kernel(device)]
pub fn sv_win_d(ctx: Ctx, x: Tensor<f32, 4, C>, y: Out<Tensor<f32, 4, C>>, win: Window<f32, 4, C>) {
    let me = rank(ctx);
    store(win, [0, 0], load(x, [0, 0], [4, C]));
    let d = subview(win, 1, 3);
    store(d, [0, 0], remote_load(win, me, [0, 0], [2, C]) + 0.5);
    store(y, [0, 0], load(win, [0, 0], [4, C]));
    barrier(ctx);
}
#[eagle::host]
pub fn sv_win(x: Tensor<f32, NR, 4, C>, y: Out<Tensor<f32, NR, 4, C>>) {
    let b = alloc_window_buffer([4, C], f32);
    for r in 0..world_size() {
        sv_win_d(x[r], y[r], window(b, [4, C], f32), device = r);
    }
}
#[eagle::kernel(device)]
pub fn sv_win_l_d(
    ctx: Ctx,
    x: Tensor<f32, 4, C>,
    y: Out<Tensor<f32, 4, C>>,
    win: Window<f32, 4, C>,
) {
    store(win, [0, 0], load(x, [0, 0], [4, C]));
    let d = subview(win, 1, 3);
    store(d, [0, 0], load(win, [0, 0], [2, C]) + 0.5);
    store(y, [0, 0], load(win, [0, 0], [4, C]));
    barrier(ctx);
}
#[eagle::host]
pub fn sv_win_l(x: Tensor<f32, NR, 4, C>, y: Out<Tensor<f32, NR, 4, C>>) {
    let b = alloc_window_buffer([4, C], f32);
    for r in 0..world_size() {
        sv_win_l_d(x[r], y[r], window(b, [4, C], f32), device = r);
    }
}

#[test]
fn e1w_store_into_subview_of_window_remote_load() {
    let p = 2;
    let x = Tensor::<f32>::from_vec(&[p, 4, C], seq(p * 4 * C, 1.0)).unwrap();
    let mut y = Tensor::<f32>::zeros(&[p, 4, C]);
    sv_win
        .launch(&Session::sim(p).unwrap(), &x, &mut y)
        .unwrap();
    for r in 0..p {
        assert_eq!(y.row(r), &want_rowshift(x.row(r))[..], "rank {r}");
    }
}
#[test]
fn e1l_store_into_subview_of_window_local_load() {
    let p = 2;
    let x = Tensor::<f32>::from_vec(&[p, 4, C], seq(p * 4 * C, 1.0)).unwrap();
    let mut y = Tensor::<f32>::zeros(&[p, 4, C]);
    sv_win_l
        .launch(&Session::sim(p).unwrap(), &x, &mut y)
        .unwrap();
    for r in 0..p {
        assert_eq!(y.row(r), &want_rowshift(x.row(r))[..], "rank {r}");
    }
}

// ---------- E2: two window params over one buffer
#[eagle::kernel(device)]
pub fn two_win_d(
    ctx: Ctx,
    x: Tensor<f32, 1, B2>,
    y: Out<Tensor<f32, 1, B2>>,
    a: Window<f32, 1, B2>,
    b: Window<f32, 1, B2>,
) {
    let me = rank(ctx);
    store(a, [0, 0], load(x, [0, 0], [1, B2]));
    store(b, [0, 1], remote_load(a, me, [0, 0], [1, B]) + 0.5);
    store(y, [0, 0], load(a, [0, 0], [1, B2]));
    barrier(ctx);
}
#[eagle::host]
pub fn two_win(x: Tensor<f32, NR, 1, B2>, y: Out<Tensor<f32, NR, 1, B2>>) {
    let buf = alloc_window_buffer([1, B2], f32);
    for r in 0..world_size() {
        two_win_d(
            x[r],
            y[r],
            window(buf, [1, B2], f32),
            window(buf, [1, B2], f32),
            device = r,
        );
    }
}
#[test]
fn e2_two_windows_of_one_buffer() {
    let p = 2;
    let x = Tensor::<f32>::from_vec(&[p, 1, B2], seq(p * B2, 1.0)).unwrap();
    let mut y = Tensor::<f32>::zeros(&[p, 1, B2]);
    two_win
        .launch(&Session::sim(p).unwrap(), &x, &mut y)
        .unwrap();
    for r in 0..p {
        let xs = x.row(r);
        let mut w = xs.to_vec();
        for i in 0..B {
            w[i + 1] = xs[i] + 0.5;
        }
        assert_eq!(y.row(r), &w[..], "rank {r}");
    }
}

// ---------- E3: shifts on the same window / tensor, several dtypes, odd tile
macro_rules! shift_case {
    ($dev:ident, $host:ident, $t:ident, $src:expr, $dst:expr, $len:expr, remote, $k:expr) => {
        #[eagle::kernel(device)]
        pub fn $dev(ctx: Ctx, x: Tensor<$t, 1, B2>, y: Out<Tensor<$t, 1, B2>>, win: Window<$t, 1, B2>) {
            let me = rank(ctx);
            store(win, [0, 0], load(x, [0, 0], [1, B2]));
            store(win, [0, $dst], remote_load(win, me, [0, $src], [1, $len]) * $k + $k);
            store(y, [0, 0], load(win, [0, 0], [1, B2]));
            barrier(ctx);
        }
        shift_case!(@host $dev, $host, $t);
    };
    ($dev:ident, $host:ident, $t:ident, $src:expr, $dst:expr, $len:expr, local, $k:expr) => {
        #[eagle::kernel(device)]
        pub fn $dev(ctx: Ctx, x: Tensor<$t, 1, B2>, y: Out<Tensor<$t, 1, B2>>, win: Window<$t, 1, B2>) {
            store(win, [0, 0], load(x, [0, 0], [1, B2]));
            store(win, [0, $dst], load(win, [0, $src], [1, $len]) * $k + $k);
            store(y, [0, 0], load(win, [0, 0], [1, B2]));
            barrier(ctx);
        }
        shift_case!(@host $dev, $host, $t);
    };
    (@host $dev:ident, $host:ident, $t:ident) => {
        #[eagle::host]
        pub fn $host(x: Tensor<$t, NR, 1, B2>, y: Out<Tensor<$t, NR, 1, B2>>) {
            let buf = alloc_window_buffer([1, B2], $t);
            for r in 0..world_size() {
                $dev(x[r], y[r], window(buf, [1, B2], $t), device = r);
            }
        }
    };
}
shift_case!(s_p1_d, s_p1, f32, 4, 5, 13, remote, 2.0);
shift_case!(s_m1_d, s_m1, f32, 5, 4, 13, remote, 2.0);
shift_case!(s_p4_d, s_p4, f32, 4, 8, 13, remote, 2.0);
shift_case!(s_m4_d, s_m4, f32, 8, 4, 13, remote, 2.0);
shift_case!(s_0_d, s_0, f32, 4, 4, 13, remote, 2.0);
shift_case!(s_p1l_d, s_p1l, f32, 4, 5, 13, local, 2.0);
shift_case!(s_p4l_d, s_p4l, f32, 4, 8, 7, local, 2.0);
shift_case!(s_f64_d, s_f64, f64, 3, 4, 7, remote, 2.0);
shift_case!(s_i32_d, s_i32, i32, 3, 4, 7, remote, 3);
shift_case!(s_i32m_d, s_i32m, i32, 4, 3, 7, remote, 3);

fn shift_want<T: Copy>(xs: &[T], src: usize, dst: usize, len: usize, f: impl Fn(T) -> T) -> Vec<T> {
    let mut w = xs.to_vec();
    for i in 0..len {
        w[dst + i] = f(xs[src + i]);
    }
    w
}

type L<T> = dyn Fn(&Session, &Tensor<T>, &mut Tensor<T>) -> eagle::Result<eagle::LaunchReport>;
fn run_shift<T: eagle::runtime::Element + Copy + PartialEq + std::fmt::Debug>(
    name: &str,
    l: &L<T>,
    x: Vec<T>,
    src: usize,
    dst: usize,
    len: usize,
    f: impl Fn(T) -> T + Copy,
) -> Result<(), String> {
    let p = 2;
    let x = Tensor::<T>::from_vec(&[p, 1, B2], x).unwrap();
    let mut y = Tensor::<T>::from_vec(&[p, 1, B2], x.data().to_vec()).unwrap();
    l(&Session::sim(p).unwrap(), &x, &mut y).map_err(|e| format!("{name}: {e}"))?;
    for r in 0..p {
        let w = shift_want(x.row(r), src, dst, len, f);
        if y.row(r) != &w[..] {
            return Err(format!("{name} rank {r}: got {:?} want {:?}", y.row(r), w));
        }
    }
    Ok(())
}

#[test]
fn e3_shifts() {
    let xf = seq(2 * B2, 1.0);
    let f = |v: f32| v * 2.0 + 2.0;
    let mut errs = vec![];
    let cases: Vec<(&str, &L<f32>, usize, usize, usize)> = vec![
        ("+1 remote", &|s, x, y| s_p1.launch(s, x, y), 4, 5, 13),
        ("-1 remote", &|s, x, y| s_m1.launch(s, x, y), 5, 4, 13),
        ("+4 remote", &|s, x, y| s_p4.launch(s, x, y), 4, 8, 13),
        ("-4 remote", &|s, x, y| s_m4.launch(s, x, y), 8, 4, 13),
        ("0 remote", &|s, x, y| s_0.launch(s, x, y), 4, 4, 13),
        ("+1 local", &|s, x, y| s_p1l.launch(s, x, y), 4, 5, 13),
        ("+4 local", &|s, x, y| s_p4l.launch(s, x, y), 4, 8, 7),
    ];
    for (n, l, a, b, len) in cases {
        if let Err(e) = run_shift(n, l, xf.clone(), a, b, len, f) {
            errs.push(e);
        }
    }
    let xd: Vec<f64> = (0..2 * B2).map(|i| i as f64 * 0.25 + 1.0).collect();
    if let Err(e) = run_shift(
        "f64 +1",
        &|s, x, y| s_f64.launch(s, x, y),
        xd,
        3,
        4,
        7,
        |v| v * 2.0 + 2.0,
    ) {
        errs.push(e);
    }
    let xi: Vec<i32> = (0..2 * B2 as i32).map(|i| i * 7 - 3).collect();
    if let Err(e) = run_shift(
        "i32 +1",
        &|s, x, y| s_i32.launch(s, x, y),
        xi.clone(),
        3,
        4,
        7,
        |v| v * 3 + 3,
    ) {
        errs.push(e);
    }
    if let Err(e) = run_shift(
        "i32 -1",
        &|s, x, y| s_i32m.launch(s, x, y),
        xi,
        4,
        3,
        7,
        |v| v * 3 + 3,
    ) {
        errs.push(e);
    }
    assert!(errs.is_empty(), "{}", errs.join("\n"));
}

// ---------- E4: broadcast of a [1,1] / [1,C] view into a store at the same offsets
#[eagle::kernel(device)]
pub fn bc_d(ctx: Ctx, x: Tensor<f32, 4, C>, y: Out<Tensor<f32, 4, C>>, win: Window<f32, 4, C>) {
    let me = rank(ctx);
    store(win, [0, 0], load(x, [0, 0], [4, C]));
    store(
        win,
        [0, 0],
        remote_load(win, me, [0, 0], [1, C]) + load(x, [0, 0], [2, C]),
    );
    store(
        win,
        [2, 0],
        remote_load(win, me, [2, 0], [1, 1]) + load(x, [2, 0], [1, C]),
    );
    store(y, [0, 0], load(win, [0, 0], [4, C]));
    barrier(ctx);
}
#[eagle::host]
pub fn bc(x: Tensor<f32, NR, 4, C>, y: Out<Tensor<f32, NR, 4, C>>) {
    let b = alloc_window_buffer([4, C], f32);
    for r in 0..world_size() {
        bc_d(x[r], y[r], window(b, [4, C], f32), device = r);
    }
}
#[test]
fn e4_broadcast_view_into_same_offsets() {
    let p = 1;
    let x = Tensor::<f32>::from_vec(&[p, 4, C], seq(4 * C, 1.0)).unwrap();
    let mut y = Tensor::<f32>::zeros(&[p, 4, C]);
    bc.launch(&Session::sim(p).unwrap(), &x, &mut y).unwrap();
    let xs = x.data();
    let mut w = xs.to_vec();
    for i in 0..2 {
        for j in 0..C {
            w[i * C + j] = xs[j] + xs[i * C + j];
        }
    }
    for j in 0..C {
        w[2 * C + j] = xs[2 * C] + xs[2 * C + j];
    }
    assert_eq!(y.data(), &w[..]);
}

// ---------- E5: views across barriers, used twice, used by a store too
#[eagle::kernel(device)]
pub fn across_d(
    ctx: Ctx,
    x: Tensor<f32, 1, B>,
    y: Out<Tensor<f32, 3, B>>,
    win: Window<f32, 1, B>,
    out: Window<f32, 1, B>,
) {
    let me = rank(ctx);
    let n = nranks(ctx);
    store(win, [0, 0], load(x, [0, 0], [1, B]));
    barrier(ctx);
    let v = remote_load(win, (me + 1) % n, [0, 0], [1, B]);
    barrier(ctx);
    store(win, [0, 0], load(x, [0, 0], [1, B]) * 10.0);
    barrier(ctx);
    store(y, [0, 0], v * v + v);
    let u = remote_load(win, (me + 1) % n, [0, 0], [1, B]);
    store(out, [0, 0], u);
    store(y, [1, 0], u + 1.0);
    store(y, [2, 0], load(out, [0, 0], [1, B]));
    barrier(ctx);
}
#[eagle::host]
pub fn across(x: Tensor<f32, NR, 1, B>, y: Out<Tensor<f32, NR, 3, B>>) {
    let a = alloc_window_buffer([1, B], f32);
    let o = alloc_window_buffer([1, B], f32);
    for r in 0..world_size() {
        across_d(
            x[r],
            y[r],
            window(a, [1, B], f32),
            window(o, [1, B], f32),
            device = r,
        );
    }
}
#[test]
fn e5_views_across_barriers() {
    for p in 1..=4 {
        let x = Tensor::<f32>::from_vec(&[p, 1, B], seq(p * B, 0.5)).unwrap();
        let mut y = Tensor::<f32>::zeros(&[p, 3, B]);
        across
            .launch(&Session::sim(p).unwrap(), &x, &mut y)
            .unwrap();
        for r in 0..p {
            let nx = x.row((r + 1) % p);
            let mut w = vec![];
            w.extend(nx.iter().map(|v| v * v + v));
            w.extend(nx.iter().map(|v| v * 10.0 + 1.0));
            w.extend(nx.iter().map(|v| v * 10.0));
            assert_eq!(y.row(r), &w[..], "P={p} rank {r}");
        }
    }
}

// ---------- E6: tensor store at constant offsets fed by a load of the same tensor elsewhere
#[eagle::kernel(device)]
pub fn tshift_d(ctx: Ctx, x: Tensor<f32, 1, B2>, y: Out<Tensor<f32, 1, B2>>) {
    store(y, [0, 0], load(x, [0, 0], [1, B2]));
    store(
        y,
        [0, 3],
        load(y, [0, 2], [1, 13]) + load(y, [0, 3], [1, 13]),
    );
    store(y, [0, 20], load(y, [0, 16], [1, 9]) * 2.0 - 1.0);
}
#[eagle::host]
pub fn tshift(x: Tensor<f32, NR, 1, B2>, y: Out<Tensor<f32, NR, 1, B2>>) {
    for r in 0..world_size() {
        tshift_d(x[r], y[r], device = r);
    }
}
#[test]
fn e6_tensor_shift_constant_offsets() {
    let x = Tensor::<f32>::from_vec(&[1, 1, B2], seq(B2, 1.5)).unwrap();
    let mut y = Tensor::<f32>::zeros(&[1, 1, B2]);
    tshift
        .launch(&Session::sim(1).unwrap(), &x, &mut y)
        .unwrap();
    let mut w = x.data().to_vec();
    let w0 = w.clone();
    for i in 0..13 {
        w[3 + i] = w0[2 + i] + w0[3 + i];
    }
    let w1 = w.clone();
    for i in 0..9 {
        w[20 + i] = w1[16 + i] * 2.0 - 1.0;
    }
    assert_eq!(y.data(), &w[..]);
}

// ---------- E7: race detector: view used twice, unsynchronised; direct window store vs peer read
#[eagle::kernel(device)]
pub fn race1_d(ctx: Ctx, x: Tensor<f32, 1, B>, y: Out<Tensor<f32, 1, B>>, win: Window<f32, 1, B>) {
    store(win, [0, 0], load(x, [0, 0], [1, B]));
    let v = remote_load(win, (rank(ctx) + 1) % nranks(ctx), [0, 0], [1, B]);
    store(y, [0, 0], v * v - v);
    barrier(ctx);
}
#[eagle::host]
pub fn race1(x: Tensor<f32, NR, 1, B>, y: Out<Tensor<f32, NR, 1, B>>) {
    let b = alloc_window_buffer([1, B], f32);
    for r in 0..world_size() {
        race1_d(x[r], y[r], window(b, [1, B], f32), device = r);
    }
}
#[eagle::kernel(device)]
pub fn race2_d(ctx: Ctx, x: Tensor<f32, 1, B>, y: Out<Tensor<f32, 1, B>>, win: Window<f32, 1, B>) {
    store(win, [0, 0], load(x, [0, 0], [1, B]));
    barrier(ctx);
    store(win, [0, 0], load(x, [0, 0], [1, B]) * 2.0 + 1.0);
    let u = remote_load(win, (rank(ctx) + 1) % nranks(ctx), [0, 0], [1, B]);
    store(y, [0, 0], u + 0.0);
    barrier(ctx);
}
#[eagle::host]
pub fn race2(x: Tensor<f32, NR, 1, B>, y: Out<Tensor<f32, NR, 1, B>>) {
    let b = alloc_window_buffer([1, B], f32);
    for r in 0..world_size() {
        race2_d(x[r], y[r], window(b, [1, B], f32), device = r);
    }
}
#[test]
fn e7_race_detector() {
    for p in [2, 3] {
        let x = eagle_runner::random_tensor(&[p, 1, B], 3);
        let mut y = Tensor::<f32>::zeros(&[p, 1, B]);
        let e = race1.launch(&Session::sim(p).unwrap(), &x, &mut y);
        assert!(
            matches!(&e, Err(e) if e.to_string().contains("data race")),
            "race1 P={p}: {:?}",
            e.map(|_| ())
        );
        let e = race2.launch(&Session::sim(p).unwrap(), &x, &mut y);
        assert!(
            matches!(&e, Err(e) if e.to_string().contains("data race")),
            "race2 P={p}: {:?}",
            e.map(|_| ())
        );
    }
}

// ---------- E8: collectives at P=1..5, ragged sizes, rank-order goldens
macro_rules! ar_case {
    ($dev:ident, $host:ident, $mode:ident) => {
        #[eagle::kernel(device)]
        pub fn $dev(
            ctx: Ctx,
            x: Tensor<f32, N>,
            y: Out<Tensor<f32, N>>,
            src: Window<f32, N>,
            dst: Window<f32, N>,
        ) {
            let me = rank(ctx);
            put(src, me, x);
            allreduce(ctx, src, dst, Sum, $mode);
            get(y, me, dst);
        }
        #[eagle::host]
        pub fn $host(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>) {
            let s = alloc_window_buffer([N], f32);
            let d = alloc_window_buffer([N], f32);
            for r in 0..world_size() {
                $dev(
                    x[r],
                    y[r],
                    window(s, [N], f32),
                    window(d, [N], f32),
                    device = r,
                );
            }
        }
    };
}
ar_case!(arm_d, arm, Mesh);
ar_case!(art_d, art, TwoPhase);
ar_case!(arr_d, arr, Ring);

#[eagle::kernel(device)]
pub fn rs2_d(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>, src: Window<f32, N>) {
    put(src, rank(ctx), x);
    reduce_scatter(ctx, src, y, Sum);
}
#[eagle::host]
pub fn rs2(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>) {
    let s = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        rs2_d(x[r], y[r], window(s, [N], f32), device = r);
    }
}

fn inp(p: usize, n: usize, seed: u64) -> Tensor<f32> {
    let d = (0..p * n)
        .map(|i| {
            let h = (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)
                ^ (i as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9))
                >> 11;
            (h as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32 * 1000.0 + 0.001
        })
        .collect();
    Tensor::from_vec(&[p, n], d).unwrap()
}

#[test]
fn e8_collectives() {
    let mut errs = vec![];
    for p in 1..=5usize {
        for n in [1usize, 2, 3, 5, 7, 13, 33, 101, 1027] {
            let s = Session::sim(p).unwrap();
            let x = inp(p, n, (p * 7 + n) as u64);
            for (name, ring, l) in [
                (
                    "mesh",
                    false,
                    &(|s: &Session, x: &Tensor<f32>, y: &mut Tensor<f32>| arm.launch(s, x, y))
                        as &L<f32>,
                ),
                (
                    "two",
                    false,
                    &|s: &Session, x: &Tensor<f32>, y: &mut Tensor<f32>| art.launch(s, x, y),
                ),
                (
                    "ring",
                    true,
                    &|s: &Session, x: &Tensor<f32>, y: &mut Tensor<f32>| arr.launch(s, x, y),
                ),
            ] {
                let want: Vec<u32> = (0..n)
                    .map(|j| {
                        let c = (0..p as u64).find(|&c| {
                            let (o, l) = chunk(n as u64, p as u64, c);
                            (o..o + l).contains(&(j as u64))
                        });
                        let st = if ring { c.unwrap_or(0) as usize } else { 0 };
                        let mut acc = x.row(st)[j];
                        for k in 1..p {
                            acc += x.row((st + k) % p)[j];
                        }
                        acc.to_bits()
                    })
                    .collect();
                let mut y = Tensor::<f32>::zeros(&[p, n]);
                match l(&s, &x, &mut y) {
                    Err(e) => errs.push(format!("{name} P={p} N={n}: {e}")),
                    Ok(_) => {
                        for r in 0..p {
                            let got: Vec<u32> = y.row(r).iter().map(|v| v.to_bits()).collect();
                            if got != want {
                                errs.push(format!("{name} P={p} N={n} rank {r} differs"));
                            }
                        }
                    }
                }
            }
            // reduce_scatter
            let mut y = Tensor::<f32>::from_vec(&[p, n], vec![-7.0; p * n]).unwrap();
            match rs2.launch(&s, &x, &mut y) {
                Err(e) => errs.push(format!("rs P={p} N={n}: {e}")),
                Ok(_) => {
                    for r in 0..p {
                        let (o, l) = chunk(n as u64, p as u64, r as u64);
                        for j in 0..n {
                            let mut acc = x.row(0)[j];
                            for k in 1..p {
                                acc += x.row(k)[j];
                            }
                            let w = if (o..o + l).contains(&(j as u64)) {
                                acc
                            } else {
                                -7.0
                            };
                            if y.row(r)[j].to_bits() != w.to_bits() {
                                errs.push(format!(
                                    "rs P={p} N={n} rank {r} el {j}: {} vs {}",
                                    y.row(r)[j],
                                    w
                                ));
                                break;
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(errs.is_empty(), "{}", errs.join("\n"));
}

// ---------- E9: allreduce with src and dst the same window / the same buffer
#[eagle::kernel(device)]
pub fn ar_same_d(
    ctx: Ctx,
    x: Tensor<f32, N>,
    y: Out<Tensor<f32, N>>,
    src: Window<f32, N>,
    dst: Window<f32, N>,
) {
    let me = rank(ctx);
    put(src, me, x);
    allreduce(ctx, src, dst, Sum, Mesh);
    get(y, me, dst);
}
#[eagle::host]
pub fn ar_same(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>) {
    let s = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        ar_same_d(
            x[r],
            y[r],
            window(s, [N], f32),
            window(s, [N], f32),
            device = r,
        );
    }
}
#[test]
fn e9_allreduce_src_dst_same_buffer() {
    // Ranks overwrite the buffer their peers are still reading: the race detector says so.
    let p = 3;
    let n = 10;
    let x = inp(p, n, 5);
    let mut y = Tensor::<f32>::zeros(&[p, n]);
    let e = ar_same
        .launch(&Session::sim(p).unwrap(), &x, &mut y)
        .unwrap_err()
        .to_string();
    assert!(e.contains("data race: rank"), "{e}");
    assert!(e.contains("ar_same_d"), "{e}");
}
