//! Differential tests: many small programs (tiles at run-time offsets, overlapping moves,
//! control flow, element access, windows and signals, every collective on every dtype, run-time
//! errors, sample kernels of every category) run on `sim` and in the CUDA emulation, which must
//! agree bit for bit (any NaN equals any NaN) or fail with the same error. Written by a helper
//! hunting for emitter bugs; it found none in the outputs.
#![cfg(feature = "cuda")]
use eagle::plan::{plan, Planes, Structure};
use eagle::prelude::*;
use eagle::{Platform, Session};

mod emulation;
use emulation::cxx;

const NR: Dim = dynamic!("NR");

/// Outputs as bit vectors, NaN canonicalised.
trait Bits {
    fn bits(&self) -> Vec<u64>;
}
impl Bits for Tensor<f32> {
    fn bits(&self) -> Vec<u64> {
        self.data()
            .iter()
            .map(|v| {
                if v.is_nan() {
                    0x7fc0_0000
                } else {
                    v.to_bits() as u64
                }
            })
            .collect()
    }
}
impl Bits for Tensor<f64> {
    fn bits(&self) -> Vec<u64> {
        self.data()
            .iter()
            .map(|v| {
                if v.is_nan() {
                    0x7ff8_0000_0000_0000
                } else {
                    v.to_bits()
                }
            })
            .collect()
    }
}
macro_rules! ibits {
    ($($t:ty),*) => {$(
        impl Bits for Tensor<$t> {
            fn bits(&self) -> Vec<u64> { self.data().iter().map(|v| *v as u64).collect() }
        }
    )*};
}
ibits!(i32, i64, u32, u64);

type Out = Result<Vec<Vec<u64>>, String>;

fn sess(emu: bool, p: usize) -> Session {
    let s = if emu {
        Session::cuda_emulated(vec![0; p]).unwrap()
    } else {
        Session::sim(p).unwrap()
    };
    s.with_wait_timeout(std::time::Duration::from_secs(5))
}

/// Runs `f` on sim and in the emulation at each world size and compares.
fn both(name: &str, ps: &[usize], f: impl Fn(&Session) -> Out) -> Vec<String> {
    let mut bad = vec![];
    for &p in ps {
        let want = f(&sess(false, p));
        let got = f(&sess(true, p));
        let same = match (&want, &got) {
            (Ok(a), Ok(b)) => a == b,
            (Err(a), Err(b)) => norm(a) == norm(b),
            _ => false,
        };
        if !same {
            let desc = |r: &Out| match r {
                Ok(v) => format!(
                    "Ok({:?})",
                    v.iter()
                        .map(|x| x.iter().take(64).collect::<Vec<_>>())
                        .collect::<Vec<_>>()
                ),
                Err(e) => format!("Err({e})"),
            };
            let mut diff = String::new();
            if let (Ok(a), Ok(b)) = (&want, &got) {
                for (k, (x, y)) in a.iter().zip(b).enumerate() {
                    if let Some(i) = (0..x.len()).find(|&i| x[i] != y[i]) {
                        diff = format!(
                            " first diff: output {k} elem {i}: sim {:#x} emu {:#x}",
                            x[i], y[i]
                        );
                        break;
                    }
                }
            }
            let msg = format!(
                "{name} P={p}:{diff}\n  sim: {}\n  emu: {}",
                desc(&want),
                desc(&got)
            );
            println!("DISAGREE {msg}");
            bad.push(msg);
        } else {
            println!(
                "agree {name} P={p}: {}",
                match &want {
                    Ok(_) => "ok".to_string(),
                    Err(e) => format!("both err: {e}"),
                }
            );
        }
    }
    bad
}

/// An error message without where it ran.
fn norm(s: &str) -> String {
    s.replace(" (in the CUDA emulation)", "")
        .replace(" (on the GPU)", "")
}

fn ok<T>(r: eagle::Result<T>) -> Result<(), String> {
    r.map(|_| ()).map_err(|e| e.to_string())
}

fn ramp_f32(shape: &[usize], seed: u32) -> Tensor<f32> {
    let n: usize = shape.iter().product();
    Tensor::from_vec(
        shape,
        (0..n)
            .map(|i| {
                ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 1000) as f32 / 7.0 - 60.0
            })
            .collect(),
    )
    .unwrap()
}

// ---------------------------------------------------------------- tiles

