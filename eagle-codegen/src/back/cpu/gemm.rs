//! The float `matmul` of the CPU backend: register-blocked micro-kernels compiled by rustc,
//! called from the JIT code (Cranelift emits 16-byte vectors only; these run 32- or 64-byte
//! ones where the CPU has them, chosen at run time).
//!
//! **Order.** Every `dst[i][j]` is `c0 + a[i][0] * b[0][j] + a[i][1] * b[1][j] + ...` summed in
//! ascending `k`, each product rounded, then each sum (no fused multiply-add): the order
//! [`eagle_ir::prim::dot`] defines for every backend, run here with `j` across vector lanes
//! and `i` across registers, so the bits are the evaluator's (`tests/tile_diff.rs`). Rust never
//! reassociates or contracts float arithmetic, so the code below keeps that order whatever the
//! target features: the vector lanes hold different `j` (and the register block different
//! `i`), never different `k`.
//!
//! **Blocking.** `b` is taken one panel of `NR` columns (the kernel's width) at a time: read
//! in place when the panel is whole and `b`'s rows are at most [`IN_PLACE_ROW_BYTES`] apart,
//! else packed into a contiguous `[k][NR]` buffer (columns past `n` padded with the additive
//! identity). Each panel is then swept by `MR x NR` blocks of `c` held in registers, reading
//! `MR` rows of `a` in place (rows past `m` repeat the last row; their results are dropped). A
//! padded lane or row never feeds a kept element: `dst[i][j]` reads only row `i` of `a` and
//! column `j` of `b`. A whole block reads `c` and writes `dst` where they are; a block cut by
//! the edge of `dst` goes through a buffer.
//!
//! **Aliasing.** `dst` may be `c` (each block of `c` is read into registers before the same
//! block of `dst` is written, and blocks are disjoint); `dst` must not overlap `a` or `b`. The
//! backend passes a fresh stack tile as `dst`, or the tile of the variable the product is
//! assigned to (`acc = matmul_acc(acc, ..)`, where `c` is that tile).

use eagle_ir::eval::Scalar;
use eagle_ir::DType;
use std::cell::RefCell;
use std::ops::{Add, Mul};
use std::sync::OnceLock;

/// The symbol of `gemm::<f32>` ([`gemm`]) in the JIT module.
pub(super) const F32: &str = "eagle_gemm_f32";
/// The symbol of `gemm::<f64>` in the JIT module.
pub(super) const F64: &str = "eagle_gemm_f64";

/// The micro-kernel GEMMs: dtype, symbol in the JIT module, address (for the JIT's symbol
/// table). Other dtypes run the backend's own loop.
pub(super) fn symbols() -> [(DType, &'static str, *const u8); 2] {
    [
        (DType::F32, F32, gemm::<f32> as *const u8),
        (DType::F64, F64, gemm::<f64> as *const u8),
    ]
}

/// The symbol of the micro-kernel GEMM for dtype `d`, if it has one.
pub(super) fn entry(d: DType) -> Option<&'static str> {
    symbols()
        .into_iter()
        .find(|(t, _, _)| *t == d)
        .map(|(_, name, _)| name)
}

/// A float element the micro-kernels run on.
trait Elem: Copy + Add<Output = Self> + Mul<Output = Self> + 'static {
    /// The identity of `+` (`c0` when there is no accumulator), as the evaluator defines it.
    fn identity() -> Self;
    /// This thread's packing buffer for this dtype, taken out of its thread-local (kept
    /// between GEMMs so that a GEMM allocates only when it needs a larger panel).
    fn take_panel() -> Vec<Self>;
    /// Gives the buffer back for the next GEMM on this thread.
    fn put_panel(p: Vec<Self>);
    /// Every micro-kernel this CPU runs for this dtype, fastest first, detected once per
    /// process; the last two are one column wide (8 rows, for matrix-vector products) and one
    /// element (for a single dot product).
    fn kernels() -> &'static [Kernel<Self>];
}

