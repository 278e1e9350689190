//! Built-in collectives: every op, mode and dtype against host goldens computed in the
//! documented combine order, at ragged sizes, with bit-identity across ranks and runs.

use eagle::codegen::lower::chunk;
use eagle::prelude::*;

const NR: Dim = dynamic!("NR");
const N: Dim = dynamic!("N");

/// Combines `a` and `b` with the op named by `op`.
trait Combine: Copy + PartialEq + std::fmt::Debug {
    fn combine(op: &str, a: Self, b: Self) -> Self;
    fn bits(self) -> u64;
    fn sample(seed: u64, i: usize) -> Self;
}
macro_rules! combine_float {
    ($t:ty) => {
        impl Combine for $t {
            fn combine(op: &str, a: Self, b: Self) -> Self {
                match op {
                    "Sum" => a + b,
                    "Prod" => a * b,
                    "Max" => a.max(b),
                    _ => a.min(b),
                }
            }
            fn bits(self) -> u64 {
                self.to_bits() as u64
            }
            fn sample(seed: u64, i: usize) -> Self {
                let h = (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    ^ (i as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9))
                    >> 11;
                (h as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as $t + 0.001
            }
        }
    };
}
combine_float!(f32);
combine_float!(f64);
macro_rules! combine_int {
    ($t:ty) => {
        impl Combine for $t {
            fn combine(op: &str, a: Self, b: Self) -> Self {
                match op {
                    "Sum" => a.wrapping_add(b),
                    "Prod" => a.wrapping_mul(b),
                    "Max" => a.max(b),
                    _ => a.min(b),
                }
            }
            fn bits(self) -> u64 {
                self as u64
            }
            fn sample(seed: u64, i: usize) -> Self {
                (((seed as usize * 7919 + i * 104_729) % 201) as i64 - 100) as $t
            }
        }
    };
}
combine_int!(i32);
combine_int!(i64);
combine_int!(i8);
combine_int!(u8);
combine_int!(i16);
combine_int!(u16);
/// The 16-bit floats combine in `f32` and round once per op (docs/language.md).
macro_rules! combine_half {
    ($t:ty) => {
        impl Combine for $t {
            fn combine(op: &str, a: Self, b: Self) -> Self {
                <$t>::from_f32(f32::combine(op, a.to_f32(), b.to_f32()))
            }
            fn bits(self) -> u64 {
                self.to_bits() as u64
            }
            fn sample(seed: u64, i: usize) -> Self {
                <$t>::from_f32(f32::sample(seed, i) * 3.0)
            }
        }
    };
}
combine_half!(f16);
combine_half!(bf16);

/// Defines a per-device program and host for `allreduce` with a fixed dtype, op and mode.
macro_rules! allreduce_case {
    ($dev:ident, $host:ident, $t:ident, $op:ident, $mode:ident) => {
        #[eagle::kernel(device)]
        pub fn $dev(
            ctx: Ctx,
            x: Tensor<$t, N>,
            y: Out<Tensor<$t, N>>,
            src: Window<$t, N>,
            dst: Window<$t, N>,
        ) {
            let me = rank(ctx);
            put(src, me, x);
            allreduce(ctx, src, dst, $op, $mode);
            get(y, me, dst);
        }
        #[eagle::host]
        pub fn $host(x: Tensor<$t, NR, N>, y: Out<Tensor<$t, NR, N>>) {
            let s = alloc_window_buffer([N], $t);
            let d = alloc_window_buffer([N], $t);
            for r in 0..world_size() {
                $dev(
                    x[r],
                    y[r],
                    window(s, [N], $t),
                    window(d, [N], $t),
                    device = r,
                );
            }
        }
    };
}

allreduce_case!(ar_sum_mesh_d, ar_sum_mesh, f32, Sum, Mesh);
allreduce_case!(ar_sum_two_d, ar_sum_two, f32, Sum, TwoPhase);
allreduce_case!(ar_sum_ring_d, ar_sum_ring, f32, Sum, Ring);
allreduce_case!(ar_prod_ring_d, ar_prod_ring, f64, Prod, Ring);
allreduce_case!(ar_max_two_d, ar_max_two, i32, Max, TwoPhase);
allreduce_case!(ar_min_mesh_d, ar_min_mesh, i64, Min, Mesh);
allreduce_case!(ar_sum64_ring_d, ar_sum64_ring, f64, Sum, Ring);
allreduce_case!(ar_sum_f16_ring_d, ar_sum_f16_ring, f16, Sum, Ring);
allreduce_case!(ar_sum_bf16_mesh_d, ar_sum_bf16_mesh, bf16, Sum, Mesh);
allreduce_case!(ar_max_bf16_two_d, ar_max_bf16_two, bf16, Max, TwoPhase);
allreduce_case!(ar_prod_i8_two_d, ar_prod_i8_two, i8, Prod, TwoPhase);
allreduce_case!(ar_sum_u8_ring_d, ar_sum_u8_ring, u8, Sum, Ring);
allreduce_case!(ar_min_i16_mesh_d, ar_min_i16_mesh, i16, Min, Mesh);
allreduce_case!(ar_sum_u16_two_d, ar_sum_u16_two, u16, Sum, TwoPhase);

allreduce_case!(ar_any_ring_d, ar_any_ring, bool, Any, Ring);
allreduce_case!(ar_all_two_d, ar_all_two, bool, All, TwoPhase);
allreduce_case!(ar_any_mesh_d, ar_any_mesh, bool, Any, Mesh);

impl Combine for bool {
    fn combine(op: &str, a: Self, b: Self) -> Self {
        match op {
            "Any" => a || b,
            "All" => a && b,
            _ => panic!("no bool reduction `{op}`"),
        }
    }
    fn bits(self) -> u64 {
        u64::from(self)
    }
    /// Mostly set, so that `All` is not always false: one in eight is clear.
    fn sample(seed: u64, i: usize) -> Self {
        (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9))
            >> 61
            != 0
    }
}

fn inputs<T: Combine + eagle::runtime::Element>(p: usize, n: usize, seed: u64) -> Tensor<T> {
    let data = (0..p * n).map(|i| T::sample(seed, i)).collect();
    Tensor::from_vec(&[p, n], data).unwrap()
}

/// The host golden of an allreduce: rank order for mesh and two-phase; for ring, chunk c is
/// folded in ring order c, c+1, ..., c-1.
fn golden<T: Combine + eagle::runtime::Element>(
    x: &Tensor<T>,
    p: usize,
    n: usize,
    op: &str,
    ring: bool,
) -> Vec<T> {
    (0..n)
        .map(|j| {
            let c = (0..p as u64).find(|&c| {
                let (o, l) = chunk(n as u64, p as u64, c);
                (o..o + l).contains(&(j as u64))
            });
            let start = if ring { c.unwrap_or(0) as usize } else { 0 };
            let mut acc = x.row(start)[j];
            for k in 1..p {
                acc = T::combine(op, acc, x.row((start + k) % p)[j]);
            }
            acc
        })
        .collect()
}

/// Launches a host program on (session, input, output).
type Launch<T> = dyn Fn(&Session, &Tensor<T>, &mut Tensor<T>) -> eagle::Result<eagle::LaunchReport>;

