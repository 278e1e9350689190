//! FP8 GEMM-ReduceScatter: `C = A x B` with `A` and `B` in an 8-bit float and OCP MX block
//! scales (one `e8m0` per 32 elements along K), the inner dimension split across ranks, and the
//! `f32` partial products reduce-scattered so that rank `r` ends with rows `r * M ..` of `C`.
//!
//! Rank `r` holds columns `r * KP ..` of `A` (`[P * M, KP]`, scales `[P * M, KP / 32]`) and
//! the same rows of `B` (`[KP, N]`, scales `[KP / 32, N]`). One launch, on every rank:
//!
//! 1. **partial**: `matmul_mx` of each `BT x BT` block of its share, stored into its send
//!    window (`[P * M, N]` f32);
//! 2. **reduce-scatter**: the built-in `reduce_scatter(Sum)`: rank `r` gets row block `r` of
//!    the sum of every rank's partial, added in rank order `((p_0 + p_1) + p_2) + ...`.
//!
//! `--mode e4m3` (default) holds `A` and `B` as `f8e4m3`, `--mode e5m2` as `f8e5m2`. The host
//! quantizes seeded `f32` matrices the OCP MX way (`quantize`: each block's scale is
//! `2^(floor(log2(amax)) - emax)`, each element `x / scale` rounded to nearest even), so the
//! inputs are what an FP8 training or inference stack would hand over.
//!
//! Orders (the golden's): each element of a partial is `matmul_mx`'s: every FP8 element widened
//! and multiplied by its block's scale (exact), then `matmul`'s order (from `-0.0` over ascending
//! `k`, each product and sum rounded to `f32`); the partials are added in rank order. Data flow:
//! `docs/apps/fp8_gemm_rs.md`.
//!
//! `cargo run --example fp8_gemm_rs -- -d 0,1,2,3 --mode e5m2`
use eagle::prelude::*;
use eagle::Float8;

/// Rows of `C` per rank.
pub const M: usize = 64;
/// Columns of `A` (rows of `B`) per rank.
pub const KP: usize = 64;
/// The MX block along K.
pub const MX: usize = 32;
/// Scale blocks per rank along K.
pub const KB: usize = KP / MX;
/// Columns of `B` and `C`.
pub const N: usize = 128;
/// Tile edge of the rows and columns of a block product.
pub const BT: usize = 32;
const NR: Dim = dynamic!("NR");

/// Defines the per-device program `$dev` and the host `$host` for the element dtype `$f`.
macro_rules! fp8_gemm_rs_program {
    ($dev:ident, $host:ident, $f:ident) => {
        /// Per-device program: the MX partial of every row block, then the reduce-scatter.
        #[eagle::kernel(device)]
        pub fn $dev(
            ctx: Ctx,
            a: Tensor<$f, { NR * M }, KP>,
            sa: Tensor<e8m0, { NR * M }, KB>,
            b: Tensor<$f, KP, N>,
            sb: Tensor<e8m0, KB, N>,
            c: Out<Tensor<f32, M, N>>,
            src: Window<f32, { NR * M }, N>,
            dst: Window<f32, { NR * M }, N>,
        ) {
            let me = rank(ctx);
            for i in 0..nranks(ctx) * M / BT {
                for j in 0..N / BT {
                    let part = matmul_mx(
                        load(a, [i * BT, 0], [BT, KP]),
                        load(sa, [i * BT, 0], [BT, KB]),
                        load(b, [0, j * BT], [KP, BT]),
                        load(sb, [0, j * BT], [KB, BT]),
                    );
                    store(src, [i * BT, j * BT], part);
                }
            }
            reduce_scatter(ctx, src, dst, Sum);
            get(c, me, subview(dst, me * M, M));
        }

        /// Host: rank `r` holds `a[r]`, `sa[r]` (its columns of `A` and their scales) and
        /// `b[r]`, `sb[r]` (the same rows of `B`).
        #[eagle::host]
        pub fn $host(
            a: Tensor<$f, NR, { NR * M }, KP>,
            sa: Tensor<e8m0, NR, { NR * M }, KB>,
            b: Tensor<$f, NR, KP, N>,
            sb: Tensor<e8m0, NR, KB, N>,
            c: Out<Tensor<f32, NR, M, N>>,
        ) {
            let src = alloc_window_buffer([NR * M, N], f32);
            let dst = alloc_window_buffer([NR * M, N], f32);
            for r in 0..world_size() {
                $dev(
                    a[r],
                    sa[r],
                    b[r],
                    sb[r],
                    c[r],
                    window(src, [NR * M, N], f32),
                    window(dst, [NR * M, N], f32),
                    device = r,
                );
            }
        }
    };
}
fp8_gemm_rs_program!(fp8_gemm_rs_e4m3_rank, fp8_gemm_rs_e4m3, f8e4m3);
fp8_gemm_rs_program!(fp8_gemm_rs_e5m2_rank, fp8_gemm_rs_e5m2, f8e5m2);

