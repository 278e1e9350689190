//! The compound rules and fixed orders every backend computes the same way, each written once
//! over an [`Emitter`] and instantiated by the evaluator (values), the Cranelift backend (SSA
//! values) and the C emitter (expressions), as the math library is over `math::lanes::Real`:
//! - [`fmin`]/[`fmax`]: float `min`/`max` (IEEE 754-2019 `minimum`/`maximum` with the canonical
//!   NaN);
//! - [`arg_better`]: whether an argmax (argmin) scan takes a new element;
//! - [`lane_tree`]: the tree that combines a reduction's 8 lane partials
//!   ([`crate::tile::reduce_order`]);
//! - [`float_to_int`]: a float `as` an integer dtype (Rust's saturating `as`: NaN to 0);
//! - [`idiv`]/[`irem`]: integer `/` and `%` past the zero check (a signed `MIN / -1` wraps to
//!   `MIN`, `MIN % -1` is 0, as Rust's `wrapping_div`/`wrapping_rem`; no backend traps on it);
//! - [`shift`]: `<<` and `>>` (the amount modulo the width);
//! - [`dot`]: one element of a matmul (ascending `k`, each product rounded, then each sum),
//!   over a [`DotEmitter`].
//!
//! Compares and `select` need no rule here: each is one instruction on every backend (an
//! ordered IEEE compare, or the integer compare of the dtype's signedness), which
//! `tests/eval_diff.rs` checks against the evaluator like the rest.
//!
//! `tests/eval_diff.rs` and `tests/tile_diff.rs` check that each backend's instance gives the
//! evaluator's bits.

use crate::ir::ArgOp;
use crate::DType;

/// The bits of the NaN that every float `min`/`max` returns when an operand is NaN: the
/// positive quiet NaN with an empty payload (`f32::NAN`). Every backend (the folder, the host
/// interpreter, the CPU JIT, the CUDA C prelude), every collective mode and the mapreduce fold
/// return these bits, so NaN results agree bit for bit (see `docs/collectives.md`).
pub const CANONICAL_NAN_F32: u32 = 0x7fc0_0000;
/// The `f64` canonical NaN (`f64::NAN`); see [`CANONICAL_NAN_F32`].
pub const CANONICAL_NAN_F64: u64 = 0x7ff8_0000_0000_0000;

/// The primitives the rules below are written in, on values of one dtype (its signedness and
/// float-ness are the emitter's). `V` is a value, `M` a truth value.
pub trait Emitter {
    /// A value of the element dtype: a number, an SSA value, a C expression.
    type V: Clone;
    /// A truth value.
    type M: Clone;
    /// `x` is a NaN (never, for an integer dtype).
    fn is_nan(&mut self, x: &Self::V) -> Self::M;
    /// `a < b`, ordered (false when either is a NaN); signed or unsigned as the dtype is.
    fn lt(&mut self, a: &Self::V, b: &Self::V) -> Self::M;
    /// `a == b` as numbers (`-0.0 == +0.0`).
    fn eq(&mut self, a: &Self::V, b: &Self::V) -> Self::M;
    /// A float's sign bit is set (`-0.0`, negative numbers, NaNs with the bit set).
    fn sign_bit(&mut self, x: &Self::V) -> Self::M;
    /// `a && b`.
    fn and(&mut self, a: Self::M, b: Self::M) -> Self::M;
    /// `a || b`.
    fn or(&mut self, a: Self::M, b: Self::M) -> Self::M;
    /// `!a`.
    fn not(&mut self, a: Self::M) -> Self::M;
    /// `m ? a : b`.
    fn select(&mut self, m: Self::M, a: Self::V, b: Self::V) -> Self::V;
    /// The canonical NaN of the dtype ([`CANONICAL_NAN_F32`]/[`CANONICAL_NAN_F64`]).
    fn canonical_nan(&mut self) -> Self::V;
}

