//! The math library on tiles of the CPU backend: rustc-compiled kernels, called from the JIT
//! code for each `f32`/`f64` tile math op (`exp`, `tanh`, `sin`, ...) that specialization
//! leaves unexpanded ([`eagle_ir::expand::packed_kernel_op`]).
//!
//! **The same bits.** A kernel runs the function's one definition (`eagle_ir::math`, through
//! [`MathFn::with_f32_definition`] / [`MathFn::with_f64_definition`]) on
//! [`eagle_ir::math::packed`] lanes: [`LANES`] elements at a time, each primitive the scalar
//! IEEE operation lane by lane, so every element gets the evaluator's bits
//! (`math::packed::tests`, `tests/math.rs`). Cranelift emits 16-byte vectors only; these
//! loops are compiled a second time with 32-byte vectors and FMA enabled where the CPU has
//! them (chosen once per process), which changes the speed, never a bit: Rust neither
//! contracts nor reassociates float arithmetic, and `fma` appears only where the definition
//! says so.
//!
//! **Tails.** A tile whose length is not a multiple of [`LANES`] runs its last group through a
//! buffer padded with copies of its last element (each lane is computed alone, so padding
//! never changes a kept element).

use eagle_ir::math::packed::{LANES, P32, P64};
use eagle_ir::math::{MathFn, RunDefinition};
use eagle_ir::DType;

/// The symbol of the `f32` kernel ([`math_f32`]) in the JIT module.
pub(super) const F32: &str = "eagle_math_f32";
/// The symbol of the `f64` kernel in the JIT module.
pub(super) const F64: &str = "eagle_math_f64";

/// The math kernels: dtype, symbol in the JIT module, address (for the JIT's symbol table).
pub(super) fn symbols() -> [(DType, &'static str, *const u8); 2] {
    [
        (DType::F32, F32, math_f32 as *const u8),
        (DType::F64, F64, math_f64 as *const u8),
    ]
}

/// The symbol of the kernel for dtype `d`, if it has one.
pub(super) fn entry(d: DType) -> Option<&'static str> {
    symbols()
        .into_iter()
        .find(|(t, _, _)| *t == d)
        .map(|(_, name, _)| name)
}

/// The code the JIT passes for `m`: its index in [`MathFn::ALL`].
pub(super) fn code(m: MathFn) -> i64 {
    MathFn::ALL.iter().position(|&f| f == m).unwrap_or(0) as i64
}

/// One kernel run: `dst[i] = f(a[i], b[i])` (`b` read only by binary functions) for `n`
/// elements, `P` the packed lane.
struct Run<T> {
    dst: *mut T,
    args: [*const T; 2],
    arity: usize,
    n: usize,
}

/// The packed lane of an element type.
trait Packed: Copy {
    /// Its packed lane.
    type P: Copy;
    /// Lanes from `LANES` elements.
    fn load(p: *const Self) -> Self::P;
    /// The lanes into `LANES` elements.
    fn store(v: Self::P, p: *mut Self);
}

macro_rules! packed {
    ($t:ty, $p:ident) => {
        impl Packed for $t {
            type P = $p;
            #[inline(always)]
            fn load(p: *const $t) -> $p {
                // SAFETY: the caller's `p` points at `LANES` readable elements.
                $p(unsafe { std::ptr::read_unaligned(p as *const [$t; LANES]) })
            }
            #[inline(always)]
            fn store(v: $p, p: *mut $t) {
                // SAFETY: the caller's `p` points at `LANES` writable elements.
                unsafe { std::ptr::write_unaligned(p as *mut [$t; LANES], v.0) }
            }
        }
    };
}
packed!(f32, P32);
packed!(f64, P64);