fn check_allreduce<T: Combine + eagle::runtime::Element>(
    launch: &Launch<T>,
    p: usize,
    n: usize,
    op: &str,
    ring: bool,
) {
    let s = Session::sim(p).unwrap();
    let x = inputs::<T>(p, n, (p * 1000 + n) as u64);
    let mut y = Tensor::<T>::zeros(&[p, n]);
    launch(&s, &x, &mut y).unwrap_or_else(|e| panic!("P={p} N={n} {op}: {e}"));
    let want = golden(&x, p, n, op, ring);
    for r in 0..p {
        let got: Vec<u64> = y.row(r).iter().map(|v| v.bits()).collect();
        let exp: Vec<u64> = want.iter().map(|v| v.bits()).collect();
        assert_eq!(
            got, exp,
            "P={p} N={n} {op} ring={ring}: rank {r} differs from the golden"
        );
        // Bit-identical on every rank.
        let r0: Vec<u64> = y.row(0).iter().map(|v| v.bits()).collect();
        assert_eq!(got, r0, "rank {r} differs from rank 0");
    }
    // A second run gives the same bits.
    let mut y2 = Tensor::<T>::zeros(&[p, n]);
    launch(&s, &x, &mut y2).unwrap();
    assert_eq!(
        y.data().iter().map(|v| v.bits()).collect::<Vec<_>>(),
        y2.data().iter().map(|v| v.bits()).collect::<Vec<_>>()
    );
}

const SIZES: &[(usize, usize)] = &[
    (1, 5),
    (2, 64),
    (3, 1000),
    (7, 1000),
    (4, 2),
    (5, 3),
    (4, 2500),
    (8, 17),
];

#[test]
fn allreduce_sum_f32_every_mode_and_ragged_size() {
    for &(p, n) in SIZES {
        check_allreduce::<f32>(&|s, x, y| ar_sum_mesh.launch(s, x, y), p, n, "Sum", false);
        check_allreduce::<f32>(&|s, x, y| ar_sum_two.launch(s, x, y), p, n, "Sum", false);
        check_allreduce::<f32>(&|s, x, y| ar_sum_ring.launch(s, x, y), p, n, "Sum", true);
    }
}

#[test]
fn allreduce_other_ops_and_dtypes() {
    for &(p, n) in SIZES {
        check_allreduce::<f64>(&|s, x, y| ar_prod_ring.launch(s, x, y), p, n, "Prod", true);
        check_allreduce::<f64>(&|s, x, y| ar_sum64_ring.launch(s, x, y), p, n, "Sum", true);
        check_allreduce::<i32>(&|s, x, y| ar_max_two.launch(s, x, y), p, n, "Max", false);
        check_allreduce::<i64>(&|s, x, y| ar_min_mesh.launch(s, x, y), p, n, "Min", false);
    }
}

/// `Any` and `All` on `bool` windows (the reductions `reduce_any`/`reduce_all` share), in
/// every mode: the same bits as the host's `||` / `&&` on every rank.
#[test]
fn allreduce_any_and_all_on_bool_windows() {
    for &(p, n) in SIZES {
        check_allreduce::<bool>(&|s, x, y| ar_any_ring.launch(s, x, y), p, n, "Any", true);
        check_allreduce::<bool>(&|s, x, y| ar_all_two.launch(s, x, y), p, n, "All", false);
        check_allreduce::<bool>(&|s, x, y| ar_any_mesh.launch(s, x, y), p, n, "Any", false);
    }
    // The goldens are not trivially constant: some element is false under `All` at P = 8.
    let x = inputs::<bool>(8, 17, 8017);
    assert!((0..17).any(|j| (0..8).any(|r| !x.row(r)[j])));
}

#[test]
fn allreduce_on_the_storage_dtypes() {
    for &(p, n) in SIZES {
        check_allreduce::<f16>(
            &|s, x, y| ar_sum_f16_ring.launch(s, x, y),
            p,
            n,
            "Sum",
            true,
        );
        check_allreduce::<bf16>(
            &|s, x, y| ar_sum_bf16_mesh.launch(s, x, y),
            p,
            n,
            "Sum",
            false,
        );
        check_allreduce::<bf16>(
            &|s, x, y| ar_max_bf16_two.launch(s, x, y),
            p,
            n,
            "Max",
            false,
        );
        check_allreduce::<i8>(
            &|s, x, y| ar_prod_i8_two.launch(s, x, y),
            p,
            n,
            "Prod",
            false,
        );
        check_allreduce::<u8>(&|s, x, y| ar_sum_u8_ring.launch(s, x, y), p, n, "Sum", true);
        check_allreduce::<i16>(
            &|s, x, y| ar_min_i16_mesh.launch(s, x, y),
            p,
            n,
            "Min",
            false,
        );
        check_allreduce::<u16>(
            &|s, x, y| ar_sum_u16_two.launch(s, x, y),
            p,
            n,
            "Sum",
            false,
        );
    }
}

/// Three rounds of a ring allreduce then a two-phase one, ping-ponging between two windows,
/// launched twice per rank: every allreduce reuses the signal window its steps wait on, so a
/// slot left set (or reset too early) by one shows up in the next as a wrong value or a race
/// report.
#[eagle::kernel(device)]
pub fn rounds_d(
    ctx: Ctx,
    x: Tensor<f64, N>,
    y: Out<Tensor<f64, N>>,
    a: Window<f64, N>,
    b: Window<f64, N>,
) {
    let me = rank(ctx);
    put(a, me, x);
    for i in 0..3 {
        allreduce(ctx, a, b, Sum, Ring);
        allreduce(ctx, b, a, Sum, TwoPhase);
    }
    get(y, me, a);
}
#[eagle::host]
pub fn rounds(x: Tensor<f64, NR, N>, y: Out<Tensor<f64, NR, N>>) {
    let a = alloc_window_buffer([N], f64);
    let b = alloc_window_buffer([N], f64);
    for r in 0..world_size() {
        rounds_d(
            x[r],
            y[r],
            window(a, [N], f64),
            window(b, [N], f64),
            device = r,
        );
    }
    for r in 0..world_size() {
        rounds_d(
            x[r],
            y[r],
            window(a, [N], f64),
            window(b, [N], f64),
            device = r,
        );
    }
}

#[test]
fn repeated_ring_and_two_phase_allreduces_reuse_their_signals() {
    for &(p, n) in &[(2, 5), (3, 1000), (4, 2), (4, 2500), (5, 3)] {
        let s = Session::sim(p).unwrap();
        let x = inputs::<f64>(p, n, 77 + p as u64);
        let mut y = Tensor::<f64>::zeros(&[p, n]);
        rounds
            .launch(&s, &x, &mut y)
            .unwrap_or_else(|e| panic!("P={p} N={n}: {e}"));
        // After the first ring every rank holds the same vector, so each later allreduce folds
        // P copies of it, in rank order.
        let fold = |v: Vec<f64>| -> Vec<f64> {
            v.iter()
                .map(|&e| (1..p).fold(e, |acc, _| acc + e))
                .collect()
        };
        let mut want = fold(golden(&x, p, n, "Sum", true));
        for _ in 0..2 {
            want = fold(fold(want));
        }
        let want: Vec<u64> = want.iter().map(|v| v.to_bits()).collect();
        for r in 0..p {
            let got: Vec<u64> = y.row(r).iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "P={p} N={n}: rank {r} differs from the golden");
        }
    }
}

#[test]
fn mesh_and_two_phase_agree_bit_for_bit() {
    let (p, n) = (5, 1001);
    let s = Session::sim(p).unwrap();
    let x = inputs::<f32>(p, n, 9);
    let mut a = Tensor::<f32>::zeros(&[p, n]);
    let mut b = Tensor::<f32>::zeros(&[p, n]);
    ar_sum_mesh.launch(&s, &x, &mut a).unwrap();
    ar_sum_two.launch(&s, &x, &mut b).unwrap();
    assert_eq!(
        a.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        b.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
}

#[eagle::kernel(device)]
pub fn bcast_d(
    ctx: Ctx,
    x: Tensor<f32, N>,
    y: Out<Tensor<f32, N>>,
    src: Window<f32, N>,
    root: usize,
) {
    put(src, rank(ctx), x);
    broadcast(ctx, src, y, root);
}
#[eagle::host]
pub fn bcast(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>, root: usize) {
    let s = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        bcast_d(x[r], y[r], window(s, [N], f32), root, device = r);
    }
}