/// The integer primitives the division rules are written in, on values of one integer dtype.
pub trait IntEmitter: Emitter {
    /// The dtype is signed.
    fn signed(&self) -> bool;
    /// The constant `k` of the dtype.
    fn int(&mut self, k: i64) -> Self::V;
    /// `-x`, wrapping (`0 - x` in the dtype's width).
    fn neg(&mut self, x: &Self::V) -> Self::V;
    /// The truncating quotient `a / b`, for a divisor that is neither 0 nor, signed, -1 (the
    /// machine instruction, which traps or is undefined on those).
    fn div(&mut self, a: &Self::V, b: &Self::V) -> Self::V;
    /// The remainder `a % b` with the sign of `a`, under [`IntEmitter::div`]'s condition.
    fn rem(&mut self, a: &Self::V, b: &Self::V) -> Self::V;
}

/// Integer `a / b` for a non-zero `b` (the zero check, a trap, is the caller's): truncating;
/// signed `a / -1` is `-a` wrapping, so `MIN / -1` is `MIN` (Rust's `wrapping_div`).
pub fn idiv<E: IntEmitter>(e: &mut E, a: &E::V, b: &E::V) -> E::V {
    if !e.signed() {
        return e.div(a, b);
    }
    let (m1, safe) = not_minus_one(e, b);
    let q = e.div(a, &safe);
    let n = e.neg(a);
    e.select(m1, n, q)
}

/// Integer `a % b` for a non-zero `b`: the sign of `a`; signed `a % -1` is 0, so `MIN % -1`
/// is 0 (Rust's `wrapping_rem`).
pub fn irem<E: IntEmitter>(e: &mut E, a: &E::V, b: &E::V) -> E::V {
    if !e.signed() {
        return e.rem(a, b);
    }
    let (m1, safe) = not_minus_one(e, b);
    let r = e.rem(a, &safe);
    let z = e.int(0);
    e.select(m1, z, r)
}

/// The shift primitives, by an amount already in `0..width` (the machine's shift, which
/// masks the amount or leaves a larger one undefined).
pub trait ShiftEmitter: IntEmitter {
    /// The dtype's width in bits.
    fn width(&self) -> u32;
    /// `a & b`.
    fn bit_and(&mut self, a: &Self::V, b: &Self::V) -> Self::V;
    /// `x << n` for `0 <= n < width`.
    fn shl_in_range(&mut self, x: &Self::V, n: &Self::V) -> Self::V;
    /// `x >> n` for `0 <= n < width`: arithmetic on a signed dtype, logical on an unsigned one.
    fn shr_in_range(&mut self, x: &Self::V, n: &Self::V) -> Self::V;
}

/// `x << n` (`left`) or `x >> n`: the amount taken modulo the width, that is its low bits
/// (a negative or oversized amount included: Rust's `wrapping_shl`/`wrapping_shr`); `>>` is
/// arithmetic on a signed dtype. (A storage dtype, `i8` or `u16`, is shifted in its compute
/// dtype after `crate::narrow` took the amount modulo the storage width.)
pub fn shift<E: ShiftEmitter>(e: &mut E, left: bool, x: &E::V, n: &E::V) -> E::V {
    let mask = e.int(i64::from(e.width() - 1));
    let n = e.bit_and(n, &mask);
    if left {
        e.shl_in_range(x, &n)
    } else {
        e.shr_in_range(x, &n)
    }
}

/// Whether `b` is -1, and `b` with -1 replaced by 1 (a divisor the instruction takes).
fn not_minus_one<E: IntEmitter>(e: &mut E, b: &E::V) -> (E::M, E::V) {
    let minus_one = e.int(-1);
    let m1 = e.eq(b, &minus_one);
    let one = e.int(1);
    let safe = e.select(m1.clone(), one, b.clone());
    (m1, safe)
}