impl<T: Packed> RunDefinition<T::P> for Run<T> {
    type Out = ();
    #[inline(always)]
    fn run(self, def: impl Fn(&[T::P]) -> T::P) {
        let whole = self.n / LANES * LANES;
        let arity = self.arity;
        let mut i = 0;
        while i < whole {
            // SAFETY: `i + LANES <= n`: in bounds of every operand and of `dst`.
            unsafe {
                let src = self.args.map(|a| a.add(i));
                group(&def, arity, src, self.dst.add(i));
            }
            i += LANES;
        }
        if i < self.n {
            let rest = self.n - i;
            let mut bufs = [[std::mem::MaybeUninit::<T>::uninit(); LANES]; 2];
            let mut out = [std::mem::MaybeUninit::<T>::uninit(); LANES];
            for (buf, a) in bufs.iter_mut().zip(self.args) {
                for (k, slot) in buf.iter_mut().enumerate() {
                    // SAFETY: `i + min(k, rest - 1) < n`.
                    slot.write(unsafe { *a.add(i + k.min(rest - 1)) });
                }
            }
            let src = bufs.each_ref().map(|b| b.as_ptr() as *const T);
            group(&def, arity, src, out.as_mut_ptr() as *mut T);
            for (k, v) in out.iter().take(rest).enumerate() {
                // SAFETY: `i + k < n`; `out` was written whole by `group`.
                unsafe { *self.dst.add(i + k) = v.assume_init() };
            }
        }
    }
}

/// `dst[..LANES] = def(src[0][..LANES], src[1][..LANES])` (the first `arity` operands).
#[inline(always)]
fn group<T: Packed>(def: &impl Fn(&[T::P]) -> T::P, arity: usize, src: [*const T; 2], dst: *mut T) {
    let ops = [T::load(src[0]), T::load(src[1])];
    T::store(def(&ops[..arity]), dst);
}

/// Runs `m` over `run` with `f32` (`WIDE = false`) or `f64` definitions, inlined into the
/// caller (so its target features apply).
macro_rules! dispatch {
    (f32, $m:expr, $run:expr) => {
        $m.with_f32_definition::<P32, _>($run)
    };
    (f64, $m:expr, $run:expr) => {
        $m.with_f64_definition::<P64, _>($run)
    };
}

/// The kernel for element type `$t` (`$k`: `f32` or `f64`), with its 32-byte-vector variant.
macro_rules! kernel {
    ($name:ident, $t:ty, $k:tt, $avx2:ident, $portable:ident) => {
        /// The kernel compiled for AVX2 and FMA (x86-64 CPUs from 2013 on).
        ///
        /// # Safety
        /// The CPU has AVX2 and FMA; `run`'s pointers are valid for `run.n` elements.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn $avx2(m: MathFn, run: Run<$t>) {
            dispatch!($k, m, run)
        }

        /// The kernel for the baseline target (any CPU; `fma` through libm where the CPU
        /// has none: the same bits, slower).
        fn $portable(m: MathFn, run: Run<$t>) {
            dispatch!($k, m, run)
        }

        /// `dst[i] = f(a[i], b[i])` for `i < n`, `f` the function [`MathFn::ALL`]`[code]`
        /// (`b` unread, and may be null, for a unary one).
        ///
        /// # Safety
        /// `dst`, `a` (and `b` for a binary function) are valid for `n` elements; `dst` may be
        /// `a` or `b` (each group is read before it is written) but does not overlap them
        /// otherwise. `code` is an index of [`MathFn::ALL`] (the JIT passes [`code`]'s).
        unsafe extern "C" fn $name(code: u64, dst: *mut $t, a: *const $t, b: *const $t, n: u64) {
            let Some(&m) = MathFn::ALL.get(code as usize) else {
                return;
            };
            let arity = m.arity();
            let run = Run {
                dst,
                args: [a, if arity > 1 { b } else { a }],
                arity,
                n: n as usize,
            };
            #[cfg(target_arch = "x86_64")]
            if avx2_fma() {
                // SAFETY: the CPU has AVX2 and FMA; the caller's pointers are valid.
                return unsafe { $avx2(m, run) };
            }
            $portable(m, run)
        }
    };
}

kernel!(math_f32, f32, f32, math_f32_avx2, math_f32_portable);
kernel!(math_f64, f64, f64, math_f64_avx2, math_f64_portable);