/// Implements [`Elem`] for float `$t` (`DType::$d`, `Scalar::$d`): its packing buffer in
/// thread-local `$panel`, its SIMD kernels from `simd::$t`, then the portable ones (`$nr`
/// columns wide, one column, one element).
macro_rules! elem {
    ($t:ident, $d:ident, $panel:ident, $nr:literal) => {
        thread_local! {
            static $panel: RefCell<Vec<$t>> = const { RefCell::new(Vec::new()) };
        }

        impl Elem for $t {
            fn identity() -> Self {
                match eagle_ir::tile::add_identity(DType::$d) {
                    Scalar::$d(x) => x,
                    _ => -0.0,
                }
            }
            fn take_panel() -> Vec<Self> {
                $panel.with(|p| p.take())
            }
            fn put_panel(p: Vec<Self>) {
                $panel.with(|c| *c.borrow_mut() = p);
            }
            fn kernels() -> &'static [Kernel<Self>] {
                static K: OnceLock<Vec<Kernel<$t>>> = OnceLock::new();
                K.get_or_init(|| {
                    let mut v = simd::$t();
                    v.extend([
                        portable::<$t, 4, $nr>(),
                        portable::<$t, 8, 1>(),
                        portable::<$t, 1, 1>(),
                    ]);
                    v
                })
            }
        }
    };
}

elem!(f32, F32, PANEL_F32, 16);
elem!(f64, F64, PANEL_F64, 8);

/// The operands of one GEMM: `dst[m][n] = c[m][n] (or the identity) + a[m][k] x b[k][n]`, all
/// row-major; `dst` and `c` contiguous, the rows of `a` and `b` `lda` and `ldb` elements apart
/// (blocks of larger matrices read in place); with `bt`, `b` is given as its transpose (`[n][k]`,
/// rows `ldb` apart: `b[kk][j]` at `j ldb + kk`).
struct Gemm<'s, T> {
    dst: *mut T,
    c: Option<*const T>,
    a: &'s [T],
    b: &'s [T],
    m: usize,
    k: usize,
    n: usize,
    lda: usize,
    ldb: usize,
    bt: bool,
}

/// `dst = c + a x b` for `f32` or `f64` (`c` null: no accumulator). Shapes: `a` `[m, k]`,
/// `b` `[k, n]`, `c` and `dst` `[m, n]`, row-major; `c` and `dst` contiguous, row `i` of `a`
/// at `a + i lda` and row `kk` of `b` at `b + kk ldb` (elements; `lda >= k`, `ldb >= n`); with
/// `bt` non-zero, `b` points at `b`'s transpose (`[n, k]`): `b[kk][j]` at `b + j ldb` (`ldb >=
/// k`), so that `matmul(a, transpose(x))` reads `x` where it is. The JIT calls `gemm::<f32>` and
/// `gemm::<f64>` ([`symbols`]).
///
/// # Safety
/// The pointers are valid for those shapes and strides (reads of `a`, `b`, `c`; writes of
/// `dst`), `dst` does not overlap `a` or `b` (it may be `c`), and `m * lda`, `k * ldb`, `m * n`
/// fit in `usize`.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn gemm<T: Elem>(
    dst: *mut T,
    c: *const T,
    a: *const T,
    b: *const T,
    m: u64,
    k: u64,
    n: u64,
    lda: u64,
    ldb: u64,
    bt: u64,
) {
    let kern = pick(T::kernels(), m, n);
    // SAFETY: the caller's contract.
    unsafe { dispatch(dst, c, (a, lda), (b, ldb, bt != 0), [m, k, n], kern) }
}

/// A micro-kernel: `out[r][l] = c[r][l] + rows[r][kk] * panel[kk][l]` summed for `kk`
/// ascending over `0..k`, `r < mr`, `l < nr`: the block of `c` (rows `ldc` elements apart) is
/// read into registers first, the block of `out` (rows `ldo` apart) written last, so `out`
/// may be `c`; `panel` holds `k` rows of `nr` elements, `ldp` apart (a packed panel: `nr`).
type MicroFn<T> = unsafe fn(
    k: usize,
    rows: *const *const T,
    panel: (*const T, usize),
    c: (*const T, usize),
    out: (*mut T, usize),
);

/// Packs a panel: row `kk < k` of `panel` (`nr` elements, the kernel's width) is the `nr`
/// elements at `src + kk ld`.
type PackFn<T> = unsafe fn(k: usize, src: *const T, ld: usize, panel: *mut T);