#[eagle::kernel(device)]
pub fn gather_d(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>, src: Window<f32, N>) {
    put(src, rank(ctx), x);
    allgather(ctx, src, y);
}
#[eagle::host]
pub fn gather(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>) {
    let s = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        gather_d(x[r], y[r], window(s, [N], f32), device = r);
    }
}

#[eagle::kernel(device)]
pub fn rs_d(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>, src: Window<f32, N>) {
    put(src, rank(ctx), x);
    reduce_scatter(ctx, src, y, Sum);
}
#[eagle::host]
pub fn rs(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>) {
    let s = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        rs_d(x[r], y[r], window(s, [N], f32), device = r);
    }
}

const M: Dim = dynamic!("M");

#[eagle::kernel(device)]
pub fn a2a_d(ctx: Ctx, x: Tensor<f32, NR, M>, y: Out<Tensor<f32, NR, M>>, src: Window<f32, NR, M>) {
    put(src, rank(ctx), x);
    all_to_all(ctx, src, y);
}
#[eagle::host]
pub fn a2a(x: Tensor<f32, NR, NR, M>, y: Out<Tensor<f32, NR, NR, M>>) {
    let s = alloc_window_buffer([NR, M], f32);
    for r in 0..world_size() {
        a2a_d(x[r], y[r], window(s, [NR, M], f32), device = r);
    }
}

#[test]
fn broadcast_allgather_reduce_scatter_all_to_all_at_ragged_sizes() {
    for &(p, n) in SIZES {
        let s = Session::sim(p).unwrap();
        let x = inputs::<f32>(p, n, (p + 31 * n) as u64);
        // broadcast from every root
        for root in 0..p {
            let mut y = Tensor::<f32>::zeros(&[p, n]);
            bcast.launch(&s, &x, &mut y, root).unwrap();
            for r in 0..p {
                assert_eq!(y.row(r), x.row(root), "broadcast P={p} N={n} root={root}");
            }
        }
        // allgather: element j from its owner
        let mut y = Tensor::<f32>::zeros(&[p, n]);
        gather.launch(&s, &x, &mut y).unwrap();
        let want: Vec<f32> = (0..n)
            .map(|j| x.row(eagle_runner::golden::owner(n, p, j))[j])
            .collect();
        for r in 0..p {
            assert_eq!(y.row(r), &want[..], "allgather P={p} N={n} rank {r}");
        }
        // reduce-scatter: my chunk holds the rank-order sum, the rest keeps its old value
        let mut y = Tensor::<f32>::from_vec(&[p, n], vec![-7.0; p * n]).unwrap();
        rs.launch(&s, &x, &mut y).unwrap();
        let sum = eagle_runner::golden::allreduce(&x, |a, b| a + b, false);
        for r in 0..p {
            let mine = eagle_runner::golden::chunk(n, p, r);
            for (j, &total) in sum.iter().enumerate() {
                let want = if mine.contains(&j) { total } else { -7.0 };
                assert_eq!(
                    y.row(r)[j].to_bits(),
                    want.to_bits(),
                    "reduce_scatter P={p} N={n} rank {r} element {j}"
                );
            }
        }
        // all-to-all with rows of n elements
        let xa = inputs::<f32>(p * p, n, 77);
        let xa = Tensor::from_vec(&[p, p, n], xa.data().to_vec()).unwrap();
        let mut ya = Tensor::<f32>::zeros(&[p, p, n]);
        a2a.launch(&s, &xa, &mut ya).unwrap();
        for r in 0..p {
            for q in 0..p {
                let got = &ya.data()[(r * p + q) * n..(r * p + q + 1) * n];
                let want = &xa.data()[(q * p + r) * n..(q * p + r + 1) * n];
                assert_eq!(got, want, "all_to_all P={p} N={n} y[{r}][{q}]");
            }
        }
    }
}

#[eagle::kernel(device)]
pub fn bad_root_d(ctx: Ctx, y: Out<Tensor<f32, 8>>, src: Window<f32, 8>) {
    broadcast(ctx, src, y, 5);
}
#[eagle::host]
pub fn bad_root(y: Out<Tensor<f32, NR, 8>>) {
    let s = alloc_window_buffer([8], f32);
    for r in 0..world_size() {
        bad_root_d(y[r], window(s, [8], f32), device = r);
    }
}

/// The root computed on the host: `world_size()` is one past the last rank.
#[eagle::host]
pub fn bcast_from_world_size(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>) {
    let s = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        bcast_d(x[r], y[r], window(s, [N], f32), world_size(), device = r);
    }
}

#[test]
fn a_broadcast_root_computed_on_the_host_is_checked_at_specialization() {
    use eagle::codegen::{CodegenError, SpecializeError};
    for p in 1..=4 {
        let s = Session::sim(p).unwrap();
        let x = inputs::<f32>(p, 10, 1);
        let mut y = Tensor::<f32>::zeros(&[p, 10]);
        match bcast_from_world_size.launch(&s, &x, &mut y).unwrap_err() {
            eagle::Error::Codegen(CodegenError::Specialize(e)) => {
                let msg = e.to_string();
                match *e {
                    SpecializeError::RankOutOfRange {
                        function,
                        op,
                        what,
                        lo,
                        hi,
                        world_size,
                        ..
                    } => {
                        assert_eq!(function, "bcast_d");
                        assert!(op.starts_with("broadcast "), "{op}");
                        assert_eq!(
                            what,
                            "root (parameter `root`, as `bcast_from_world_size` passes it)"
                        );
                        assert_eq!((lo, hi, world_size), (p as i128, p as i128, p as u64));
                        assert!(
                            msg.contains(&format!("the root (parameter `root`, as `bcast_from_world_size` passes it) spans {p}..={p} but the world has ranks 0..{p}")),
                            "{msg}"
                        );
                    }
                    other => panic!("expected RankOutOfRange, got {other:?}"),
                }
            }
            other => panic!("expected a specialization error, got {other:?}"),
        }
    }
    // The same device program with a root in range runs (the check is of the value passed).
    let s = Session::sim(3).unwrap();
    let x = inputs::<f32>(3, 10, 1);
    let mut y = Tensor::<f32>::zeros(&[3, 10]);
    bcast.launch(&s, &x, &mut y, 2).unwrap();
    assert_eq!(y.row(0), x.row(2));
}

#[test]
fn broadcast_root_out_of_range_is_an_error_before_running() {
    use eagle::codegen::{CodegenError, SpecializeError};
    let s = Session::sim(3).unwrap();
    let mut y = Tensor::<f32>::zeros(&[3, 8]);
    match bad_root.launch(&s, &mut y).unwrap_err() {
        eagle::Error::Codegen(CodegenError::Specialize(e)) => match *e {
            SpecializeError::RankOutOfRange {
                what,
                lo,
                hi,
                world_size,
                ..
            } => {
                assert_eq!((what.as_str(), lo, hi, world_size), ("root", 5, 5, 3));
            }
            other => panic!("expected RankOutOfRange, got {other:?}"),
        },
        other => panic!("expected a specialization error, got {other:?}"),
    }
    // A root only known at run time fails on the ranks, with the root named.
    let x = inputs::<f32>(3, 10, 1);
    let mut y = Tensor::<f32>::zeros(&[3, 10]);
    let e = bcast.launch(&s, &x, &mut y, 9).unwrap_err().to_string();
    assert!(e.contains("peer rank 9 is outside the world 0..3"), "{e}");
}

#[eagle::kernel(device)]
pub fn bool_max_d(ctx: Ctx, src: Window<bool, 8>, dst: Window<bool, 8>) {
    allreduce(ctx, src, dst, Max, Mesh);
}

#[eagle::kernel(device)]
pub fn short_recv_d(ctx: Ctx, src: Window<f32, 10>, dst: Window<f32, 8>) {
    allgather(ctx, src, dst);
}