/// The primitives of a float-to-integer conversion: float values `F` in, integer values `I`
/// of the target dtype out.
pub trait ConvEmitter {
    /// A float value (`f32` or `f64`).
    type F: Clone;
    /// An integer value of the target dtype.
    type I: Clone;
    /// A truth value.
    type M: Clone;
    /// `x` is a NaN.
    fn is_nan(&mut self, x: &Self::F) -> Self::M;
    /// `x <= k` (`k` exact in the float dtype).
    fn le(&mut self, x: &Self::F, k: f64) -> Self::M;
    /// `x >= k` (`k` exact in the float dtype).
    fn ge(&mut self, x: &Self::F, k: f64) -> Self::M;
    /// The integer `k` of the target dtype.
    fn int(&mut self, k: i128) -> Self::I;
    /// `x` truncated toward zero, for an `x` whose truncation the target dtype holds (the
    /// machine instruction, undefined or trapping otherwise).
    fn trunc(&mut self, x: &Self::F) -> Self::I;
    /// `m ? a : b`. [`float_to_int`] selects away [`ConvEmitter::trunc`] of a NaN or of a
    /// value out of range, so an instance either evaluates only the side taken (C's `?:`) or
    /// has a `trunc` that is defined everywhere (the evaluator's, Rust's `as`).
    fn select(&mut self, m: Self::M, a: Self::I, b: Self::I) -> Self::I;
}

/// Float `x as` the integer dtype `to`, as Rust's `as`: NaN is 0; a value at or below the
/// dtype's least is the least, at or above `2^bits` (unsigned) or `2^(bits - 1)` (signed) the
/// greatest; anything else truncates toward zero. `index` converts as Rust's `usize` does
/// (saturating at 0 and `2^64 - 1`, the bits then held as the signed 64-bit `index`), as the
/// CPU's `fcvt_to_uint_sat` and the C `eg_f2u64` do.
pub fn float_to_int<E: ConvEmitter>(e: &mut E, x: &E::F, to: crate::DType) -> E::I {
    let range = if to == crate::DType::Index {
        crate::DType::U64
    } else {
        to
    };
    let (min, max) = range.int_range().unwrap_or((0, 0));
    // `max + 1` as a float: a power of two, exact in `f32` and `f64`.
    let above = (max + 1) as f64;
    let nan = e.is_nan(x);
    let low = e.le(x, min as f64);
    let high = e.ge(x, above);
    let t = e.trunc(x);
    let greatest = e.int(max);
    let r = e.select(high, greatest, t);
    let least = e.int(min);
    let r = e.select(low, least, r);
    let zero = e.int(0);
    e.select(nan, zero, r)
}

/// Float `min`: the canonical NaN when either side is a NaN; otherwise the lesser, and `-0.0`
/// below `+0.0` (IEEE 754-2019 `minimum`).
pub fn fmin<E: Emitter>(e: &mut E, a: &E::V, b: &E::V) -> E::V {
    min_max(e, a, b, true)
}

/// Float `max`: the canonical NaN when either side is a NaN; otherwise the greater, and `+0.0`
/// above `-0.0` (IEEE 754-2019 `maximum`).
pub fn fmax<E: Emitter>(e: &mut E, a: &E::V, b: &E::V) -> E::V {
    min_max(e, a, b, false)
}

/// `nan(a) || nan(b) ? NaN : a <first> b ? a : b <first> a ? b : (sign(a) == min ? a : b)`,
/// where `<first>` is `<` for `min` and `>` for `max`.
fn min_max<E: Emitter>(e: &mut E, a: &E::V, b: &E::V, min: bool) -> E::V {
    let (na, nb) = (e.is_nan(a), e.is_nan(b));
    let nan = e.or(na, nb);
    let (a_first, b_first) = if min {
        (e.lt(a, b), e.lt(b, a))
    } else {
        (e.lt(b, a), e.lt(a, b))
    };
    // Equal numbers: the signed zero that `minimum` (`maximum`) takes.
    let sa = e.sign_bit(a);
    let zero = if min {
        e.select(sa, a.clone(), b.clone())
    } else {
        e.select(sa, b.clone(), a.clone())
    };
    let ordered = e.select(b_first, b.clone(), zero);
    let ordered = e.select(a_first, a.clone(), ordered);
    let q = e.canonical_nan();
    e.select(nan, q, ordered)
}