/// A matrix quantized the OCP MX way: elements and one scale per `MX` elements along K.
#[derive(Debug, Clone)]
pub struct Quantized<T> {
    /// The elements, in the matrix's layout.
    pub q: Vec<T>,
    /// The scales, `[rows, cols / MX]` for `A` (K along rows' columns), `[rows / MX, cols]`
    /// for `B` (K along the rows).
    pub s: Vec<e8m0>,
}

/// The largest exponent of a normal number of `T` and its largest finite value (`f8e4m3`:
/// 448 = 1.75 * 2^8; `f8e5m2`: 57,344 = 1.75 * 2^15).
fn limits<T: Float8>() -> (i32, f32) {
    if T::DTYPE == eagle::ir::DType::F8E4M3 {
        (8, 448.0)
    } else {
        (15, 57344.0)
    }
}

/// OCP MX quantization (OCP Microscaling Formats spec v1.0, section 6.3) of the
/// `rows x cols` matrix `x` with blocks of `MX` along K (`k_rows`: K runs down the rows, as in
/// `B`; else along a row, as in `A`): each block's scale is `2^(floor(log2(amax)) - emax)` and
/// each element `x / scale`, clamped to the largest finite value and rounded to nearest even
/// (the spec's saturating conversion: `amax / scale` can reach `2 * 2^emax`, past the largest
/// value; `saturating_cast` in a kernel); a block of zeros gets the scale `2^-127`.
pub fn quantize<T: Float8>(x: &[f32], rows: usize, cols: usize, k_rows: bool) -> Quantized<T> {
    let (br, bc) = if k_rows { (MX, 1) } else { (1, MX) };
    let (emax, largest) = limits::<T>();
    let (sr, sc) = (rows / br, cols / bc);
    let mut s = Vec::with_capacity(sr * sc);
    for i in 0..sr {
        for j in 0..sc {
            let amax = (0..br * bc)
                .map(|e| x[(i * br + e / bc) * cols + j * bc + e % bc].abs())
                .fold(0.0f32, f32::max);
            s.push(if amax == 0.0 {
                e8m0::from_exponent(-127)
            } else {
                e8m0::from_exponent(amax.log2().floor() as i32 - emax)
            });
        }
    }
    let q = (0..rows * cols)
        .map(|e| {
            let (i, j) = (e / cols, e % cols);
            let v = x[e] / s[(i / br) * sc + j / bc].to_f32();
            eagle::to_f8::<T>(v.clamp(-largest, largest))
        })
        .collect();
    Quantized { q, s }
}

/// The inputs of one launch at world size `p`: rank after rank, as the host takes them.
#[derive(Debug, Clone)]
pub struct Inputs<T> {
    /// `A`'s shares, `[P, P * M, KP]`, and their scales `[P, P * M, KB]`.
    pub a: Quantized<T>,
    /// `B`'s shares, `[P, KP, N]`, and their scales `[P, KB, N]`.
    pub b: Quantized<T>,
}

/// The seeded `f32` matrices before quantization: `A`'s shares `[P, P * M, KP]` (values in
/// `[-1, 1)`, each row scaled by a power of two from `2^-6` to `2^6` so the blocks' scales
/// differ) and `B`'s `[P, KP, N]`.
pub fn matrices(p: usize, seed: u64) -> (Tensor<f32>, Tensor<f32>) {
    let mut a = eagle_runner::random_tensor(&[p, p * M, KP], seed);
    for (i, row) in a.data_mut().chunks_mut(KP).enumerate() {
        let k = (i % 13) as i32 - 6;
        row.iter_mut().for_each(|v| *v *= 2f32.powi(k));
    }
    (a, eagle_runner::random_tensor(&[p, KP, N], seed + 1))
}