#[test]
fn reduce_op_on_bool_and_wrong_receive_shape_are_named() {
    use eagle::ir::EagleFn;
    let e = bool_max_d::module().unwrap_err().to_string();
    assert!(
        e.contains("reduce op `max` does not fit dtype `bool`"),
        "{e}"
    );
    let e = short_recv_d::module().unwrap_err().to_string();
    assert!(
        e.contains("the receive buffer is `[8], f32` but the send buffer is `[10], f32`"),
        "{e}"
    );
}

#[eagle::kernel(device)]
pub fn a2a_rows_d(ctx: Ctx, src: Window<f32, 3, 4>, dst: Window<f32, 3, 4>) {
    all_to_all(ctx, src, dst);
}
#[eagle::host]
pub fn a2a_rows() {
    let s = alloc_window_buffer([3, 4], f32);
    let d = alloc_window_buffer([3, 4], f32);
    for r in 0..world_size() {
        a2a_rows_d(window(s, [3, 4], f32), window(d, [3, 4], f32), device = r);
    }
}

#[test]
fn all_to_all_needs_one_row_per_rank() {
    let s = Session::sim(4).unwrap();
    let e = a2a_rows.launch(&s).unwrap_err().to_string();
    assert!(
        e.contains("the buffers have 3 rows but the world has 4 ranks"),
        "{e}"
    );
}

/// Buffers whose shapes agree in the generic IR (a constant against a symbol) but differ once
/// the dims are bound: every built-in collective and allreduce mode, at P = 1..5, is refused at
/// specialization with the op's source line, both shapes, P and the fix wherever the bound
/// shapes differ, and specializes where they agree (issue 35, item 1: these ran and filled
/// part of the receive buffer).
#[test]
fn collective_buffers_that_differ_once_bound_are_refused_at_every_p() {
    use eagle::codegen::{specialize, Bindings, SpecializeError};
    let calls = [
        "broadcast %0, %1, %2, %3",
        "allgather %0, %1, %2",
        "reduce_scatter %0, %1, %2, sum",
        "allreduce %0, %1, %2, sum, mesh",
        "allreduce %0, %1, %2, max, two_phase",
        "allreduce %0, %1, %2, sum, ring",
        "all_to_all %0, %1, %2",
    ];
    // (send shape, receive shape, N): a constant against NR, and a constant against N.
    let pairs = [
        ("[1, 8]", "[NR, 8]", 1),
        ("[NR, 8]", "[7, 8]", 1),
        ("[N]", "[8]", 4),
        ("[8]", "[N]", 16),
        ("[N, 2]", "[3, 2]", 5),
    ];
    let dims = |s: &str, p: u64, n: u64| -> Vec<u64> {
        s.trim_matches(['[', ']'])
            .split(", ")
            .map(|d| match d {
                "NR" => p,
                "N" => n,
                d => d.parse().unwrap(),
            })
            .collect()
    };
    let mut refused = 0;
    for call in calls {
        for (ss, ds, n) in pairs {
            if call.starts_with("all_to_all") && !ss.contains(',') {
                continue; // all-to-all needs rows (the verifier says so)
            }
            let text = format!(
                "device @k(%0 ctx: ctx, %1 src: window<{ss}, f32>, %2 dst: window<{ds}, f32>, %3 root: index) {{\n  {call} ;@ ports.rs:12:5\n}}\n"
            );
            let m = eagle::ir::parse_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            eagle::ir::verify_module(&m).unwrap_or_else(|e| panic!("{e}\n{text}"));
            for p in 1..=5u64 {
                let b = Bindings::world(p).with("NR", p).with("N", n);
                let (bs, bd) = (dims(ss, p, n), dims(ds, p, n));
                let r = specialize(&m, &b);
                if bs == bd {
                    // Agreeing shapes specialize (all-to-all still needs P rows).
                    match r {
                        Ok(_) => {}
                        Err(SpecializeError::CollectiveShape { message, .. })
                            if call.starts_with("all_to_all") && bs[0] != p =>
                        {
                            assert!(message.contains("rows but the world has"), "{message}")
                        }
                        Err(e) => panic!("{call} {ss} -> {ds} at P = {p}: {e}"),
                    }
                    continue;
                }
                if call.starts_with("allgather") && (ss, ds) == ("[1, 8]", "[NR, 8]") {
                    // Since issue 38 item 7 this is allgather's row form: one row per rank.
                    r.unwrap_or_else(|e| panic!("the row form at P = {p}: {e}"));
                    continue;
                }
                refused += 1;
                let e = r.expect_err(&format!("{call} {ss} -> {ds} at P = {p} must be refused"));
                let SpecializeError::CollectiveShape {
                    ref op, ref loc, ..
                } = e
                else {
                    panic!("{call} {ss} -> {ds} at P = {p}: expected CollectiveShape, got {e:?}");
                };
                assert_eq!(op, call.split(' ').next().unwrap());
                assert_eq!(loc.as_ref().map(|l| l.line), Some(12), "{e}");
                let text = e.to_string();
                let bound = |d: &[u64]| {
                    format!(
                        "window<[{}], f32>",
                        d.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
                    )
                };
                let want = format!(
                    "at world size P = {p} the send buffer `src` is `{}`",
                    bound(&bs)
                );
                assert!(text.contains(&want), "{text}");
                assert!(
                    text.contains(&format!("the receive buffer `dst` is `{}`", bound(&bd))),
                    "{text}"
                );
                assert!(text.contains("(at ports.rs:12:5)"), "{text}");
                assert!(text.contains("declare both with the same dims"), "{text}");
                for side in [ss, ds] {
                    if side.contains('N') {
                        assert!(
                            text.contains(&format!("(declared `window<{side}, f32>`)")),
                            "{text}"
                        );
                    }
                }
            }
        }
    }
    // `[1, 8] -> [NR, 8]` agrees at P = 1 only (and is allgather's row form); every other pair
    // differs at every P (all-to-all takes the three pairs with rows).
    assert_eq!(
        refused,
        5 * (4 + 5 + 5 + 5 + 5) + (5 + 5 + 5 + 5) + (4 + 5 + 5)
    );
    // Two different symbols stay refused by the verifier, even when bound to equal values.
    let text = "device @k(%0 ctx: ctx, %1 src: window<[N], f32>, %2 dst: window<[M], f32>) {\n  allgather %0, %1, %2\n}\n";
    let e = eagle::ir::verify_module(&eagle::ir::parse_module(text).unwrap()).unwrap_err();
    assert!(
        e.to_string()
            .contains("the receive buffer is `[M], f32` but the send buffer is `[N], f32`"),
        "{e}"
    );
}

/// The in-place programs and their goldens: `examples/in_place.rs` (which `.ci/run` also
/// runs under both MPIs).
#[path = "../examples/in_place.rs"]
#[allow(dead_code)]
mod in_place;

#[eagle::kernel(device)]
pub fn ar_mesh_ip_d(ctx: Ctx, w: Window<f32, N>) {
    allreduce(ctx, w, w, Sum, Mesh);
}
#[eagle::kernel(device)]
pub fn a2a_ip_d(ctx: Ctx, w: Window<f32, NR, 4>) {
    all_to_all(ctx, w, w);
}

/// Issue 35, item 4: in place (`broadcast(ctx, w, w, 0)`, the form PyPTO's step 16 writes)
/// broadcast, allgather, reduce-scatter and the two-phase and ring allreduce give the
/// out-of-place bits on every launch, and the race detector's verdict (none) is the same on
/// every one of 200 launches at P = 2, 3, 4 and 8; in-place mesh allreduce and all-to-all are
/// verifier errors naming the fix.
#[test]
fn in_place_collectives_are_exact_and_race_free_on_every_launch() {
    for p in [2usize, 3, 4, 8] {
        for &mode in in_place::STEP.modes {
            // 200 launches, each checked bit for bit against the out-of-place golden.
            let s = Session::sim(p).unwrap().with_mode(Some(mode.to_string()));
            (in_place::STEP.run)(&s).unwrap_or_else(|e| panic!("{mode} in place at P = {p}: {e}"));
        }
    }
    use eagle::ir::EagleFn;
    let e = ar_mesh_ip_d::module().unwrap_err().to_string();
    assert!(e.contains("an in-place `mesh` allreduce (the same window as send and receive buffer) is not supported"), "{e}");
    assert!(e.contains("use mode `two_phase` or `ring`"), "{e}");
    let e = a2a_ip_d::module().unwrap_err().to_string();
    assert!(e.contains("an in-place all_to_all"), "{e}");
}