/// Whether `x` replaces the best-so-far `best` in an argmax (argmin) scan, which runs in
/// ascending index order and keeps the first best: for floats a NaN beats any number and
/// loses to an earlier NaN, greater (less) wins, and `+0.0` is above `-0.0`; for integers
/// greater (less) wins.
pub fn arg_better<E: Emitter>(e: &mut E, op: ArgOp, float: bool, x: &E::V, best: &E::V) -> E::M {
    let wins = match op {
        ArgOp::Max => e.lt(best, x),
        ArgOp::Min => e.lt(x, best),
    };
    if !float {
        return wins;
    }
    let (sx, sb) = (e.sign_bit(x), e.sign_bit(best));
    // Max: +0 beats -0 (x positive, best negative); min: the other way round.
    let zero_wins = match op {
        ArgOp::Max => {
            let px = e.not(sx);
            e.and(px, sb)
        }
        ArgOp::Min => {
            let pb = e.not(sb);
            e.and(sx, pb)
        }
    };
    let eq = e.eq(x, best);
    let tie = e.and(eq, zero_wins);
    let number = e.or(wins, tie);
    let xn = e.is_nan(x);
    let takes = e.or(xn, number);
    let bn = e.is_nan(best);
    let keeps_nan = e.not(bn);
    e.and(keeps_nan, takes)
}

/// Whether `a` sorts before `b` in the order of `sort`/`argsort`: ascending; for floats a NaN
/// after every number (NaNs equal to each other), and `-0.0` equal to `+0.0`. A stable sort
/// keeps equal elements in index order, so the result is one permutation on every backend.
pub fn sorts_before<E: Emitter>(e: &mut E, float: bool, a: &E::V, b: &E::V) -> E::M {
    let lt = e.lt(a, b);
    if !float {
        return lt;
    }
    let (an, bn) = (e.is_nan(a), e.is_nan(b));
    let number_a = e.not(an);
    let before_nan = e.and(number_a, bn);
    e.or(lt, before_nan)
}

/// Whether element `k` of a sequence precedes element `j` in its stable sort (`k_before_j`:
/// whether index `k` < index `j`): the elements that sort before `x_j`, and the equal ones at
/// lower indices. The count of such `k` is `j`'s position in the sorted sequence.
pub fn precedes<E: Emitter>(
    e: &mut E,
    float: bool,
    x_k: &E::V,
    x_j: &E::V,
    k_before_j: E::M,
) -> E::M {
    let k_first = sorts_before(e, float, x_k, x_j);
    let j_first = sorts_before(e, float, x_j, x_k);
    let not_j_first = e.not(j_first);
    // k < j: unless x_j sorts strictly first; k >= j: only if x_k sorts strictly first.
    let lower = e.and(k_before_j.clone(), not_j_first);
    let not_lower_index = e.not(k_before_j);
    let higher = e.and(not_lower_index, k_first);
    e.or(lower, higher)
}

/// The fixed tree over a reduction's 8 lane partials `l`:
/// `((l0 . l1) . (l2 . l3)) . ((l4 . l5) . (l6 . l7))`, combined by `f` in this order (`c01`,
/// `c23`, `c45`, `c67`, `c03`, `c47`, then the root); `f` gets `true` for the root.
///
/// # Errors
/// The first error of `f`.
pub fn lane_tree<T, Err>(
    l: [T; 8],
    mut f: impl FnMut(T, T, bool) -> Result<T, Err>,
) -> Result<T, Err> {
    let [l0, l1, l2, l3, l4, l5, l6, l7] = l;
    let c01 = f(l0, l1, false)?;
    let c23 = f(l2, l3, false)?;
    let c45 = f(l4, l5, false)?;
    let c67 = f(l6, l7, false)?;
    let c03 = f(c01, c23, false)?;
    let c47 = f(c45, c67, false)?;
    f(c03, c47, true)
}

/// A step of [`DotEmitter::ascending`]: the emitter and the index.
pub type DotStep<'s, E> =
    dyn FnMut(&mut E, <E as DotEmitter>::Ix) -> Result<(), <E as DotEmitter>::Err> + 's;