#[eagle::kernel(device)]
pub fn tiles_k(
    ctx: Ctx,
    x: Tensor<f32, 5, 7>,
    y: Out<Tensor<f32, 5, 7>>,
    z: Out<Tensor<f32, 3, 4, 5>>,
) {
    let me = rank(ctx);
    let a = me % 3;
    let b = (me + 1) % 2;
    let t = load(x, [a, b + 1], [3, 5]);
    store(y, [b + 1, a], t * 2.0 + 1.0);
    let one = load(x, [a + 2, b + 5], [1, 1]);
    store(y, [4 - a, 6 - b], one - 3.0);
    // 3-D tile from a 2-D source, with offsets at run time.
    let a2 = me % 2;
    let u = load(z, [0, a2, b], [2, 2, 3]);
    let u2 = load(z, [1, b + 1, a2 + 1], [2, 2, 3]);
    store(z, [1, a2, b + 1], u * u2 + 1.0);
    let w = load(z, [b, a, me % 2], [2, 2, 3]);
    store(z, [1 - b, a2 + 1, 2 - me % 2], w + 0.5);
}

#[eagle::host]
pub fn tiles_h(
    x: Tensor<f32, NR, 5, 7>,
    y: Out<Tensor<f32, NR, 5, 7>>,
    z: Out<Tensor<f32, NR, 3, 4, 5>>,
) {
    for r in 0..world_size() {
        tiles_k(x[r], y[r], z[r], device = r);
    }
}

/// Overlap: load, store shifted by one into the same tensor.
#[eagle::kernel(device)]
pub fn overlap_k(
    ctx: Ctx,
    x: Tensor<f32, 3, 9>,
    y: Out<Tensor<f32, 3, 9>>,
    win: Window<f32, 3, 9>,
) {
    let me = rank(ctx);
    store(y, [0, 0], load(x, [0, 0], [3, 9]));
    let t = load(y, [0, 0], [3, 7]);
    store(y, [0, 1], t);
    let t2 = load(y, [1, me % 2], [2, 5]);
    store(y, [0, me % 2 + 1], t2 + 1.0);
    store(win, [0, 0], load(x, [0, 0], [3, 9]));
    let s = load(win, [0, 1], [3, 8]);
    store(win, [0, 0], s);
    let s2 = load(win, [0, 0], [2, 9]);
    store(win, [1, 0], s2 * 3.0);
    barrier(ctx);
    let r = remote_load(win, (me + 1) % nranks(ctx), [0, 0], [3, 9]);
    barrier(ctx);
    store(y, [0, 0], load(y, [0, 0], [3, 9]) + r);
}

#[eagle::host]
pub fn overlap_h(x: Tensor<f32, NR, 3, 9>, y: Out<Tensor<f32, NR, 3, 9>>) {
    let b = alloc_window_buffer([3, 9], f32);
    for r in 0..world_size() {
        overlap_k(x[r], y[r], window(b, [3, 9], f32), device = r);
    }
}