/// Whether this CPU runs the AVX2 + FMA kernels (detected once per process).
#[cfg(target_arch = "x86_64")]
fn avx2_fma() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The operands: special values, subnormals, huge arguments (Payne-Hanek for `sin`) and
    /// moderate ones, 70 of each.
    fn operands() -> (Vec<f64>, Vec<f64>) {
        let special = [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            1e-40,
            -5e-324,
            1e30,
            -3e38,
            1e22,
            1.6e6,
            -0.5,
            1.0,
            2.0,
        ];
        let xs: Vec<f64> = special
            .iter()
            .copied()
            .chain((0..56).map(|i| (i as f64 - 27.5) * 0.37))
            .collect();
        let ys: Vec<f64> = (0..70)
            .map(|i| {
                if i % 5 == 0 {
                    special[(i / 5) % special.len()]
                } else {
                    2.0 - i as f64 * 0.05
                }
            })
            .collect();
        (xs, ys)
    }

    /// Both variants this CPU runs (the portable one always), by name.
    #[allow(clippy::type_complexity)]
    fn variants() -> Vec<(&'static str, fn(MathFn, Run<f32>), fn(MathFn, Run<f64>))> {
        let mut v: Vec<(&'static str, fn(MathFn, Run<f32>), fn(MathFn, Run<f64>))> =
            vec![("portable", math_f32_portable, math_f64_portable)];
        #[cfg(target_arch = "x86_64")]
        if avx2_fma() {
            // SAFETY (of the calls below): the CPU has AVX2 and FMA, checked here.
            v.push((
                "avx2",
                |m, r| unsafe { math_f32_avx2(m, r) },
                |m, r| unsafe { math_f64_avx2(m, r) },
            ));
        }
        v
    }

    /// Every function, both dtypes, both variants, on lengths around the group size (tails
    /// through the padded buffer), special values among the operands, `dst` the operand itself:
    /// the evaluator's bits, element by element (NaN where it gives NaN).
    #[test]
    fn kernels_give_the_evaluators_bits_with_tails_and_in_place() {
        let (xs, ys) = operands();
        let same32 = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        let same64 = |a: f64, b: f64| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        for (name, k32, k64) in variants() {
            for f in MathFn::ALL {
                let arity = f.arity();
                for n in [1usize, 15, 16, 17, 33, 70] {
                    // In place: `dst` is `a`, in both dtypes.
                    let mut d32: Vec<f32> = xs[..n].iter().map(|&v| v as f32).collect();
                    let b32: Vec<f32> = ys[..n].iter().map(|&v| v as f32).collect();
                    let p = d32.as_mut_ptr();
                    k32(
                        f,
                        Run {
                            dst: p,
                            args: [p.cast_const(), b32.as_ptr()],
                            arity,
                            n,
                        },
                    );
                    let mut d64 = xs[..n].to_vec();
                    let p = d64.as_mut_ptr();
                    k64(
                        f,
                        Run {
                            dst: p,
                            args: [p.cast_const(), ys.as_ptr()],
                            arity,
                            n,
                        },
                    );
                    for i in 0..n {
                        let a64 = [xs[i], ys[i]];
                        let w64 = f.eval_f64(&a64[..arity]);
                        assert!(
                            same64(d64[i], w64),
                            "{name} {}({:?}) f64: {} vs {w64}",
                            f.name(),
                            &a64[..arity],
                            d64[i]
                        );
                        let a32 = [xs[i] as f32, ys[i] as f32];
                        let w32 = f.eval_f32(&a32[..arity]);
                        assert!(
                            same32(d32[i], w32),
                            "{name} {}({:?}) f32: {} vs {w32}",
                            f.name(),
                            &a32[..arity],
                            d32[i]
                        );
                    }
                }
            }
        }
    }

    /// The symbols the JIT calls run the same kernels (one call each way, with a null `b`).
    #[test]
    fn the_exported_symbols_dispatch_by_code() {
        let x = [0.5f32, -2.0, 3.0];
        let mut y = [0f32; 3];
        // SAFETY: three elements each; a unary function leaves `b` unread.
        unsafe {
            math_f32(
                code(MathFn::Tanh) as u64,
                y.as_mut_ptr(),
                x.as_ptr(),
                std::ptr::null(),
                3,
            )
        };
        for (v, w) in x.iter().zip(y) {
            assert_eq!(w.to_bits(), MathFn::Tanh.eval_f32(&[*v]).to_bits());
        }
        let (a, b) = ([2.0f64, 9.0], [10.0f64, 0.5]);
        let mut z = [0f64; 2];
        // SAFETY: two elements each.
        unsafe {
            math_f64(
                code(MathFn::Powf) as u64,
                z.as_mut_ptr(),
                a.as_ptr(),
                b.as_ptr(),
                2,
            )
        };
        assert_eq!(z, [1024.0, 3.0]);
    }
}