/// A micro-kernel, its block shape and what it runs on.
struct Kernel<T> {
    /// The instruction set (`avx512f`, `avx`, `sse2`, `portable`), named in test failures.
    #[cfg_attr(not(test), allow(dead_code))]
    name: &'static str,
    /// Rows of `c` per block (at most [`MAX_MR`]).
    mr: usize,
    /// Columns of `c` per block: whole vectors.
    nr: usize,
    f: MicroFn<T>,
    /// Packs whole panels (`nr` columns) of `b`.
    pack: PackFn<T>,
}

/// The most rows any [`Kernel`] blocks.
const MAX_MR: usize = 8;
/// The most elements of `c` any [`Kernel`] blocks (`mr * nr`).
const MAX_BLOCK: usize = 256;
/// The widest row stride of `b`, in bytes, at which whole panels are read in place rather than
/// packed: up to 512 bytes, the `k` rows of a panel start at 8 or more different cache sets
/// (64-byte lines, 64 sets), so they do not evict each other.
const IN_PLACE_ROW_BYTES: usize = 512;

/// Defines a micro-kernel for one instruction set and dtype: `$mr` rows of `$nv` vectors of
/// `$lanes` elements, compiled with target features `$feat`, from the intrinsics named. The
/// accumulators are `[[vector; $nv]; $mr]` held in registers across the `k` loop; each step
/// loads `$nv` vectors of the panel row, broadcasts one element of each of the `$mr` rows of
/// `a`, then multiplies and adds (two roundings, as the evaluator).
macro_rules! micro_kernel {
    ($name:ident, $feat:literal, $t:ty, $v:ty, $lanes:literal, $mr:literal, $nv:literal,
     $load:path, $store:path, $splat:path, $mul:path, $add:path) => {
        /// The [`Kernel`] of `$mr` rows x `$nv` vectors for `$feat` (see [`micro_kernel`]).
        fn $name() -> Kernel<$t> {
            /// The [`MicroFn`](super::MicroFn).
            ///
            /// # Safety
            /// The CPU has the target features; the pointers are valid as [`MicroFn`](super::MicroFn) says.
            #[target_feature(enable = $feat)]
            unsafe fn kernel(
                k: usize,
                rows: *const *const $t,
                (panel, ldp): (*const $t, usize),
                (cin, ldc): (*const $t, usize),
                (out, ldo): (*mut $t, usize),
            ) {
                // SAFETY: the caller's contract: `cin` and `out` are blocks of $mr rows of
                // $nv * $lanes elements, rows `ldc` and `ldo` apart; `rows` holds $mr row
                // pointers each valid for `k` reads; `panel` holds k rows of $nv * $lanes
                // elements `ldp` apart.
                unsafe {
                    let mut c: [[$v; $nv]; $mr] = [[$splat(0.0); $nv]; $mr];
                    for (r, cr) in c.iter_mut().enumerate() {
                        for (v, cv) in cr.iter_mut().enumerate() {
                            *cv = $load(cin.add(r * ldc + v * $lanes));
                        }
                    }
                    let rows: [*const $t; $mr] = std::array::from_fn(|r| *rows.add(r));
                    for kk in 0..k {
                        let p = panel.add(kk * ldp);
                        let b: [$v; $nv] = std::array::from_fn(|v| $load(p.add(v * $lanes)));
                        for (cr, row) in c.iter_mut().zip(&rows) {
                            let x = $splat(*row.add(kk));
                            for (cv, bv) in cr.iter_mut().zip(&b) {
                                *cv = $add(*cv, $mul(x, *bv));
                            }
                        }
                    }
                    for (r, cr) in c.iter().enumerate() {
                        for (v, cv) in cr.iter().enumerate() {
                            $store(out.add(r * ldo + v * $lanes), *cv);
                        }
                    }
                }
            }
            /// The [`PackFn`](super::PackFn): whole vectors, no library call.
            ///
            /// # Safety
            /// The CPU has the target features; `src` holds `k` rows of NR elements `ld` apart
            /// and `panel` is [k][NR].
            #[target_feature(enable = $feat)]
            unsafe fn pack(k: usize, src: *const $t, ld: usize, panel: *mut $t) {
                const NR: usize = $nv * $lanes;
                // SAFETY: the caller's contract.
                unsafe {
                    for kk in 0..k {
                        for v in 0..$nv {
                            let x = $load(src.add(kk * ld + v * $lanes));
                            $store(panel.add(kk * NR + v * $lanes), x);
                        }
                    }
                }
            }
            Kernel {
                name: $feat,
                mr: $mr,
                nr: $nv * $lanes,
                f: kernel,
                pack,
            }
        }
    };
}