/// [`dot`]'s operands at an index: `(a[i][kk], b[kk][j])`.
pub type DotOperands<'s, E> = dyn FnMut(
        &mut E,
        &<E as DotEmitter>::Ix,
    ) -> Result<(<E as DotEmitter>::V, <E as DotEmitter>::V), <E as DotEmitter>::Err>
    + 's;

/// The primitives the matmul order ([`dot`]) is written in: values of one dtype `V`, an
/// accumulator `Acc` (a variable: a slot, an SSA variable, a C local), and a loop index `Ix`.
pub trait DotEmitter: Sized {
    /// A value of the element dtype.
    type V: Clone;
    /// A loop index over `k`.
    type Ix;
    /// An accumulator variable.
    type Acc;
    /// The emitter's error.
    type Err;
    /// The identity of `+` in dtype `d` ([`crate::tile::add_identity`]).
    fn identity(&mut self, d: DType) -> Self::V;
    /// A new accumulator holding `init`.
    fn acc(&mut self, d: DType, init: Self::V) -> Self::Acc;
    /// The accumulator's value.
    fn get(&mut self, acc: &Self::Acc) -> Self::V;
    /// Stores `v` in the accumulator.
    fn set(&mut self, acc: &Self::Acc, v: Self::V);
    /// `a * b` rounded to `d`, as the elementwise `*` computes it.
    ///
    /// # Errors
    /// The emitter's (an unsupported dtype).
    fn mul(&mut self, d: DType, a: &Self::V, b: &Self::V) -> Result<Self::V, Self::Err>;
    /// `a + b` rounded to `d`, as the elementwise `+` computes it.
    ///
    /// # Errors
    /// As [`DotEmitter::mul`].
    fn add(&mut self, d: DType, a: &Self::V, b: &Self::V) -> Result<Self::V, Self::Err>;
    /// Runs `step` for every index of `0..k` in ascending order (a loop, or the steps one
    /// after another).
    ///
    /// # Errors
    /// The first error of `step`.
    fn ascending(&mut self, k: u64, step: &mut DotStep<'_, Self>) -> Result<(), Self::Err>;
}

/// One element of `matmul`/`matmul_acc` (the matmul order): `c0 + a0 * b0 + a1 * b1 + ...`
/// over `k` in ascending order, each product rounded to `d`, then each sum (two roundings a
/// step, never a fused multiply-add); `c0` is the accumulator's element, or the identity of
/// `+` ([`crate::tile::add_identity`], so that `-0.0` products sum to `-0.0`). `operands`
/// gives `(a[i][kk], b[kk][j])` for the element's `i` and `j`. The evaluator, the Cranelift
/// backend's loop and the C emitter are its instances; the CPU's micro-kernels
/// (`back/cpu/gemm.rs`) run it with `j` (and `i`) across vector lanes and registers, `k`
/// never, and `tests/tile_diff.rs` holds them to the evaluator's bits.
///
/// # Errors
/// The emitter's.
pub fn dot<E: DotEmitter>(
    e: &mut E,
    d: DType,
    k: u64,
    c0: Option<E::V>,
    operands: &mut DotOperands<'_, E>,
) -> Result<E::V, E::Err> {
    let init = match c0 {
        Some(c) => c,
        None => e.identity(d),
    };
    let acc = e.acc(d, init);
    e.ascending(k, &mut |e, kk| {
        let (a, b) = operands(e, &kk)?;
        let p = e.mul(d, &a, &b)?;
        let c = e.get(&acc);
        let s = e.add(d, &c, &p)?;
        e.set(&acc, s);
        Ok(())
    })?;
    Ok(e.get(&acc))
}

/// The evaluator's instance: Rust values of one dtype.
pub struct Values<T>(std::marker::PhantomData<T>);

impl<T> Default for Values<T> {
    fn default() -> Self {
        Values(std::marker::PhantomData)
    }
}

/// `Emitter` for `Values<$t>`: the comparisons, truth values and select are Rust's; `$x` names
/// the value in the three rules that differ between floats and integers.
macro_rules! values {
    ($t:ty, |$x:ident| is_nan: $nan:expr, sign_bit: $sign:expr, canonical_nan: $canon:expr) => {
        impl Emitter for Values<$t> {
            type V = $t;
            type M = bool;
            fn is_nan(&mut self, $x: &$t) -> bool {
                $nan
            }
            fn lt(&mut self, a: &$t, b: &$t) -> bool {
                a < b
            }
            fn eq(&mut self, a: &$t, b: &$t) -> bool {
                a == b
            }
            fn sign_bit(&mut self, $x: &$t) -> bool {
                $sign
            }
            fn and(&mut self, a: bool, b: bool) -> bool {
                a && b
            }
            fn or(&mut self, a: bool, b: bool) -> bool {
                a || b
            }
            fn not(&mut self, a: bool) -> bool {
                !a
            }
            fn select(&mut self, m: bool, a: $t, b: $t) -> $t {
                if m {
                    a
                } else {
                    b
                }
            }
            fn canonical_nan(&mut self) -> $t {
                $canon
            }
        }
    };
}
values!(f32, |x| is_nan: x.is_nan(), sign_bit: x.is_sign_negative(), canonical_nan: f32::from_bits(CANONICAL_NAN_F32));
values!(f64, |x| is_nan: x.is_nan(), sign_bit: x.is_sign_negative(), canonical_nan: f64::from_bits(CANONICAL_NAN_F64));

macro_rules! int_values {
    ($($t:ty),*) => {$(
        values!($t, |x| is_nan: { let _ = x; false }, sign_bit: x.leading_zeros() == 0, canonical_nan: 0);
        impl IntEmitter for Values<$t> {
            fn signed(&self) -> bool {
                <$t>::MIN != 0
            }
            fn int(&mut self, k: i64) -> $t {
                k as $t
            }
            fn neg(&mut self, x: &$t) -> $t {
                x.wrapping_neg()
            }
            fn div(&mut self, a: &$t, b: &$t) -> $t {
                a / b
            }
            fn rem(&mut self, a: &$t, b: &$t) -> $t {
                a % b
            }
        }
        impl ShiftEmitter for Values<$t> {
            fn width(&self) -> u32 {
                <$t>::BITS
            }
            fn bit_and(&mut self, a: &$t, b: &$t) -> $t {
                a & b
            }
            fn shl_in_range(&mut self, x: &$t, n: &$t) -> $t {
                x << n
            }
            fn shr_in_range(&mut self, x: &$t, n: &$t) -> $t {
                x >> n
            }
        }
    )*};
}
int_values!(i8, u8, i16, u16, i32, u32, i64, u64);

/// [`shift`] on Rust integers (the evaluator's instance).
pub fn shift_values<T>(left: bool, x: T, n: T) -> T
where
    Values<T>: ShiftEmitter<V = T>,
{
    shift(&mut Values::<T>::default(), left, &x, &n)
}

/// [`idiv`] on Rust integers (the evaluator's instance).
pub fn idiv_values<T>(a: T, b: T) -> T
where
    Values<T>: IntEmitter<V = T>,
{
    idiv(&mut Values::<T>::default(), &a, &b)
}

/// [`irem`] on Rust integers (the evaluator's instance).
pub fn irem_values<T>(a: T, b: T) -> T
where
    Values<T>: IntEmitter<V = T>,
{
    irem(&mut Values::<T>::default(), &a, &b)
}

/// The evaluator's instance of [`ConvEmitter`]: an `f64` (an `f32` widens exactly) to the
/// integer value, held as `i128`.
pub struct Conv;

impl ConvEmitter for Conv {
    type F = f64;
    type I = i128;
    type M = bool;
    fn is_nan(&mut self, x: &f64) -> bool {
        x.is_nan()
    }
    fn le(&mut self, x: &f64, k: f64) -> bool {
        *x <= k
    }
    fn ge(&mut self, x: &f64, k: f64) -> bool {
        *x >= k
    }
    fn int(&mut self, k: i128) -> i128 {
        k
    }
    fn trunc(&mut self, x: &f64) -> i128 {
        x.trunc() as i128
    }
    fn select(&mut self, m: bool, a: i128, b: i128) -> i128 {
        if m {
            a
        } else {
            b
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The amount's low bits, as Rust's `wrapping_shl`/`wrapping_shr`, on every integer dtype.
    #[test]
    fn a_shift_takes_the_amount_modulo_the_width_as_rust_does() {
        for n in [-65i64, -1, 0, 1, 7, 8, 31, 32, 33, 63, 64, 65, 200] {
            macro_rules! check {
                ($($t:ty),*) => {$(
                    let (x, k) = (<$t>::MAX.wrapping_sub(5), n as $t);
                    assert_eq!(shift_values(true, x, k), x.wrapping_shl(k as u32), "{x} << {k}");
                    assert_eq!(shift_values(false, x, k), x.wrapping_shr(k as u32), "{x} >> {k}");
                    let m = <$t>::MIN.wrapping_add(3);
                    assert_eq!(shift_values(false, m, k), m.wrapping_shr(k as u32), "{m} >> {k}");
                )*};
            }
            check!(i8, u8, i16, u16, i32, u32, i64, u64);
        }
    }

    /// [`dot`]'s order, written out: the accumulator (or the identity) first, then one
    /// rounded product and one rounded sum per `k`, ascending.
    #[test]
    fn dot_sums_rounded_products_in_ascending_k() {
        struct Text(Vec<String>);
        impl DotEmitter for Text {
            type V = String;
            type Ix = u64;
            type Acc = usize;
            type Err = ();
            fn identity(&mut self, d: DType) -> String {
                format!("id_{d}")
            }
            fn acc(&mut self, _: DType, init: String) -> usize {
                self.0.push(init);
                self.0.len() - 1
            }
            fn get(&mut self, acc: &usize) -> String {
                self.0[*acc].clone()
            }
            fn set(&mut self, acc: &usize, v: String) {
                self.0[*acc] = v;
            }
            fn mul(&mut self, _: DType, a: &String, b: &String) -> Result<String, ()> {
                Ok(format!("r({a}*{b})"))
            }
            fn add(&mut self, _: DType, a: &String, b: &String) -> Result<String, ()> {
                Ok(format!("r({a}+{b})"))
            }
            fn ascending(&mut self, k: u64, step: &mut DotStep<'_, Self>) -> Result<(), ()> {
                (0..k).try_for_each(|kk| step(self, kk))
            }
        }
        let mut ops = |_: &mut Text, kk: &u64| Ok((format!("a{kk}"), format!("b{kk}")));
        let mut e = Text(vec![]);
        let with_c = dot(&mut e, DType::F32, 3, Some("c".into()), &mut ops);
        assert_eq!(
            with_c.as_deref(),
            Ok("r(r(r(c+r(a0*b0))+r(a1*b1))+r(a2*b2))")
        );
        let without = dot(&mut e, DType::F32, 2, None, &mut ops);
        assert_eq!(without.as_deref(), Ok("r(r(id_f32+r(a0*b0))+r(a1*b1))"));
        assert_eq!(
            dot(&mut e, DType::I32, 0, None, &mut ops).as_deref(),
            Ok("id_i32")
        );
    }

    #[test]
    fn min_max_take_the_signed_zero_and_the_canonical_nan() {
        let mut e = Values::<f32>::default();
        assert_eq!(fmin(&mut e, &0.0, &-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(fmin(&mut e, &-0.0, &0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(fmax(&mut e, &-0.0, &0.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(fmax(&mut e, &1.0, &2.5), 2.5);
        assert_eq!(fmin(&mut e, &1.0, &2.5), 1.0);
        let odd_nan = f32::from_bits(0xffc0_0001);
        assert_eq!(fmin(&mut e, &odd_nan, &1.0).to_bits(), 0x7fc0_0000);
        assert_eq!(fmax(&mut e, &1.0, &odd_nan).to_bits(), 0x7fc0_0000);
        let mut e = Values::<f64>::default();
        assert_eq!(
            fmax(&mut e, &f64::NAN, &1.0).to_bits(),
            0x7ff8_0000_0000_0000
        );
    }

    #[test]
    fn arg_scans_keep_the_first_best_and_order_signed_zeros() {
        let mut e = Values::<f64>::default();
        let better = |e: &mut Values<f64>, op, x: f64, b: f64| arg_better(e, op, true, &x, &b);
        assert!(better(&mut e, ArgOp::Max, 2.0, 1.0));
        assert!(!better(&mut e, ArgOp::Max, 1.0, 1.0));
        assert!(better(&mut e, ArgOp::Max, 0.0, -0.0));
        assert!(!better(&mut e, ArgOp::Max, -0.0, 0.0));
        assert!(better(&mut e, ArgOp::Min, -0.0, 0.0));
        assert!(better(&mut e, ArgOp::Min, f64::NAN, -1e300));
        assert!(!better(&mut e, ArgOp::Min, f64::NAN, f64::NAN));
        assert!(!better(&mut e, ArgOp::Max, 5.0, f64::NAN));
    }

    #[test]
    fn integer_division_wraps_at_minus_one_as_rust_does() {
        for (a, b) in [
            (i32::MIN, -1),
            (7, -1),
            (-7, 2),
            (7, -2),
            (i32::MIN, 3),
            (5, 5),
        ] {
            assert_eq!(idiv_values(a, b), a.wrapping_div(b), "{a} / {b}");
            assert_eq!(irem_values(a, b), a.wrapping_rem(b), "{a} % {b}");
        }
        assert_eq!(idiv_values(i64::MIN, -1), i64::MIN);
        assert_eq!(irem_values(i8::MIN, -1), 0);
        // Unsigned: -1 is the largest value, an ordinary divisor.
        assert_eq!(idiv_values(u32::MAX, u32::MAX), 1);
        assert_eq!(irem_values(7u64, 3), 1);
    }

    #[test]
    fn float_to_int_is_rusts_as() {
        use crate::DType;
        let xs = [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.9,
            -1.9,
            127.5,
            -128.5,
            255.9,
            256.0,
            2147483647.0,
            2147483647.5,
            2147483648.0,
            -2147483648.0,
            -2147483649.0,
            4294967295.0,
            4294967296.0,
            9.3e18,
            9223372036854775807.0,
            -9.3e18,
            1.9e19,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -f64::NAN,
            1e300,
        ];
        let conv = |x: f64, d| float_to_int(&mut Conv, &x, d);
        for x in xs {
            assert_eq!(conv(x, DType::I32), i128::from(x as i32), "{x} as i32");
            assert_eq!(conv(x, DType::U32), i128::from(x as u32), "{x} as u32");
            assert_eq!(conv(x, DType::I64), i128::from(x as i64), "{x} as i64");
            assert_eq!(conv(x, DType::U64), i128::from(x as u64), "{x} as u64");
            assert_eq!(conv(x, DType::I8), i128::from(x as i8), "{x} as i8");
            assert_eq!(conv(x, DType::U16), i128::from(x as u16), "{x} as u16");
            let f = x as f32;
            assert_eq!(
                conv(f64::from(f), DType::I32),
                i128::from(f as i32),
                "{f} as i32"
            );
            assert_eq!(
                conv(f64::from(f), DType::U64),
                i128::from(f as u64),
                "{f} as u64"
            );
        }
    }

    #[test]
    fn the_lane_tree_pairs_neighbours_then_halves() {
        let order = std::cell::RefCell::new(vec![]);
        let r: Result<String, ()> = lane_tree(
            ["0", "1", "2", "3", "4", "5", "6", "7"].map(String::from),
            |a, b, root| {
                order.borrow_mut().push(root);
                Ok(format!("({a}{b})"))
            },
        );
        assert_eq!(r.unwrap(), "(((01)(23))((45)(67)))");
        assert_eq!(
            order.into_inner(),
            [false, false, false, false, false, false, true]
        );
    }
}