/// PyPTO's row forms as `examples/row_collectives.rs` runs them (and `.ci/run` under both
/// MPIs): allgather of one row per rank (pushed from a local tensor, pulled from a window) and
/// reduce-scatter into one row.
#[path = "../examples/row_collectives.rs"]
#[allow(dead_code)]
mod row_collectives;

/// Issue 38, item 7: each row form, 50 launches at P = 1, 2, 3 and 5, every launch bit for bit
/// against the host golden (the race detector on).
#[test]
fn row_collectives_are_exact_on_every_launch() {
    for p in [1usize, 2, 3, 5] {
        for &mode in row_collectives::STEP.modes {
            let s = Session::sim(p).unwrap().with_mode(Some(mode.to_string()));
            (row_collectives::STEP.run)(&s).unwrap_or_else(|e| panic!("{mode} at P = {p}: {e}"));
        }
    }
}

/// The IR of every built-in collective, specialized at P = 4 with N = 10 (ragged chunks 3, 3,
/// 2, 2), as the lowering pass produces it.
#[test]
fn builtin_collective_snapshots_at_p4() {
    let b: &[(&str, u64)] = &[("NR", 4), ("N", 10), ("M", 3)];
    insta::assert_snapshot!(
        "lowered_allreduce_mesh_p4",
        ar_sum_mesh.ir_specialized(4, b).unwrap()
    );
    insta::assert_snapshot!(
        "lowered_allreduce_two_phase_p4",
        ar_sum_two.ir_specialized(4, b).unwrap()
    );
    insta::assert_snapshot!(
        "lowered_allreduce_ring_p4",
        ar_sum_ring.ir_specialized(4, b).unwrap()
    );
    insta::assert_snapshot!("lowered_broadcast_p4", bcast.ir_specialized(4, b).unwrap());
    insta::assert_snapshot!("lowered_allgather_p4", gather.ir_specialized(4, b).unwrap());
    insta::assert_snapshot!(
        "lowered_reduce_scatter_p4",
        rs.ir_specialized(4, b).unwrap()
    );
    insta::assert_snapshot!("lowered_all_to_all_p4", a2a.ir_specialized(4, b).unwrap());
}

/// Issue 37, item 1: the lowered IR of every built-in collective has a size independent of
/// the world size. With chunks of 4 and 3 rows (N = 3P + 1; the mesh, which does not chunk,
/// N = 1,000) the device function at P = 3, 16
/// and 1,024 has the same number of ops, only other constants; its specialization at P =
/// 1,024 stays small.
#[test]
fn lowered_collectives_do_not_grow_with_the_world_size() {
    type Ir = fn(u64, &[(&str, u64)]) -> eagle::Result<String>;
    let cases: [(&str, Ir); 7] = [
        ("mesh", |p, b| ar_sum_mesh.ir_specialized(p, b)),
        ("two_phase", |p, b| ar_sum_two.ir_specialized(p, b)),
        ("ring", |p, b| ar_sum_ring.ir_specialized(p, b)),
        ("broadcast", |p, b| bcast.ir_specialized(p, b)),
        ("allgather", |p, b| gather.ir_specialized(p, b)),
        ("reduce_scatter", |p, b| rs.ir_specialized(p, b)),
        ("all_to_all", |p, b| a2a.ir_specialized(p, b)),
    ];
    for (name, ir) in cases {
        let device_ops = |p: u64| {
            // The mesh folds whole tiles of at most 1,024 rows: the same N at every P.
            let n = if name == "mesh" { 1000 } else { 3 * p + 1 };
            let text = ir(p, &[("NR", p), ("N", n), ("M", 3)]).unwrap();
            let device = text.split("\nhost @").next().unwrap().to_string();
            device.lines().count()
        };
        let (small, mid, large) = (device_ops(3), device_ops(16), device_ops(1024));
        assert_eq!(
            (small, mid),
            (large, large),
            "{name}: ops at P = 3, 16, 1024"
        );
        assert!(large < 200, "{name}: {large} lines at P = 1,024");
    }
}

allreduce_case!(nan_max32_mesh_d, nan_max32_mesh, f32, Max, Mesh);
allreduce_case!(nan_max32_two_d, nan_max32_two, f32, Max, TwoPhase);
allreduce_case!(nan_max32_ring_d, nan_max32_ring, f32, Max, Ring);
allreduce_case!(nan_min32_mesh_d, nan_min32_mesh, f32, Min, Mesh);
allreduce_case!(nan_min32_two_d, nan_min32_two, f32, Min, TwoPhase);
allreduce_case!(nan_min32_ring_d, nan_min32_ring, f32, Min, Ring);
allreduce_case!(nan_max64_mesh_d, nan_max64_mesh, f64, Max, Mesh);
allreduce_case!(nan_max64_two_d, nan_max64_two, f64, Max, TwoPhase);
allreduce_case!(nan_max64_ring_d, nan_max64_ring, f64, Max, Ring);
allreduce_case!(nan_min64_mesh_d, nan_min64_mesh, f64, Min, Mesh);
allreduce_case!(nan_min64_two_d, nan_min64_two, f64, Min, TwoPhase);
allreduce_case!(nan_min64_ring_d, nan_min64_ring, f64, Min, Ring);

/// Columns of allreduce inputs, one value per rank (cycled when P is larger): NaNs with other
/// signs and payloads, infinities, signed zeros and plain numbers.
fn nan_columns_f32() -> Vec<[u32; 4]> {
    let f = |v: f32| v.to_bits();
    vec![
        [f(f32::INFINITY), f(f32::NAN), f(-1.0), f(2.0)],
        [0x7fc0_0001, 0xffc0_0002, f(1.0), f(-3.0)],
        [f(1.0), f(2.0), 0xffc0_0000, f(0.5)],
        [f(-5.0), f(4.0), f(3.0), 0x7f80_0001], // a signalling NaN on rank 3
        [f(-0.0), f(0.0), f(-0.0), f(0.0)],
        [f(1.5), f(-2.5), f(7.0), f(f32::NEG_INFINITY)],
        [0xffff_ffff, f(0.0), f(0.0), f(0.0)],
    ]
}