/// The x86-64 kernels, each compiled for its instruction set.
#[cfg(target_arch = "x86_64")]
mod simd {
    use super::Kernel;
    use std::arch::x86_64::*;

    micro_kernel!(
        f32_avx512,
        "avx512f",
        f32,
        __m512,
        16,
        4,
        4,
        _mm512_loadu_ps,
        _mm512_storeu_ps,
        _mm512_set1_ps,
        _mm512_mul_ps,
        _mm512_add_ps
    );
    micro_kernel!(
        f64_avx512,
        "avx512f",
        f64,
        __m512d,
        8,
        4,
        4,
        _mm512_loadu_pd,
        _mm512_storeu_pd,
        _mm512_set1_pd,
        _mm512_mul_pd,
        _mm512_add_pd
    );
    micro_kernel!(
        f32_avx,
        "avx",
        f32,
        __m256,
        8,
        6,
        2,
        _mm256_loadu_ps,
        _mm256_storeu_ps,
        _mm256_set1_ps,
        _mm256_mul_ps,
        _mm256_add_ps
    );
    micro_kernel!(
        f64_avx,
        "avx",
        f64,
        __m256d,
        4,
        6,
        2,
        _mm256_loadu_pd,
        _mm256_storeu_pd,
        _mm256_set1_pd,
        _mm256_mul_pd,
        _mm256_add_pd
    );
    micro_kernel!(
        f32_sse2,
        "sse2",
        f32,
        __m128,
        4,
        6,
        2,
        _mm_loadu_ps,
        _mm_storeu_ps,
        _mm_set1_ps,
        _mm_mul_ps,
        _mm_add_ps
    );
    micro_kernel!(
        f64_sse2,
        "sse2",
        f64,
        __m128d,
        2,
        6,
        2,
        _mm_loadu_pd,
        _mm_storeu_pd,
        _mm_set1_pd,
        _mm_mul_pd,
        _mm_add_pd
    );

    /// The `f32` kernels this CPU has the features for, fastest first.
    pub(super) fn f32() -> Vec<Kernel<f32>> {
        let mut v = vec![];
        if is_x86_feature_detected!("avx512f") {
            v.push(f32_avx512());
        }
        if is_x86_feature_detected!("avx") {
            v.push(f32_avx());
        }
        v.push(f32_sse2());
        v
    }

    /// As [`f32`] for `f64`.
    pub(super) fn f64() -> Vec<Kernel<f64>> {
        let mut v = vec![];
        if is_x86_feature_detected!("avx512f") {
            v.push(f64_avx512());
        }
        if is_x86_feature_detected!("avx") {
            v.push(f64_avx());
        }
        v.push(f64_sse2());
        v
    }
}

/// No SIMD kernels off x86-64: the portable ones only.
#[cfg(not(target_arch = "x86_64"))]
mod simd {
    use super::Kernel;

    pub(super) fn f32() -> Vec<Kernel<f32>> {
        vec![]
    }

    pub(super) fn f64() -> Vec<Kernel<f64>> {
        vec![]
    }
}

/// The portable [`Kernel`] of `MR` rows x `NR` columns: the same loop on plain arrays, which
/// rustc vectorises with the target's baseline SIMD where it can.
fn portable<T: Elem, const MR: usize, const NR: usize>() -> Kernel<T> {
    Kernel {
        name: "portable",
        mr: MR,
        nr: NR,
        f: portable_kernel::<T, MR, NR>,
        pack: portable_pack::<T, NR>,
    }
}