impl<T: Float8> Inputs<T> {
    /// [`matrices`], quantized.
    pub fn random(p: usize, seed: u64) -> Inputs<T> {
        let rows = p * M;
        let (a, b) = matrices(p, seed);
        let (mut qa, mut qb) = (
            Quantized {
                q: vec![],
                s: vec![],
            },
            Quantized {
                q: vec![],
                s: vec![],
            },
        );
        for r in 0..p {
            let x = quantize::<T>(
                &a.data()[r * rows * KP..(r + 1) * rows * KP],
                rows,
                KP,
                false,
            );
            qa.q.extend(x.q);
            qa.s.extend(x.s);
            let y = quantize::<T>(&b.data()[r * KP * N..(r + 1) * KP * N], KP, N, true);
            qb.q.extend(y.q);
            qb.s.extend(y.s);
        }
        Inputs { a: qa, b: qb }
    }
}

/// The launch of the mode's dtype: every rank's `C` rows, `[P, M, N]`.
///
/// # Errors
/// The launch's errors.
pub fn run_once<T: Float8>(s: &Session, inp: &Inputs<T>) -> eagle::Result<Tensor<f32>> {
    let p = s.world_size();
    let t = |v: &[T], shape: &[usize]| Tensor::from_vec(shape, v.to_vec());
    let u = |v: &[e8m0], shape: &[usize]| Tensor::from_vec(shape, v.to_vec());
    let a = t(&inp.a.q, &[p, p * M, KP])?;
    let sa = u(&inp.a.s, &[p, p * M, KB])?;
    let b = t(&inp.b.q, &[p, KP, N])?;
    let sb = u(&inp.b.s, &[p, KB, N])?;
    let mut c = Tensor::<f32>::zeros(&[p, M, N]);
    // One program per dtype: the launch takes typed tensors, so pick it by `T`'s dtype.
    match T::DTYPE {
        eagle::ir::DType::F8E4M3 => {
            fp8_gemm_rs_e4m3.launch(s, &cast(a), &sa, &cast(b), &sb, &mut c)?
        }
        _ => fp8_gemm_rs_e5m2.launch(s, &cast(a), &sa, &cast(b), &sb, &mut c)?,
    };
    Ok(c)
}

/// The same tensor as another 8-bit element type of the same dtype (a no-op re-typing: `run_once`
/// matches on `T::DTYPE` first).
fn cast<T: Float8, U: Float8>(t: Tensor<T>) -> Tensor<U> {
    let data = t.data().iter().map(|v| U::from_bits(v.to_bits())).collect();
    Tensor::from_vec(t.shape(), data).expect("same shape")
}

/// The golden `C` (`[P * M, N]`, row block `r` is rank `r`'s), in plain Rust in the documented
/// orders.
pub fn golden<T: Float8 + Copy>(p: usize, inp: &Inputs<T>, widen: fn(T) -> f32) -> Vec<f32> {
    let rows = p * M;
    let mut c = vec![0.0f32; rows * N];
    for r in 0..p {
        // Each element widened and multiplied by its block's scale (exact), once.
        let (a, sa) = (&inp.a.q[r * rows * KP..], &inp.a.s[r * rows * KB..]);
        let (b, sb) = (&inp.b.q[r * KP * N..], &inp.b.s[r * KB * N..]);
        let x: Vec<f32> = (0..rows * KP)
            .map(|e| widen(a[e]) * sa[(e / KP) * KB + e % KP / MX].to_f32())
            .collect();
        let y: Vec<f32> = (0..KP * N)
            .map(|e| widen(b[e]) * sb[(e / N / MX) * N + e % N].to_f32())
            .collect();
        for i in 0..rows {
            for j in 0..N {
                let mut acc = -0.0f32;
                for k in 0..KP {
                    acc += x[i * KP + k] * y[k * N + j];
                }
                c[i * N + j] = if r == 0 { acc } else { c[i * N + j] + acc };
            }
        }
    }
    c
}

/// Runs the mode on seeded inputs; every rank's `C` must equal its rows of the golden bit for
/// bit.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    if s.mode() == Some("e5m2") {
        let inp = Inputs::<f8e5m2>::random(p, 91);
        let c = run_once(s, &inp)?;
        eagle_runner::check_bits("C", c.data(), &golden(p, &inp, |v| v.to_f32()))
    } else {
        let inp = Inputs::<f8e4m3>::random(p, 91);
        let c = run_once(s, &inp)?;
        eagle_runner::check_bits("C", c.data(), &golden(p, &inp, |v| v.to_f32()))
    }
}

/// The program, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 32,
    name: "fp8_gemm_rs",
    modes: &["e4m3", "e5m2"],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