/// Runs every mode of the allreduce `op` on NaN-laden inputs and checks the bits of each
/// element: the canonical NaN (`0x7fc00000` / `0x7ff8000000000000`) where any rank holds a NaN,
/// else the fold with eagle's `max`/`min`; the same in every mode and on every rank.
#[test]
fn allreduce_max_min_nan_results_are_the_canonical_nan_in_every_mode() {
    type L32 = fn(&Session, &Tensor<f32>, &mut Tensor<f32>) -> eagle::Result<eagle::LaunchReport>;
    type L64 = fn(&Session, &Tensor<f64>, &mut Tensor<f64>) -> eagle::Result<eagle::LaunchReport>;
    type Case<L, T> = (&'static str, [L; 3], fn(T, T) -> T);
    let f32_cases: [Case<L32, f32>; 2] = [
        (
            "Max",
            [
                |s, x, y| nan_max32_mesh.launch(s, x, y),
                |s, x, y| nan_max32_two.launch(s, x, y),
                |s, x, y| nan_max32_ring.launch(s, x, y),
            ],
            eagle_runner::golden::fmax_f32,
        ),
        (
            "Min",
            [
                |s, x, y| nan_min32_mesh.launch(s, x, y),
                |s, x, y| nan_min32_two.launch(s, x, y),
                |s, x, y| nan_min32_ring.launch(s, x, y),
            ],
            eagle_runner::golden::fmin_f32,
        ),
    ];
    let f64_cases: [Case<L64, f64>; 2] = [
        (
            "Max",
            [
                |s, x, y| nan_max64_mesh.launch(s, x, y),
                |s, x, y| nan_max64_two.launch(s, x, y),
                |s, x, y| nan_max64_ring.launch(s, x, y),
            ],
            eagle_runner::golden::fmax_f64,
        ),
        (
            "Min",
            [
                |s, x, y| nan_min64_mesh.launch(s, x, y),
                |s, x, y| nan_min64_two.launch(s, x, y),
                |s, x, y| nan_min64_ring.launch(s, x, y),
            ],
            eagle_runner::golden::fmin_f64,
        ),
    ];
    let cols = nan_columns_f32();
    // Enough columns for the SIMD loops and their scalar tails: the table repeated.
    let n = cols.len() * 9 + 3;
    let modes = ["mesh", "two_phase", "ring"];
    for p in 2..=4 {
        let s = Session::sim(p).unwrap();
        let bits32 = |r: usize, j: usize| cols[j % cols.len()][r % 4];
        let x32 = Tensor::from_vec(
            &[p, n],
            (0..p * n)
                .map(|i| f32::from_bits(bits32(i / n, i % n)))
                .collect(),
        )
        .unwrap();
        // f64 inputs: the same values widened, NaN payloads moved to the f64 payload bits.
        let widen = |b: u32| -> u64 {
            let v = f32::from_bits(b);
            if v.is_nan() {
                ((b as u64 & 0x8000_0000) << 32) | 0x7ff0_0000_0000_0000 | (b as u64 & 0x7f_ffff)
            } else {
                (v as f64).to_bits()
            }
        };
        let x64 = Tensor::from_vec(
            &[p, n],
            (0..p * n)
                .map(|i| f64::from_bits(widen(bits32(i / n, i % n))))
                .collect(),
        )
        .unwrap();
        for (op, launches, fold) in &f32_cases {
            let want: Vec<u32> = (0..n)
                .map(|j| {
                    let any_nan = (0..p).any(|r| x32.row(r)[j].is_nan());
                    let v = (1..p).fold(x32.row(0)[j], |a, r| fold(a, x32.row(r)[j]));
                    assert_eq!(any_nan, v.is_nan());
                    v.to_bits()
                })
                .collect();
            for (j, w) in want.iter().enumerate() {
                if (0..p).any(|r| x32.row(r)[j].is_nan()) {
                    assert_eq!(*w, 0x7fc0_0000);
                }
            }
            for (launch, mode) in launches.iter().zip(modes) {
                let mut y = Tensor::<f32>::zeros(&[p, n]);
                launch(&s, &x32, &mut y).unwrap();
                for r in 0..p {
                    let got: Vec<u32> = y.row(r).iter().map(|v| v.to_bits()).collect();
                    assert_eq!(got, want, "f32 {op} {mode} P={p} rank {r}");
                }
            }
        }
        for (op, launches, fold) in &f64_cases {
            let want: Vec<u64> = (0..n)
                .map(|j| {
                    let v = (1..p).fold(x64.row(0)[j], |a, r| fold(a, x64.row(r)[j]));
                    if (0..p).any(|r| x64.row(r)[j].is_nan()) {
                        assert_eq!(v.to_bits(), 0x7ff8_0000_0000_0000);
                    }
                    v.to_bits()
                })
                .collect();
            for (launch, mode) in launches.iter().zip(modes) {
                let mut y = Tensor::<f64>::zeros(&[p, n]);
                launch(&s, &x64, &mut y).unwrap();
                for r in 0..p {
                    let got: Vec<u64> = y.row(r).iter().map(|v| v.to_bits()).collect();
                    assert_eq!(got, want, "f64 {op} {mode} P={p} rank {r}");
                }
            }
        }
    }
}

// Collectives on 2-D buffers: chunked along dim 0 (rows) by the same rule.
const ROWS: Dim = dynamic!("ROWS");
const COLS: usize = 3;

macro_rules! allreduce_2d {
    ($dev:ident, $host:ident, $mode:ident) => {
        #[eagle::kernel(device)]
        pub fn $dev(
            ctx: Ctx,
            x: Tensor<f32, ROWS, COLS>,
            y: Out<Tensor<f32, ROWS, COLS>>,
            src: Window<f32, ROWS, COLS>,
            dst: Window<f32, ROWS, COLS>,
        ) {
            let me = rank(ctx);
            put(src, me, x);
            allreduce(ctx, src, dst, Sum, $mode);
            get(y, me, dst);
        }
        #[eagle::host]
        pub fn $host(x: Tensor<f32, NR, ROWS, COLS>, y: Out<Tensor<f32, NR, ROWS, COLS>>) {
            let s = alloc_window_buffer([ROWS, COLS], f32);
            let d = alloc_window_buffer([ROWS, COLS], f32);
            for r in 0..world_size() {
                $dev(
                    x[r],
                    y[r],
                    window(s, [ROWS, COLS], f32),
                    window(d, [ROWS, COLS], f32),
                    device = r,
                );
            }
        }
    };
}
allreduce_2d!(ar2_mesh_d, ar2_mesh, Mesh);
allreduce_2d!(ar2_two_d, ar2_two, TwoPhase);
allreduce_2d!(ar2_ring_d, ar2_ring, Ring);

/// Allgather and reduce-scatter of `[ROWS, COLS]` buffers; `w[i][j]` element access on a 2-D
/// window (every rank raises `w[0][1]` of its own window by 1 before the gather).
#[eagle::kernel(device)]
pub fn ag2_d(
    ctx: Ctx,
    x: Tensor<f32, ROWS, COLS>,
    g: Out<Tensor<f32, ROWS, COLS>>,
    scat: Out<Tensor<f32, ROWS, COLS>>,
    src: Window<f32, ROWS, COLS>,
) {
    let me = rank(ctx);
    put(src, me, x);
    src[0][1] = src[0][1] + 1.0;
    allgather(ctx, src, g);
    reduce_scatter(ctx, src, scat, Sum);
}
#[eagle::host]
pub fn ag2(
    x: Tensor<f32, NR, ROWS, COLS>,
    g: Out<Tensor<f32, NR, ROWS, COLS>>,
    scat: Out<Tensor<f32, NR, ROWS, COLS>>,
) {
    let s = alloc_window_buffer([ROWS, COLS], f32);
    for r in 0..world_size() {
        ag2_d(
            x[r],
            g[r],
            scat[r],
            window(s, [ROWS, COLS], f32),
            device = r,
        );
    }
}

#[test]
fn collectives_on_2d_buffers_chunk_whole_rows() {
    let rows = 7;
    let n = rows * COLS;
    for p in 1..=5 {
        let s = Session::sim(p).unwrap();
        let x = inputs::<f32>(p, n, p as u64);
        // Row chunk of element j.
        let chunk_of = |j: usize| {
            (0..p as u64)
                .find(|&c| {
                    let (o, l) = chunk(rows as u64, p as u64, c);
                    (o..o + l).contains(&((j / COLS) as u64))
                })
                .unwrap() as usize
        };
        for mode in ["mesh", "two_phase", "ring"] {
            let mut y = Tensor::<f32>::zeros(&[p, rows, COLS]);
            let x3 = Tensor::from_vec(&[p, rows, COLS], x.data().to_vec()).unwrap();
            match mode {
                "mesh" => ar2_mesh.launch(&s, &x3, &mut y).unwrap(),
                "two_phase" => ar2_two.launch(&s, &x3, &mut y).unwrap(),
                _ => ar2_ring.launch(&s, &x3, &mut y).unwrap(),
            };
            let want: Vec<f32> = (0..n)
                .map(|j| {
                    let start = if mode == "ring" { chunk_of(j) } else { 0 };
                    let mut acc = x.row(start)[j];
                    for k in 1..p {
                        acc += x.row((start + k) % p)[j];
                    }
                    acc
                })
                .collect();
            for r in 0..p {
                eagle_runner::check_bits(mode, &y.data()[r * n..(r + 1) * n], &want).unwrap();
            }
        }
        let x3 = Tensor::from_vec(&[p, rows, COLS], x.data().to_vec()).unwrap();
        let mut g = Tensor::<f32>::zeros(&[p, rows, COLS]);
        let mut sc = Tensor::<f32>::zeros(&[p, rows, COLS]);
        ag2.launch(&s, &x3, &mut g, &mut sc).unwrap();
        // Rank q's window: x[q] with element [0][1] raised by 1.
        let win = |q: usize, j: usize| x.row(q)[j] + if j == 1 { 1.0 } else { 0.0 };
        for r in 0..p {
            for j in 0..n {
                let c = chunk_of(j);
                assert_eq!(
                    g.data()[r * n + j].to_bits(),
                    win(c, j).to_bits(),
                    "allgather p={p} r={r} j={j}"
                );
                if c == r {
                    let mut acc = win(0, j);
                    for q in 1..p {
                        acc += win(q, j);
                    }
                    assert_eq!(
                        sc.data()[r * n + j].to_bits(),
                        acc.to_bits(),
                        "reduce_scatter p={p} r={r} j={j}"
                    );
                }
            }
        }
    }
}

#[eagle::kernel(device)]
pub fn gather_u8_d(ctx: Ctx, x: Tensor<u8, N>, y: Out<Tensor<u8, N>>, src: Window<u8, N>) {
    put(src, rank(ctx), x);
    allgather(ctx, src, y);
}
#[eagle::host]
pub fn gather_u8(x: Tensor<u8, NR, N>, y: Out<Tensor<u8, NR, N>>) {
    let s = alloc_window_buffer([N], u8);
    for r in 0..world_size() {
        gather_u8_d(x[r], y[r], window(s, [N], u8), device = r);
    }
}

#[eagle::kernel(device)]
pub fn bcast_i16_d(ctx: Ctx, x: Tensor<i16, N>, y: Out<Tensor<i16, N>>, src: Window<i16, N>) {
    put(src, rank(ctx), x);
    broadcast(ctx, src, y, 1);
}
#[eagle::host]
pub fn bcast_i16(x: Tensor<i16, NR, N>, y: Out<Tensor<i16, NR, N>>) {
    let s = alloc_window_buffer([N], i16);
    for r in 0..world_size() {
        bcast_i16_d(x[r], y[r], window(s, [N], i16), device = r);
    }
}

#[eagle::kernel(device)]
pub fn rs_bf16_d(ctx: Ctx, x: Tensor<bf16, N>, y: Out<Tensor<bf16, N>>, src: Window<bf16, N>) {
    put(src, rank(ctx), x);
    reduce_scatter(ctx, src, y, Sum);
}
#[eagle::host]
pub fn rs_bf16(x: Tensor<bf16, NR, N>, y: Out<Tensor<bf16, NR, N>>) {
    let s = alloc_window_buffer([N], bf16);
    for r in 0..world_size() {
        rs_bf16_d(x[r], y[r], window(s, [N], bf16), device = r);
    }
}

#[test]
fn allgather_broadcast_reduce_scatter_on_storage_dtypes() {
    for &(p, n) in SIZES.iter().filter(|(p, _)| *p >= 2) {
        let s = Session::sim(p).unwrap();
        let x = inputs::<u8>(p, n, 5);
        let mut y = Tensor::<u8>::zeros(&[p, n]);
        gather_u8.launch(&s, &x, &mut y).unwrap();
        let want: Vec<u8> = (0..n)
            .map(|j| x.row(eagle_runner::golden::owner(n, p, j))[j])
            .collect();
        for r in 0..p {
            assert_eq!(y.row(r), &want[..], "u8 allgather P={p} N={n} rank {r}");
        }
        let x = inputs::<i16>(p, n, 6);
        let mut y = Tensor::<i16>::zeros(&[p, n]);
        bcast_i16.launch(&s, &x, &mut y).unwrap();
        for r in 0..p {
            assert_eq!(y.row(r), x.row(1), "i16 broadcast P={p} N={n} rank {r}");
        }
        // Reduce-scatter of bf16: the rank-order sum, each add in f32 rounded to bf16.
        let x = inputs::<bf16>(p, n, 7);
        let mut y = Tensor::<bf16>::zeros(&[p, n]);
        rs_bf16.launch(&s, &x, &mut y).unwrap();
        let sum = golden(&x, p, n, "Sum", false);
        for r in 0..p {
            for j in eagle_runner::golden::chunk(n, p, r) {
                assert_eq!(
                    y.row(r)[j].to_bits(),
                    sum[j].to_bits(),
                    "bf16 reduce_scatter P={p} N={n} rank {r} element {j}"
                );
            }
        }
    }
}

/// PyPTO's allgather (issue 38, item 7): every rank's whole send buffer becomes row `r` of the
/// `[NR, M]` receive buffer, from a local `[1, M]` tensor pushed into the peers' windows, or
/// from a `[1, M]` window pulled by each rank into a local tensor.
#[eagle::kernel(device)]
pub fn ag_push(ctx: Ctx, x: Tensor<f32, 1, M>, w: Window<f32, NR, M>, y: Out<Tensor<f32, NR, M>>) {
    allgather(ctx, x, w);
    get(y, rank(ctx), w);
}

#[eagle::host]
pub fn ag_push_host(x: Tensor<f32, NR, 1, M>, y: Out<Tensor<f32, NR, NR, M>>) {
    let b = alloc_window_buffer([NR, M], f32);
    for r in 0..world_size() {
        ag_push(x[r], window(b, [NR, M], f32), y[r], device = r);
    }
}

#[eagle::kernel(device)]
pub fn ag_pull(ctx: Ctx, x: Tensor<f32, 1, M>, s: Window<f32, 1, M>, y: Out<Tensor<f32, NR, M>>) {
    store(s, [0, 0], load(x, [0, 0], [1, M]));
    allgather(ctx, s, y);
}

#[eagle::host]
pub fn ag_pull_host(x: Tensor<f32, NR, 1, M>, y: Out<Tensor<f32, NR, NR, M>>) {
    let b = alloc_window_buffer([1, M], f32);
    for r in 0..world_size() {
        ag_pull(x[r], window(b, [1, M], f32), y[r], device = r);
    }
}

#[test]
fn allgather_of_rows_from_a_local_tensor_or_a_window_at_every_p() {
    for p in 1..=5usize {
        for m in [1usize, 5] {
            let s = Session::sim(p).unwrap();
            let x = inputs::<f32>(p, m, (p * 100 + m) as u64);
            let want: Vec<u32> = x.data().iter().map(|v| v.to_bits()).collect();
            let x3 = Tensor::from_vec(&[p, 1, m], x.data().to_vec()).unwrap();
            let push: &Launch<f32> = &|s, x, y| ag_push_host.launch(s, x, y);
            let pull: &Launch<f32> = &|s, x, y| ag_pull_host.launch(s, x, y);
            for (how, launch) in [("push", push), ("pull", pull)] {
                let mut y = Tensor::<f32>::zeros(&[p, p, m]);
                launch(&s, &x3, &mut y).unwrap_or_else(|e| panic!("{how}, P={p} M={m}: {e}"));
                for r in 0..p {
                    let got: Vec<u32> = y.data()[r * p * m..(r + 1) * p * m]
                        .iter()
                        .map(|v| v.to_bits())
                        .collect();
                    assert_eq!(got, want, "{how}, P={p} M={m}, rank {r}");
                }
            }
        }
    }
}

/// The row form needs a window on one side, and one row per rank once P is known.
#[test]
fn allgather_of_rows_is_refused_without_a_window_or_with_the_wrong_row_count() {
    use eagle::codegen::{specialize, Bindings, SpecializeError};
    let text = "device @k(%0 ctx: ctx, %1 x: tensor<[1, 8], f32>, out %2 y: tensor<[NR, 8], f32>) {\n  allgather %0, %1, %2 ;@ ports.rs:7:5\n}\n";
    let m = eagle::ir::parse_module(text).unwrap();
    let e = eagle::ir::verify_module(&m).unwrap_err().to_string();
    assert!(e.contains("needs a window on one side"), "{e}");
    let text = "device @k(%0 ctx: ctx, %1 x: tensor<[1, 8], f32>, %2 w: window<[3, 8], f32>) {\n  allgather %0, %1, %2 ;@ ports.rs:7:5\n}\n";
    let m = eagle::ir::parse_module(text).unwrap();
    eagle::ir::verify_module(&m).unwrap();
    let e = specialize(&m, &Bindings::world(4)).unwrap_err();
    let SpecializeError::CollectiveShape { ref message, .. } = e else {
        panic!("{e:?}");
    };
    assert!(message.contains("P = 4 the receive buffer is `window<[3, 8], f32>` but an allgather of rows takes one row per rank"), "{message}");
    specialize(&m, &Bindings::world(3)).unwrap();
}

/// PyPTO's reduce-scatter into one row: rank r's `[1, M]` receive buffer gets row r of every
/// rank's `[NR, M]` send window, reduced in rank order (issue 38, item 7).
#[eagle::kernel(device)]
pub fn rs_rows(ctx: Ctx, x: Tensor<f32, NR, M>, w: Window<f32, NR, M>, y: Out<Tensor<f32, 1, M>>) {
    put(w, rank(ctx), x);
    reduce_scatter(ctx, w, y, Sum);
}

#[eagle::host]
pub fn rs_rows_host(x: Tensor<f32, NR, NR, M>, y: Out<Tensor<f32, NR, 1, M>>) {
    let b = alloc_window_buffer([NR, M], f32);
    for r in 0..world_size() {
        rs_rows(x[r], window(b, [NR, M], f32), y[r], device = r);
    }
}

#[eagle::kernel(device)]
pub fn rs_rows_max(
    ctx: Ctx,
    x: Tensor<f32, NR, M>,
    w: Window<f32, NR, M>,
    y: Window<f32, 1, M>,
    out: Out<Tensor<f32, 1, M>>,
) {
    put(w, rank(ctx), x);
    reduce_scatter(ctx, w, y, Max);
    get(out, rank(ctx), y);
}

#[eagle::host]
pub fn rs_rows_max_host(x: Tensor<f32, NR, NR, M>, y: Out<Tensor<f32, NR, 1, M>>) {
    let b = alloc_window_buffer([NR, M], f32);
    let c = alloc_window_buffer([1, M], f32);
    for r in 0..world_size() {
        rs_rows_max(
            x[r],
            window(b, [NR, M], f32),
            window(c, [1, M], f32),
            y[r],
            device = r,
        );
    }
}

#[test]
fn reduce_scatter_into_one_row_reduces_row_r_of_every_rank_in_rank_order_at_every_p() {
    for p in 1..=5usize {
        for m in [1usize, 5] {
            let s = Session::sim(p).unwrap();
            // Rank q contributes x[q] = a [P, M] tensor.
            let x = inputs::<f32>(p * p, m, (p * 100 + m) as u64);
            let x3 = Tensor::from_vec(&[p, p, m], x.data().to_vec()).unwrap();
            let at = |q: usize, r: usize, j: usize| x.data()[(q * p + r) * m + j];
            for (name, op) in [("sum", 0), ("max", 1)] {
                let mut y = Tensor::<f32>::zeros(&[p, 1, m]);
                if op == 0 {
                    rs_rows_host.launch(&s, &x3, &mut y)
                } else {
                    rs_rows_max_host.launch(&s, &x3, &mut y)
                }
                .unwrap_or_else(|e| panic!("{name}, P={p} M={m}: {e}"));
                for r in 0..p {
                    let want: Vec<u32> = (0..m)
                        .map(|j| {
                            let mut acc = at(0, r, j);
                            for q in 1..p {
                                acc = if op == 0 {
                                    acc + at(q, r, j)
                                } else {
                                    eagle::ir::eval::fmax_f32(acc, at(q, r, j))
                                };
                            }
                            acc.to_bits()
                        })
                        .collect();
                    let got: Vec<u32> = y.data()[r * m..(r + 1) * m]
                        .iter()
                        .map(|v| v.to_bits())
                        .collect();
                    assert_eq!(got, want, "{name}, P={p} M={m}, rank {r}");
                }
            }
        }
    }
}

/// The row form needs the send buffer to be a window, and one row per rank once P is known.
#[test]
fn reduce_scatter_into_one_row_is_refused_without_a_send_window_or_with_the_wrong_row_count() {
    use eagle::codegen::{specialize, Bindings, SpecializeError};
    let text = "device @k(%0 ctx: ctx, %1 x: tensor<[NR, 8], f32>, out %2 y: tensor<[1, 8], f32>) {\n  reduce_scatter %0, %1, %2, sum ;@ ports.rs:9:5\n}\n";
    let m = eagle::ir::parse_module(text).unwrap();
    let e = eagle::ir::verify_module(&m).unwrap_err().to_string();
    assert!(e.contains("make the send buffer a window"), "{e}");
    assert!(e.contains("ports.rs:9:5"), "{e}");
    let text = "device @k(%0 ctx: ctx, %1 w: window<[3, 8], f32>, out %2 y: tensor<[1, 8], f32>) {\n  reduce_scatter %0, %1, %2, sum ;@ ports.rs:9:5\n}\n";
    let m = eagle::ir::parse_module(text).unwrap();
    eagle::ir::verify_module(&m).unwrap();
    let e = specialize(&m, &Bindings::world(4)).unwrap_err();
    let SpecializeError::CollectiveShape { ref message, .. } = e else {
        panic!("{e:?}");
    };
    assert!(message.contains("P = 4 the send buffer is `window<[3, 8], f32>` but a reduce-scatter into one row takes one row per rank"), "{message}");
    specialize(&m, &Bindings::world(3)).unwrap();
}

/// Puts `x` into the window of rank `rank + step` (`step` only known at run time), with the
/// ring's modulus off by one: the last rank puts to rank `n`.
#[eagle::kernel(device)]
pub fn ring_put_past(ctx: Ctx, x: Tensor<f32, 8>, w: Window<f32, 8>, step: usize) {
    let n = nranks(ctx);
    put(w, (rank(ctx) + step) % (n + 1), x);
}

#[eagle::host]
pub fn ring_past(x: Tensor<f32, NR, 8>, step: usize) {
    let w = alloc_window_buffer([8], f32);
    for r in 0..world_size() {
        ring_put_past(x[r], window(w, [8], f32), step, device = r);
    }
}

/// A `put` to a peer past the world that only the run shows (specialization refuses one it
/// can prove, naming the line) fails on that rank naming the function, the op, its source
/// line, the peer, the world and the fix.
#[test]
fn a_put_past_the_world_names_the_op_its_line_and_the_fix() {
    let s = Session::sim(3).unwrap();
    let x = Tensor::<f32>::zeros(&[3, 8]);
    let e = ring_past.launch(&s, &x, 1).unwrap_err().to_string();
    assert!(
        e.starts_with("rank 2 failed: function `ring_put_past`, op `put "),
        "{e}"
    );
    assert!(
        e.contains("(at tests/collectives.rs:")
            && e.ends_with("put: peer rank 3 is outside the world 0..3; address ranks 0 to 2 (a ring's next rank is `(rank(ctx) + 1) % nranks(ctx)`)"),
        "{e}"
    );
}