/// The [`PackFn`] of [`portable`].
///
/// # Safety
/// As [`PackFn`], with `NR` columns.
unsafe fn portable_pack<T: Elem, const NR: usize>(
    k: usize,
    src: *const T,
    ld: usize,
    panel: *mut T,
) {
    // SAFETY: the caller's contract.
    unsafe {
        for kk in 0..k {
            *panel.add(kk * NR).cast::<[T; NR]>() = *src.add(kk * ld).cast::<[T; NR]>();
        }
    }
}

/// The [`MicroFn`] of [`portable`].
///
/// # Safety
/// As [`MicroFn`], with `MR` rows of `NR` columns.
unsafe fn portable_kernel<T: Elem, const MR: usize, const NR: usize>(
    k: usize,
    rows: *const *const T,
    (panel, ldp): (*const T, usize),
    (cin, ldc): (*const T, usize),
    (out, ldo): (*mut T, usize),
) {
    // SAFETY: the caller's contract, as in `micro_kernel!`.
    unsafe {
        let mut c = [[T::identity(); NR]; MR];
        for (r, cr) in c.iter_mut().enumerate() {
            for (l, x) in cr.iter_mut().enumerate() {
                *x = *cin.add(r * ldc + l);
            }
        }
        for kk in 0..k {
            let p = panel.add(kk * ldp);
            for (r, cr) in c.iter_mut().enumerate() {
                let x = *(*rows.add(r)).add(kk);
                for (l, cv) in cr.iter_mut().enumerate() {
                    *cv = *cv + x * *p.add(l);
                }
            }
        }
        for (r, cr) in c.iter().enumerate() {
            for (l, x) in cr.iter().enumerate() {
                *out.add(r * ldo + l) = *x;
            }
        }
    }
}

/// The kernel for an `[m, n]` result: the fastest whose block is no wider than `n` (a block
/// wider than the matrix computes padding: a matrix-vector product on a 64-column block would
/// throw away 63 of every 64 lanes), else the one-column kernel; a single dot product
/// (`m = n = 1`) runs the one-element kernel.
fn pick<T>(kernels: &[Kernel<T>], m: u64, n: u64) -> &Kernel<T> {
    let (scalar, rest) = kernels.split_last().expect("every dtype has kernels");
    if m <= 1 && n <= 1 {
        return scalar;
    }
    let n = n as usize;
    rest.iter()
        .find(|k| k.nr <= n)
        .unwrap_or(&rest[rest.len() - 1])
}

/// Builds the [`Gemm`] and runs it with kernel `kern`.
///
/// # Safety
/// As [`gemm`].
unsafe fn dispatch<T: Elem>(
    dst: *mut T,
    c: *const T,
    (a, lda): (*const T, u64),
    (b, ldb, bt): (*const T, u64, bool),
    [m, k, n]: [u64; 3],
    kern: &Kernel<T>,
) {
    let [m, k, n, lda, ldb] = [m, k, n, lda, ldb].map(|x| x as usize);
    if m == 0 || n == 0 {
        return;
    }
    // Elements spanned by `rows` rows of `cols`, `ld` apart.
    let span =
        |rows: usize, cols: usize, ld: usize| if rows == 0 { 0 } else { (rows - 1) * ld + cols };
    let b_span = if bt { span(n, k, ldb) } else { span(k, n, ldb) };
    // SAFETY: the caller's contract: `a` spans m rows of k elements lda apart and `b` k rows
    // of n elements ldb apart (n rows of k with `bt`), neither overlapping `dst` (so no `&mut`
    // aliases them).
    let (a, b) = unsafe {
        (
            std::slice::from_raw_parts(a, span(m, k, lda)),
            std::slice::from_raw_parts(b, b_span),
        )
    };
    let g = Gemm {
        dst,
        c: (!c.is_null()).then_some(c),
        a,
        b,
        m,
        k,
        n,
        lda,
        ldb,
        bt,
    };
    // SAFETY: the pointers as the caller said.
    unsafe { run(&g, kern) }
}

