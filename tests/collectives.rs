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

fn check_allreduce<T: Combine + eagle::runtime::Element>(
    launch: &dyn Fn(&Session, &Tensor<T>, &mut Tensor<T>) -> eagle::Result<eagle::LaunchReport>,
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