#[test]
fn tiles_at_runtime_offsets() {
    cxx();
    let mut bad = vec![];
    bad.extend(both("tiles", &[1, 2, 3, 5], |s| {
        let p = s.world_size();
        let x = ramp_f32(&[p, 5, 7], 1);
        let mut y = ramp_f32(&[p, 5, 7], 2);
        let mut z = ramp_f32(&[p, 3, 4, 5], 3);
        ok(tiles_h.launch(s, &x, &mut y, &mut z))?;
        Ok(vec![y.bits(), z.bits()])
    }));
    bad.extend(both("overlap", &[1, 2, 3], |s| {
        let p = s.world_size();
        let x = ramp_f32(&[p, 3, 9], 4);
        let mut y = ramp_f32(&[p, 3, 9], 5);
        ok(overlap_h.launch(s, &x, &mut y))?;
        Ok(vec![y.bits()])
    }));
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

// ---------------------------------------------------------------- control flow and elements

#[eagle::kernel(device)]
pub fn flow_k(ctx: Ctx, x: Tensor<f64, 4, 6>, y: Out<Tensor<f64, 4, 6>>, c: Out<Tensor<i64, 8>>) {
    let me = rank(ctx);
    let mut acc: f64 = 0.0;
    let mut cnt: i64 = 0;
    for i in 0..me + 2 {
        for j in i..6 {
            if (i + j) % 2 == 0 {
                acc += x[i % 4][j];
                cnt += 1;
            } else {
                acc = acc * 0.5 - x[(i + 1) % 4][j];
                if j > 3 {
                    cnt = cnt * 3;
                } else {
                    cnt -= 1;
                }
            }
        }
    }
    y[0][0] = acc;
    y[0][1] += y[0][0];
    y[1][2] = y[0][1] * 2.0 + y[1][2];
    y[1][2] += 1.0;
    y[1][2] += y[1][2];
    c[0] = cnt;
    c[1] = c[0] * 7 + c[1];
    let mut k = 0;
    for i in 0..me {
        k = k + i * i;
        c[2 + i % 5] += k as i64;
    }
    for i in 0..4 {
        let t = load(y, [i, 0], [1, 6]);
        if i % 2 == me % 2 {
            store(y, [i, 0], t + acc);
        }
    }
    c[7] = k as i64;
}

#[eagle::host]
pub fn flow_h(x: Tensor<f64, NR, 4, 6>, y: Out<Tensor<f64, NR, 4, 6>>, c: Out<Tensor<i64, NR, 8>>) {
    for r in 0..world_size() {
        flow_k(x[r], y[r], c[r], device = r);
    }
}

#[eagle::kernel(device)]
pub fn scal_k(
    ctx: Ctx,
    a: Tensor<i32, 16>,
    b: Tensor<i32, 16>,
    f: Tensor<f64, 16>,
    y: Out<Tensor<i32, 16, 8>>,
    g: Out<Tensor<f64, 16, 6>>,
    u: Out<Tensor<u64, 16, 4>>,
) {
    for i in 0..16 {
        let p = a[i];
        let q = b[i];
        y[i][0] = p + q;
        y[i][1] = p * q;
        y[i][2] = p - q;
        y[i][3] = min(p, q);
        y[i][4] = max(p, q);
        y[i][5] = abs(p);
        y[i][6] = -p;
        if q != 0 {
            y[i][7] = p / q + p % q;
        }
        let v = f[i];
        g[i][0] = min(v, 0.0);
        g[i][1] = max(v, -0.0);
        g[i][2] = (v as i32) as f64;
        g[i][3] = (v as u32) as f64 + (v as usize) as f64;
        g[i][4] = (v as i64) as f64;
        g[i][5] = select(v > 1.0, v, -v);
        u[i][0] = v as u64;
        u[i][1] = (p as i64) as u64;
        u[i][2] = (p as u32) as u64;
        u[i][3] = (p as usize) as u64;
    }
}

#[eagle::host]
pub fn scal_h(
    a: Tensor<i32, NR, 16>,
    b: Tensor<i32, NR, 16>,
    f: Tensor<f64, NR, 16>,
    y: Out<Tensor<i32, NR, 16, 8>>,
    g: Out<Tensor<f64, NR, 16, 6>>,
    u: Out<Tensor<u64, NR, 16, 4>>,
) {
    for r in 0..world_size() {
        scal_k(a[r], b[r], f[r], y[r], g[r], u[r], device = r);
    }
}

#[test]
fn control_flow_and_elements() {
    cxx();
    let mut bad = vec![];
    bad.extend(both("flow", &[1, 2, 3, 5], |s| {
        let p = s.world_size();
        let x = Tensor::from_vec(
            &[p, 4, 6],
            (0..p * 24).map(|i| i as f64 * 0.37 - 3.0).collect(),
        )
        .unwrap();
        let mut y =
            Tensor::from_vec(&[p, 4, 6], (0..p * 24).map(|i| i as f64 * 0.1).collect()).unwrap();
        let mut c = Tensor::from_vec(&[p, 8], (0..p * 8).map(|i| i as i64).collect()).unwrap();
        ok(flow_h.launch(s, &x, &mut y, &mut c))?;
        Ok(vec![y.bits(), c.bits()])
    }));
    bad.extend(both("scalars", &[1, 2], |s| {
        let p = s.world_size();
        let av = [
            i32::MIN,
            i32::MAX,
            -1,
            0,
            7,
            -7,
            3,
            i32::MIN,
            100,
            -100,
            1,
            2,
            i32::MAX,
            -5,
            9,
            0,
        ];
        let bv = [
            -1,
            -1,
            i32::MIN,
            5,
            2,
            -2,
            0,
            1,
            -3,
            7,
            i32::MAX,
            i32::MIN,
            2,
            0,
            -9,
            1,
        ];
        let fv = [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            0.0,
            3e9,
            -3e9,
            1e20,
            -1e20,
            2.5,
            -2.5,
            4294967295.5,
            2147483647.7,
            -2147483648.9,
            1.8e19,
            9.3e18,
        ];
        let a =
            Tensor::from_vec(&[p, 16], av.iter().cycle().take(p * 16).copied().collect()).unwrap();
        let b =
            Tensor::from_vec(&[p, 16], bv.iter().cycle().take(p * 16).copied().collect()).unwrap();
        let f =
            Tensor::from_vec(&[p, 16], fv.iter().cycle().take(p * 16).copied().collect()).unwrap();
        let mut y = Tensor::<i32>::zeros(&[p, 16, 8]);
        let mut g = Tensor::<f64>::zeros(&[p, 16, 6]);
        let mut u = Tensor::<u64>::zeros(&[p, 16, 4]);
        ok(scal_h.launch(s, &a, &b, &f, &mut y, &mut g, &mut u))?;
        Ok(vec![y.bits(), g.bits(), u.bits()])
    }));
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

// ---------------------------------------------------------------- windows

#[eagle::kernel(device)]
pub fn win_k(
    ctx: Ctx,
    x: Tensor<f32, 6, 5>,
    y: Out<Tensor<f32, 6, 5>>,
    c: Out<Tensor<i64, 6>>,
    w: Window<f32, 6, 5>,
    sig: Window<i64, 4>,
    cnt: Window<u32, 2>,
) {
    let me = rank(ctx);
    let n = nranks(ctx);
    let next = (me + 1) % n;
    let prev = (me + n - 1) % n;
    put(w, next, x);
    notify(sig, next, [0], 5, Set);
    wait(sig, [0], 5, Eq);
    let t = load(w, [1, 1], [4, 3]);
    store(y, [2, 2], t);
    barrier(ctx);
    // remote_store into a subview of the previous rank's window.
    let sv = subview(w, 2, 3);
    remote_store(sv, prev, [me % 2, 1], load(x, [0, 0], [2, 4]));
    notify(cnt, 0, [1], 1, AtomicAdd);
    notify(sig, prev, [1], me as i64 + 10, Set);
    wait(sig, [1], 10, Ge);
    wait(sig, [1], 100, Lt);
    wait(sig, [1], 9, Gt);
    wait(sig, [1], 1000, Le);
    wait(sig, [1], 0, Ne);
    if me == 0 {
        wait(cnt, [1], n as u32, Eq);
    }
    barrier(ctx);
    let r = remote_load(sv, next, [0, 0], [3, 5]);
    store(y, [0, 0], r);
    for i in 0..n {
        barrier(ctx);
        let q = remote_load(w, (me + i) % n, [i % 6, 0], [1, 5]);
        store(y, [5, 0], load(y, [5, 0], [1, 5]) + q);
        barrier(ctx);
    }
    c[0] = sig[0];
    c[1] = sig[1];
    c[2] = cnt[1] as i64;
    get(y, prev, w);
    barrier(ctx);
}

#[eagle::host]
pub fn win_h(x: Tensor<f32, NR, 6, 5>, y: Out<Tensor<f32, NR, 6, 5>>, c: Out<Tensor<i64, NR, 6>>) {
    let b = alloc_window_buffer([6, 5], f32);
    let s = alloc_window_buffer([4], i64);
    let k = alloc_window_buffer([2], u32);
    for r in 0..world_size() {
        win_k(
            x[r],
            y[r],
            c[r],
            window(b, [6, 5], f32),
            window(s, [4], i64),
            window(k, [2], u32),
            device = r,
        );
    }
}

#[test]
fn windows_and_signals() {
    cxx();
    let bad = both("windows", &[1, 2, 3, 5], |s| {
        let p = s.world_size();
        let x = ramp_f32(&[p, 6, 5], 9);
        let mut y = ramp_f32(&[p, 6, 5], 10);
        let mut c = Tensor::<i64>::zeros(&[p, 6]);
        ok(win_h.launch(s, &x, &mut y, &mut c))?;
        Ok(vec![y.bits(), c.bits()])
    });
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

// ---------------------------------------------------------------- collectives

macro_rules! coll {
    ($m:ident, $t:ident, $n:expr) => {
        mod $m {
            use eagle::prelude::*;
            const NR: Dim = dynamic!("NR");
            pub const N: usize = $n;
            #[eagle::kernel(device)]
            pub fn k(
                ctx: Ctx,
                x: Tensor<$t, N>,
                y: Out<Tensor<$t, 9, N>>,
                a2a: Tensor<$t, NR, 3>,
                ya: Out<Tensor<$t, NR, 3>>,
                src: Window<$t, N>,
                d1: Window<$t, N>,
                d2: Window<$t, N>,
                d3: Window<$t, N>,
                d4: Window<$t, N>,
                d5: Window<$t, N>,
                s2: Window<$t, NR, 3>,
            ) {
                put(src, rank(ctx), x);
                allreduce(ctx, src, d1, Sum, Mesh);
                allreduce(ctx, src, d2, Max, TwoPhase);
                allreduce(ctx, src, d3, Prod, Ring);
                allreduce(ctx, src, d4, Min, Ring);
                store(y[0], [0], load(d1, [0], [N]));
                store(y[1], [0], load(d2, [0], [N]));
                store(y[2], [0], load(d3, [0], [N]));
                store(y[3], [0], load(d4, [0], [N]));
                broadcast(ctx, src, d5, nranks(ctx) - 1);
                store(y[4], [0], load(d5, [0], [N]));
                allgather(ctx, d3, d5);
                store(y[5], [0], load(d5, [0], [N]));
                reduce_scatter(ctx, src, d1, Sum);
                store(y[6], [0], load(d1, [0], [N]));
                allreduce(ctx, src, d2, Sum, TwoPhase);
                store(y[7], [0], load(d2, [0], [N]));
                allreduce(ctx, src, d3, Sum, Ring);
                store(y[8], [0], load(d3, [0], [N]));
                put(s2, rank(ctx), a2a);
                all_to_all(ctx, s2, ya);
            }
            #[eagle::host]
            pub fn h(
                x: Tensor<$t, NR, N>,
                y: Out<Tensor<$t, NR, 9, N>>,
                a: Tensor<$t, NR, NR, 3>,
                ya: Out<Tensor<$t, NR, NR, 3>>,
            ) {
                let s = alloc_window_buffer([N], $t);
                let b1 = alloc_window_buffer([N], $t);
                let b2 = alloc_window_buffer([N], $t);
                let b3 = alloc_window_buffer([N], $t);
                let b4 = alloc_window_buffer([N], $t);
                let b5 = alloc_window_buffer([N], $t);
                let s2 = alloc_window_buffer([NR, 3], $t);
                for r in 0..world_size() {
                    k(
                        x[r],
                        y[r],
                        a[r],
                        ya[r],
                        window(s, [N], $t),
                        window(b1, [N], $t),
                        window(b2, [N], $t),
                        window(b3, [N], $t),
                        window(b4, [N], $t),
                        window(b5, [N], $t),
                        window(s2, [NR, 3], $t),
                        device = r,
                    );
                }
            }
        }
    };
}
coll!(c_i32, i32, 7);
coll!(c_i64, i64, 5);
coll!(c_u32, u32, 11);
coll!(c_u64, u64, 3);
coll!(c_f32, f32, 13);
coll!(c_f64, f64, 1);

macro_rules! run_coll {
    ($bad:ident, $m:ident, $t:ty, $gen:expr) => {
        $bad.extend(both(stringify!($m), &[1, 2, 3, 5], |s| {
            let p = s.world_size();
            let n = $m::N;
            let g = $gen;
            let x = Tensor::<$t>::from_vec(&[p, n], (0..p * n).map(|i| g(i)).collect()).unwrap();
            let a = Tensor::<$t>::from_vec(&[p, p, 3], (0..p * p * 3).map(|i| g(i + 77)).collect())
                .unwrap();
            let mut y = Tensor::<$t>::zeros(&[p, 9, n]);
            let mut ya = Tensor::<$t>::zeros(&[p, p, 3]);
            ok($m::h.launch(s, &x, &mut y, &a, &mut ya))?;
            Ok(vec![y.bits(), ya.bits()])
        }));
    };
}

#[test]
fn collectives_on_every_dtype() {
    cxx();
    let mut bad = vec![];
    run_coll!(
        bad,
        c_i32,
        i32,
        |i: usize| ((i as i64 * 1_000_003 % 4_000_000_007) - 2_000_000_000) as i32
    );
    run_coll!(bad, c_i64, i64, |i: usize| (i as i64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15u64 as i64));
    run_coll!(bad, c_u32, u32, |i: usize| (i as u32)
        .wrapping_mul(2654435761));
    run_coll!(bad, c_u64, u64, |i: usize| (i as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15));
    run_coll!(bad, c_f32, f32, |i: usize| [
        f32::NAN,
        -0.0,
        0.0,
        1.5,
        -2.25,
        1e30,
        f32::INFINITY,
        3.3,
        -7.0
    ][i % 9]
        * ((i % 5) as f32 + 1.0));
    run_coll!(bad, c_f64, f64, |i: usize| [
        -0.0, 0.0, 1.5, -2.25, 1e300, 3.3, -7.0
    ][i % 7]
        + (i as f64) * 0.1);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// One window as both buffers of every collective that supports it (docs/collectives.md, "In
/// place"): the emulation gives sim's bits.
#[eagle::kernel(device)]
pub fn ip_k(ctx: Ctx, x: Tensor<f32, NS>, y: Out<Tensor<f32, 5, NS>>, w: Window<f32, NS>) {
    store(w, [0], load(x, [0], [NS]));
    broadcast(ctx, w, w, nranks(ctx) - 1);
    store(y, [0, 0], reshape(load(w, [0], [NS]), [1, NS]));
    store(w, [0], load(x, [0], [NS]));
    allgather(ctx, w, w);
    store(y, [1, 0], reshape(load(w, [0], [NS]), [1, NS]));
    store(w, [0], load(x, [0], [NS]));
    reduce_scatter(ctx, w, w, Sum);
    store(y, [2, 0], reshape(load(w, [0], [NS]), [1, NS]));
    store(w, [0], load(x, [0], [NS]));
    allreduce(ctx, w, w, Sum, TwoPhase);
    store(y, [3, 0], reshape(load(w, [0], [NS]), [1, NS]));
    store(w, [0], load(x, [0], [NS]));
    allreduce(ctx, w, w, Max, Ring);
    store(y, [4, 0], reshape(load(w, [0], [NS]), [1, NS]));
}

#[eagle::host]
pub fn ip_h(x: Tensor<f32, NR, NS>, y: Out<Tensor<f32, NR, 5, NS>>) {
    let b = alloc_window_buffer([NS], f32);
    for r in 0..world_size() {
        ip_k(x[r], y[r], window(b, [NS], f32), device = r);
    }
}

#[test]
fn in_place_collectives() {
    cxx();
    let bad = both("in_place", &[1, 2, 3, 5], |s| {
        let (p, n) = (s.world_size(), 13);
        let x = ramp_f32(&[p, n], 7);
        let mut y = Tensor::<f32>::zeros(&[p, 5, n]);
        ok(ip_h.launch(s, &x, &mut y))?;
        Ok(vec![y.bits()])
    });
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

// ---------------------------------------------------------------- errors

#[eagle::kernel(device)]
pub fn err_k(ctx: Ctx, x: Tensor<i32, 8>, y: Out<Tensor<i32, 8>>, mode: i32, sig: Window<i32, 1>) {
    let me = rank(ctx);
    if mode == 0 {
        let i = (x[0] + me as i32) as usize;
        y[0] = x[i];
    }
    if mode == 1 {
        y[1] = x[1] / (x[2] - me as i32);
    }
    if mode == 2 {
        let t = load(x, [0], [4]);
        let u = load(x, [me + 2], [4]);
        store(y, [0], t / u);
    }
    if mode == 3 {
        if me == 1 {
            y[me + 7] = 1;
        }
        barrier(ctx);
    }
    if mode == 4 {
        if me == nranks(ctx) - 1 {
            let t = load(x, [me + 4], [4]);
            store(y, [0], t);
            notify(sig, 0, [0], 1, Set);
        }
        if me == 0 {
            wait(sig, [0], 1, Eq);
        }
    }
    if mode == 5 {
        y[2] = x[3] % (x[4] * 0);
    }
}

#[eagle::host]
pub fn err_h(x: Tensor<i32, NR, 8>, y: Out<Tensor<i32, NR, 8>>, mode: i32) {
    let b = alloc_window_buffer([1], i32);
    for r in 0..world_size() {
        err_k(x[r], y[r], mode, window(b, [1], i32), device = r);
    }
}

#[test]
fn runtime_errors() {
    cxx();
    let mut bad = vec![];
    for mode in 0..6 {
        bad.extend(both(&format!("err mode {mode}"), &[1, 2, 3], |s| {
            let p = s.world_size();
            let x = Tensor::<i32>::from_vec(
                &[p, 8],
                (0..p * 8)
                    .map(|i| [5, 3, 1, 9, 2, 0, 4, 6][i % 8])
                    .collect(),
            )
            .unwrap();
            let mut y = Tensor::<i32>::zeros(&[p, 8]);
            ok(err_h.launch(s, &x, &mut y, mode))?;
            Ok(vec![y.bits()])
        }));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

// ---------------------------------------------------------------- sample kernels

const NS: Dim = dynamic!("N");

#[eagle::kernel(sample)]
pub fn s_local(s: usize, x: Tensor<f64, 2, NS>, y: Out<Tensor<f64, 3, NS>>) {
    let a = x[0][s];
    let b = x[1][s];
    let mut acc = a;
    for k in 0..(s % 5) {
        acc = acc * b + k as f64;
    }
    y[0][s] = min(a, b);
    y[1][s] = max(a, b) + acc;
    y[2][s] = ((a * 1e10) as i32) as f64 + ((b * 1e19) as usize) as f64;
}

#[eagle::kernel(sample, category = "cross_sample_read")]
pub fn s_read(s: usize, x: Tensor<f64, NS>, y: Out<Tensor<f64, NS>>) {
    let l = x[(s + NS - 1) % NS];
    let r = x[(s + 3) % NS];
    if l > r {
        y[s] = l - r;
    } else {
        y[s] = r * 2.0;
    }
}

#[eagle::kernel(sample, category = "mapreduce(sum)")]
pub fn s_sum(s: usize, x: Tensor<f64, NS>, h: Out<Tensor<f64, 7>>) {
    let b = min((abs(x[s]) * 7.0) as usize, 6);
    h[b] += x[s];
    h[(b + 1) % 7] += 0.1;
}

#[eagle::kernel(sample, category = "mapreduce(times)")]
pub fn s_times(s: usize, x: Tensor<f64, NS>, h: Out<Tensor<f64, 3>>) {
    h[s % 3] *= 1.0 + x[s] * 0.01;
}

#[eagle::kernel(sample, category = "mapreduce(max)")]
pub fn s_max(s: usize, x: Tensor<f64, NS>, h: Out<Tensor<f64, 5>>) {
    h[s % 5] = max(h[s % 5], x[s]);
}

#[eagle::kernel(sample, category = "cross_sample_write")]
pub fn s_write(s: usize, x: Tensor<f64, NS>, y: Out<Tensor<f64, NS>>) {
    let t = (s * 7) % NS;
    y[t] = y[t] + x[s];
    y[(t + 1) % NS] = y[t] * 0.5;
}

fn xs(n: usize) -> Tensor<f64> {
    Tensor::from_vec(
        &[n],
        (0..n)
            .map(|i| {
                let v = ((i as f64) * 0.618_033_988_75).fract() * 2.0 - 1.0;
                if i % 97 == 13 {
                    -0.0
                } else if i % 89 == 5 {
                    f64::NAN
                } else {
                    v
                }
            })
            .collect(),
    )
    .unwrap()
}

fn plan_both(name: &str, run: &dyn Fn(Option<bool>, Structure, usize) -> Out) -> Vec<String> {
    let mut bad = vec![];
    for structure in [
        Structure::DeviceKernel,
        Structure::RankPartition,
        Structure::HostTeam,
    ] {
        for n in [1usize, 5, 33, 1001] {
            let want = run(None, structure, n);
            let got = run(Some(true), structure, n);
            if want != got {
                let m = format!(
                    "{name} {structure:?} n={n}:\n  cpu: {:?}\n  emu: {:?}",
                    want.as_ref().map(|v| v
                        .iter()
                        .map(|x| x.iter().take(12).collect::<Vec<_>>())
                        .collect::<Vec<_>>()),
                    got.as_ref().map(|v| v
                        .iter()
                        .map(|x| x.iter().take(12).collect::<Vec<_>>())
                        .collect::<Vec<_>>())
                );
                println!("DISAGREE {m}");
                bad.push(m);
            } else {
                println!(
                    "agree {name} {structure:?} n={n}: {}",
                    if want.is_ok() {
                        "ok".into()
                    } else {
                        format!("{:?}", want)
                    }
                );
            }
        }
    }
    bad
}

fn on(p: eagle::plan::Plan, e: Option<bool>) -> eagle::plan::Plan {
    let p = p.with_simulated_ranks(3);
    match e {
        Some(x) => p.with_platform(Platform::Cuda).with_cuda_emulation(x),
        None => p,
    }
}

#[test]
fn sample_kernels() {
    cxx();
    let mut bad = vec![];
    bad.extend(plan_both("s_local", &|e, st, n| {
        let x = xs(2 * n);
        let x = Tensor::from_vec(&[2, n], x.data().to_vec()).unwrap();
        let mut y = Tensor::<f64>::zeros(&[3, n]);
        on(
            plan(s_local, st, Structure::DeviceKernel).map_err(|e| e.to_string())?,
            e,
        )
        .run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
        .map_err(|e| e.to_string())?;
        Ok(vec![y.bits()])
    }));
    bad.extend(plan_both("s_read", &|e, st, n| {
        let x = xs(n);
        let mut y = Tensor::<f64>::zeros(&[n]);
        on(
            plan(s_read, st, Structure::DeviceKernel).map_err(|e| e.to_string())?,
            e,
        )
        .run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
        .map_err(|e| e.to_string())?;
        Ok(vec![y.bits()])
    }));
    bad.extend(plan_both("s_sum", &|e, st, n| {
        let x = xs(n);
        let mut h = Tensor::<f64>::zeros(&[7]);
        on(
            plan(s_sum, st, Structure::DeviceKernel).map_err(|e| e.to_string())?,
            e,
        )
        .run(0, &mut Planes::new().input("x", &x).output("h", &mut h))
        .map_err(|e| e.to_string())?;
        Ok(vec![h.bits()])
    }));
    bad.extend(plan_both("s_times", &|e, st, n| {
        let x = xs(n);
        let mut h = Tensor::<f64>::zeros(&[3]);
        on(
            plan(s_times, st, Structure::DeviceKernel).map_err(|e| e.to_string())?,
            e,
        )
        .run(0, &mut Planes::new().input("x", &x).output("h", &mut h))
        .map_err(|e| e.to_string())?;
        Ok(vec![h.bits()])
    }));
    bad.extend(plan_both("s_max", &|e, st, n| {
        let x = xs(n);
        let mut h = Tensor::<f64>::zeros(&[5]);
        on(
            plan(s_max, st, Structure::DeviceKernel).map_err(|e| e.to_string())?,
            e,
        )
        .run(0, &mut Planes::new().input("x", &x).output("h", &mut h))
        .map_err(|e| e.to_string())?;
        Ok(vec![h.bits()])
    }));
    bad.extend(plan_both("s_write", &|e, st, n| {
        let x = xs(n);
        let mut y = Tensor::from_vec(&[n], (0..n).map(|i| i as f64).collect()).unwrap();
        on(
            plan(s_write, st, Structure::DeviceKernel).map_err(|e| e.to_string())?,
            e,
        )
        .run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
        .map_err(|e| e.to_string())?;
        Ok(vec![y.bits()])
    }));
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[eagle::kernel(sample)]
pub fn s_oob(s: usize, x: Tensor<f64, NS>, y: Out<Tensor<f64, NS>>) {
    let k = (x[s] * 4.0) as usize;
    y[s] = x[k + s];
}

#[eagle::kernel(sample)]
pub fn s_div(s: usize, x: Tensor<i64, NS>, y: Out<Tensor<i64, NS>>) {
    y[s] = 100 / x[s];
}

#[test]
fn sample_kernel_errors() {
    cxx();
    let mut bad = vec![];
    bad.extend(plan_both("s_oob", &|e, st, n| {
        let x = Tensor::from_vec(
            &[n],
            (0..n).map(|i| if i == n / 2 { 3.0 } else { 0.0 }).collect(),
        )
        .unwrap();
        let mut y = Tensor::<f64>::zeros(&[n]);
        on(
            plan(s_oob, st, Structure::DeviceKernel).map_err(|e| e.to_string())?,
            e,
        )
        .run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
        .map_err(|e| norm(&e.to_string()))?;
        Ok(vec![y.bits()])
    }));
    bad.extend(plan_both("s_div", &|e, st, n| {
        let x = Tensor::from_vec(
            &[n],
            (0..n)
                .map(|i| if i == n / 2 { 0 } else { i as i64 + 1 })
                .collect(),
        )
        .unwrap();
        let mut y = Tensor::<i64>::zeros(&[n]);
        on(
            plan(s_div, st, Structure::DeviceKernel).map_err(|e| e.to_string())?,
            e,
        )
        .run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
        .map_err(|e| norm(&e.to_string()))?;
        Ok(vec![y.bits()])
    }));
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

// ---------------------------------------------------------------- more probes

#[eagle::kernel(sample)]
pub fn s_tile(s: usize, x: Tensor<f64, 3, NS>, y: Out<Tensor<f64, 3, NS>>) {
    let t = load(x, [0, s], [3, 1]);
    let u = t * t - 1.5;
    store(y, [0, s], max(u, t));
}

#[eagle::kernel]
pub fn helper(ctx: Ctx, sig: Window<u32, 3>, y: Out<Tensor<i32, 6>>) {
    let me = rank(ctx);
    for i in 5..me {
        y[0] += 1;
    }
    notify(sig, 0, [2], 4294967295, AtomicAdd);
    y[1] = me as i32 - 7;
}

#[eagle::kernel(device)]
pub fn sig_k(ctx: Ctx, y: Out<Tensor<i32, 6>>, sig: Window<u32, 3>, si: Window<i32, 2>) {
    let me = rank(ctx);
    let n = nranks(ctx);
    helper(ctx, sig, y);
    notify(si, 0, [0], -3, AtomicAdd);
    barrier(ctx);
    if me == 0 {
        wait(sig, [2], 4294967295 - n as u32, Ge);
        wait(si, [0], 0, Lt);
        wait(si, [0], -3 * n as i32, Le);
        y[2] = si[0];
        y[3] = sig[2] as i32;
        y[4] = (sig[2] / 3) as i32;
    }
    barrier(ctx);
}

#[eagle::host]
pub fn sig_h(y: Out<Tensor<i32, NR, 6>>) {
    let a = alloc_window_buffer([3], u32);
    let b = alloc_window_buffer([2], i32);
    for r in 0..world_size() {
        sig_k(y[r], window(a, [3], u32), window(b, [2], i32), device = r);
    }
}

#[test]
fn more_probes() {
    cxx();
    let mut bad = vec![];
    bad.extend(plan_both("s_tile", &|e, st, n| {
        let x = xs(3 * n);
        let x = Tensor::from_vec(&[3, n], x.data().to_vec()).unwrap();
        let mut y = Tensor::<f64>::zeros(&[3, n]);
        on(
            plan(s_tile, st, Structure::DeviceKernel).map_err(|e| e.to_string())?,
            e,
        )
        .run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
        .map_err(|e| e.to_string())?;
        Ok(vec![y.bits()])
    }));
    bad.extend(both("signals", &[1, 2, 3, 5], |s| {
        let p = s.world_size();
        let mut y = Tensor::<i32>::zeros(&[p, 6]);
        ok(sig_h.launch(s, &mut y))?;
        Ok(vec![y.bits()])
    }));
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