/// The blocked GEMM (see the module docs).
///
/// # Safety
/// The pointers of `g` as [`gemm`] says; `kern` runs on this CPU.
unsafe fn run<T: Elem>(g: &Gemm<'_, T>, kern: &Kernel<T>) {
    let (mr_max, nr_max) = (kern.mr, kern.nr);
    let id = T::identity();
    // Whole panels of a `b` whose rows are close together are read where they are; others are
    // packed (rows far apart would share the few cache sets a power-of-two stride maps to).
    let in_place = !g.bt && g.ldb * std::mem::size_of::<T>() <= IN_PLACE_ROW_BYTES;
    // The panel's first `k * nr_max` elements are written before each use (packed, or copied
    // and padded), so a buffer kept from an earlier GEMM is not cleared: filling 16 KiB of
    // identity per call was ~4 % of `tp_ffn`.
    let mut panel = T::take_panel();
    let need = g.k * nr_max;
    if (!in_place || !g.n.is_multiple_of(nr_max)) && panel.len() < need {
        panel.resize(need, id);
    }
    // `c` of a whole block when there is none: the identity, rows `nr_max` apart.
    let identity = [id; MAX_BLOCK];
    // A block cut by the edge of `dst`: computed here, then its kept part copied.
    let mut acc = [id; MAX_BLOCK];
    for j0 in (0..g.n).step_by(nr_max) {
        let nr = nr_max.min(g.n - j0);
        let src = g.b.as_ptr().wrapping_add(j0);
        let (pp, ldp) = if in_place && nr == nr_max {
            (src, g.ldb)
        } else if g.bt {
            // Column `j0 + l` of `b` is row `j0 + l` of the transpose given (none when k = 0).
            for (l, col) in g.b.chunks(g.ldb.max(1)).skip(j0).take(nr).enumerate() {
                for (kk, &x) in col[..g.k].iter().enumerate() {
                    panel[kk * nr_max + l] = x;
                }
            }
            for row in panel[..need].chunks_exact_mut(nr_max) {
                row[nr..].fill(id);
            }
            (panel.as_ptr(), nr_max)
        } else if nr == nr_max {
            // SAFETY: rows kk < k of `b` hold columns j0..j0 + nr_max (j0 + nr_max <= n, so
            // within `g.b`; with k = 0 nothing is read); `panel` is [k][nr_max]; `kern` runs
            // on this CPU.
            unsafe { (kern.pack)(g.k, src, g.ldb, panel.as_mut_ptr()) };
            (panel.as_ptr(), nr_max)
        } else {
            for (kk, row) in panel[..need].chunks_exact_mut(nr_max).enumerate() {
                row[..nr].copy_from_slice(&g.b[kk * g.ldb + j0..][..nr]);
                row[nr..].fill(id);
            }
            (panel.as_ptr(), nr_max)
        };
        for i0 in (0..g.m).step_by(mr_max) {
            let mr = mr_max.min(g.m - i0);
            // Rows past `m` read the last row again (their results are dropped).
            let rows: [*const T; MAX_MR] =
                std::array::from_fn(|r| g.a[(i0 + r.min(mr - 1)) * g.lda..].as_ptr());
            if mr == mr_max && nr == nr_max {
                // A whole block: `c` read and `dst` written in place, rows `n` apart.
                // SAFETY: rows i0..i0 + mr_max < m and columns j0..j0 + nr_max <= n of the
                // [m, n] `c` and `dst`; `dst` overlaps neither `a` nor `b`, and `c` only in
                // this block, which the kernel reads before it writes; `rows` holds mr_max
                // pointers each valid for k reads, `panel` is [k][nr_max].
                unsafe {
                    let cin = match g.c {
                        Some(c) => (c.add(i0 * g.n + j0), g.n),
                        None => (identity.as_ptr(), nr_max),
                    };
                    let out = (g.dst.add(i0 * g.n + j0), g.n);
                    (kern.f)(g.k, rows.as_ptr(), (pp, ldp), cin, out);
                }
                continue;
            }
            for (r, row) in acc.chunks_exact_mut(nr_max).enumerate().take(mr) {
                match g.c {
                    // SAFETY: row i0 + r < m and columns j0..j0 + nr <= n of the [m, n] `c`.
                    Some(c) => row[..nr].copy_from_slice(unsafe {
                        std::slice::from_raw_parts(c.add((i0 + r) * g.n + j0), nr)
                    }),
                    None => row[..nr].fill(id),
                }
            }
            let p = acc.as_mut_ptr();
            // SAFETY: as above, with `acc` [mr_max][nr_max] as both `c` and `dst`.
            unsafe {
                (kern.f)(
                    g.k,
                    rows.as_ptr(),
                    (pp, ldp),
                    (p.cast_const(), nr_max),
                    (p, nr_max),
                )
            };
            for (r, row) in acc.chunks_exact(nr_max).enumerate().take(mr) {
                // SAFETY: as for `c` above; `dst` overlaps neither `a` nor `b`, and `c` only
                // in this block, which was read above.
                let out =
                    unsafe { std::slice::from_raw_parts_mut(g.dst.add((i0 + r) * g.n + j0), nr) };
                out.copy_from_slice(&row[..nr]);
            }
        }
    }
    T::put_panel(panel);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The evaluator's order, element by element.
    fn reference<T: Elem>(
        c: Option<&[T]>,
        a: &[T],
        b: &[T],
        m: usize,
        k: usize,
        n: usize,
    ) -> Vec<T> {
        let mut out = vec![];
        for i in 0..m {
            for j in 0..n {
                let mut s = c.map_or(T::identity(), |c| c[i * n + j]);
                for kk in 0..k {
                    s = s + a[i * k + kk] * b[kk * n + j];
                }
                out.push(s);
            }
        }
        out
    }

    fn values(len: usize, seed: u64) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 3.0
            })
            .collect()
    }

    /// Bit patterns, to compare results exactly (NaN payloads and the sign of zero included).
    trait Bits: Elem {
        fn bits(self) -> u64;
        fn from_f32(x: f32) -> Self;
    }
    impl Bits for f32 {
        fn bits(self) -> u64 {
            u64::from(self.to_bits())
        }
        fn from_f32(x: f32) -> Self {
            x
        }
    }
    impl Bits for f64 {
        fn bits(self) -> u64 {
            self.to_bits()
        }
        fn from_f32(x: f32) -> Self {
            f64::from(x) * 1.1
        }
    }

    /// Every kernel this CPU runs for `T`, on shapes with edges in every direction (m and n
    /// not multiples of any block, k = 0 and 1, more than one panel and row block), with and
    /// without an accumulator, against [`reference`] bit for bit. Some inputs are infinite
    /// or NaN, so a reordered or fused sum would show.
    fn every_kernel_matches<T: Bits>() {
        let shapes = [
            (1, 1, 1),
            (7, 0, 5),
            (7, 13, 37),
            (13, 64, 33),
            (64, 17, 64),
            (6, 3, 16),
            (19, 40, 131),
        ];
        let kernels = T::kernels();
        assert!(kernels.len() >= 3, "the portable kernels are always there");
        for kern in kernels {
            let (name, mr, nr) = (kern.name, kern.mr, kern.nr);
            assert!(mr <= MAX_MR && mr * nr <= MAX_BLOCK, "{name}");
            for (m, k, n) in shapes {
                let conv = |v: Vec<f32>| v.into_iter().map(T::from_f32).collect::<Vec<T>>();
                let mut a = values(m * k, 1);
                if m * k > 5 {
                    a[5] = f32::INFINITY;
                }
                let b = conv(values(k * n, 2));
                let a = conv(a);
                let c = conv(values(m * n, 3));
                // `a` and `b` also as blocks of wider matrices (NaN between the rows).
                let widen = |v: &[T], rows: usize, cols: usize, ld: usize| {
                    let mut w = vec![T::from_f32(f32::NAN); rows * ld];
                    for r in 0..rows {
                        w[r * ld..][..cols].copy_from_slice(&v[r * cols..][..cols]);
                    }
                    w
                };
                for (acc, pad) in [(false, 0), (true, 0), (false, 3), (true, 5)] {
                    let (lda, ldb) = (k + pad, n + 2 * pad);
                    let (wa, wb) = (widen(&a, m, k, lda), widen(&b, k, n, ldb));
                    // `b` also given as its transpose (`matmul(a, transpose(x))` reading `x`),
                    // its rows `k + pad` apart.
                    let bt: Vec<T> = (0..n * k).map(|e| b[(e % k) * n + e / k]).collect();
                    let ldt = k + pad;
                    let wt = widen(&bt, n, k, ldt);
                    // `dst` starts as `init`; `c` is `dst` itself when `in_place` (`acc =
                    // matmul_acc(acc, ..)` computed into the variable's own tile), else `c`
                    // or none.
                    let run = |init: &[T], in_place: bool, (pb, ld, t): (&[T], usize, bool)| {
                        let mut dst = init.to_vec();
                        let p = dst.as_mut_ptr();
                        let cp = match (in_place, acc) {
                            (true, _) => p.cast_const(),
                            (false, true) => c.as_ptr(),
                            (false, false) => std::ptr::null(),
                        };
                        // SAFETY: the shapes and strides match the buffers; `dst` overlaps
                        // neither `a` nor `b`, and `c` only exactly, which the contract
                        // allows; the kernel is one this CPU runs.
                        unsafe {
                            dispatch(
                                p,
                                cp,
                                (wa.as_ptr(), lda as u64),
                                (pb.as_ptr(), ld as u64, t),
                                [m, k, n].map(|x| x as u64),
                                kern,
                            )
                        };
                        dst
                    };
                    let want = reference(acc.then_some(&c[..]), &a, &b, m, k, n);
                    let bits = |v: &[T]| v.iter().map(|x| x.bits()).collect::<Vec<_>>();
                    let nan = vec![T::from_f32(f32::NAN); m * n];
                    let got = run(&nan, false, (&wb, ldb, false));
                    let at = format!("{name} {m}x{k}x{n} acc={acc} pad={pad}");
                    assert_eq!(bits(&got), bits(&want), "{at}");
                    let got = run(&nan, false, (&wt, ldt, true));
                    assert_eq!(bits(&got), bits(&want), "{at} b transposed");
                    if acc {
                        let got = run(&c, true, (&wb, ldb, false));
                        assert_eq!(bits(&got), bits(&want), "{at} dst = c");
                    }
                }
            }
        }
    }

    #[test]
    fn every_kernel_matches_the_evaluators_order_bit_for_bit() {
        every_kernel_matches::<f32>();
        every_kernel_matches::<f64>();
    }

    #[test]
    fn narrow_matrices_get_a_kernel_no_wider_than_they_are() {
        let ks = f32::kernels();
        let shape = |k: &Kernel<f32>| (k.mr, k.nr);
        assert_eq!(
            shape(pick(ks, 64, 1)),
            (8, 1),
            "a matrix-vector product: the column kernel"
        );
        assert_eq!(
            shape(pick(ks, 1, 1)),
            (1, 1),
            "a dot product: the one-element kernel"
        );
        assert!(pick(ks, 9, 7).nr <= 7);
        assert_eq!(
            pick(ks, 9, 4096).nr,
            ks[0].nr,
            "wide matrices run the fastest kernel"
        );
        assert_eq!(pick(f64::kernels(), 3, 1).nr, 1);
    }

    #[test]
    fn dst_may_be_the_accumulator() {
        let (m, k, n) = (9, 11, 21);
        let (a, b) = (values(m * k, 4), values(k * n, 5));
        let mut c = values(m * n, 6);
        let want = reference(Some(&c[..]), &a, &b, m, k, n);
        let p = c.as_mut_ptr();
        // SAFETY: dst is c (allowed); a and b are separate.
        unsafe {
            gemm::<f32>(
                p,
                p,
                a.as_ptr(),
                b.as_ptr(),
                m as u64,
                k as u64,
                n as u64,
                k as u64,
                n as u64,
                0,
            )
        };
        assert_eq!(
            c.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn no_accumulator_starts_from_negative_zero() {
        // -0.0 + (-0.0) stays -0.0: the identity is the evaluator's, not +0.0.
        let (a, b) = ([-0.0f32], [1.0f32]);
        let mut dst = [7.0f32];
        // SAFETY: 1x1x1.
        unsafe {
            gemm::<f32>(
                dst.as_mut_ptr(),
                std::ptr::null(),
                a.as_ptr(),
                b.as_ptr(),
                1,
                1,
                1,
                1,
                1,
                0,
            )
        };
        assert_eq!(dst[0].to_bits(), (-0.0f32).to_bits());
    }
}
