//! The third instance of [`super::lanes`]: [`LANES`] values at once in plain arrays
//! ([`P32`], [`P64`]), each primitive a loop over the lanes of the scalar IEEE operation
//! (Rust's own, no contraction, `mul_add` one rounding), so it computes the reference
//! instance's bits lane by lane. Every method is `#[inline(always)]` (so are the library's
//! functions in optimized builds): a caller compiled with wider vector instructions enabled
//! (`#[target_feature(enable = "avx2,fma")]`, the CPU backend's math kernels in
//! `eagle-codegen`'s `back/cpu/math.rs`) gets the whole definition as straight-line vector code.

use super::lanes::{Bits, Float, Mask, Real, Single};
use std::ops::{Add, BitAnd, BitOr, BitXor, Div, Mul, Neg, Not, Shl, Shr, Sub};

/// The lanes of one packed value: 16 (two 256-bit vectors of `f32`, four of `f64`).
pub const LANES: usize = 16;

/// A packed mask: one `bool` a lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PMask(pub [bool; LANES]);
/// [`LANES`] `f32` lanes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct P32(pub [f32; LANES]);
/// [`LANES`] `f64` lanes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct P64(pub [f64; LANES]);
/// The bits of [`P32`]'s lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PU32(pub [u32; LANES]);
/// The bits of [`P64`]'s lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PU64(pub [u64; LANES]);

/// `[f(a[0], b[0]), f(a[1], b[1]), ...]`.
#[inline(always)]
fn zip<A: Copy, B: Copy, T>(a: [A; LANES], b: [B; LANES], f: impl Fn(A, B) -> T) -> [T; LANES] {
    std::array::from_fn(
        #[inline(always)]
        |i| f(a[i], b[i]),
    )
}

/// `[f(a[0]), f(a[1]), ...]`.
#[inline(always)]
fn map<A: Copy, T>(a: [A; LANES], f: impl Fn(A) -> T) -> [T; LANES] {
    std::array::from_fn(
        #[inline(always)]
        |i| f(a[i]),
    )
}

/// `m ? a : b` lane by lane.
#[inline(always)]
fn pick<T: Copy>(m: PMask, a: [T; LANES], b: [T; LANES]) -> [T; LANES] {
    std::array::from_fn(
        #[inline(always)]
        |i| if m.0[i] { a[i] } else { b[i] },
    )
}

impl BitAnd for PMask {
    type Output = PMask;
    #[inline(always)]
    fn bitand(self, o: PMask) -> PMask {
        PMask(zip(self.0, o.0, |x, y| x & y))
    }
}
impl BitOr for PMask {
    type Output = PMask;
    #[inline(always)]
    fn bitor(self, o: PMask) -> PMask {
        PMask(zip(self.0, o.0, |x, y| x | y))
    }
}
impl Not for PMask {
    type Output = PMask;
    #[inline(always)]
    fn not(self) -> PMask {
        PMask(map(self.0, |x| !x))
    }
}
impl Mask for PMask {
    type Cx = ();
    #[inline(always)]
    fn cx(self) {}
}

/// The packed bits `$w` of `$u` lanes: wrapping arithmetic, as the reference's.
macro_rules! packed_bits {
    ($w:ident, $u:ty) => {
        impl Add for $w {
            type Output = $w;
            #[inline(always)]
            fn add(self, o: $w) -> $w {
                $w(zip(self.0, o.0, <$u>::wrapping_add))
            }
        }
        impl Sub for $w {
            type Output = $w;
            #[inline(always)]
            fn sub(self, o: $w) -> $w {
                $w(zip(self.0, o.0, <$u>::wrapping_sub))
            }
        }
        impl BitAnd for $w {
            type Output = $w;
            #[inline(always)]
            fn bitand(self, o: $w) -> $w {
                $w(zip(self.0, o.0, |x, y| x & y))
            }
        }
        impl BitOr for $w {
            type Output = $w;
            #[inline(always)]
            fn bitor(self, o: $w) -> $w {
                $w(zip(self.0, o.0, |x, y| x | y))
            }
        }
        impl BitXor for $w {
            type Output = $w;
            #[inline(always)]
            fn bitxor(self, o: $w) -> $w {
                $w(zip(self.0, o.0, |x, y| x ^ y))
            }
        }
        impl Shl<u32> for $w {
            type Output = $w;
            #[inline(always)]
            fn shl(self, n: u32) -> $w {
                $w(map(self.0, |x| x.wrapping_shl(n)))
            }
        }
        impl Shr<u32> for $w {
            type Output = $w;
            #[inline(always)]
            fn shr(self, n: u32) -> $w {
                $w(map(self.0, |x| x.wrapping_shr(n)))
            }
        }
        impl Bits for $w {
            type Mask = PMask;
            type Cx = ();
            #[inline(always)]
            fn cx(self) {}
            #[inline(always)]
            fn lit(_: (), v: u64) -> $w {
                $w([v as $u; LANES])
            }
            #[inline(always)]
            fn eq(self, o: $w) -> PMask {
                PMask(zip(self.0, o.0, |x, y| x == y))
            }
            #[inline(always)]
            fn ult(self, o: $w) -> PMask {
                PMask(zip(self.0, o.0, |x, y| x < y))
            }
            #[inline(always)]
            fn select(m: PMask, a: $w, b: $w) -> $w {
                $w(pick(m, a.0, b.0))
            }
        }
    };
}
packed_bits!(PU32, u32);
packed_bits!(PU64, u64);

/// The packed float `$f` of `$e` lanes (bits `$w`): Rust's IEEE arithmetic lane by lane.
macro_rules! packed_float {
    ($f:ident, $e:ty, $w:ident, $mant:expr, $width:expr) => {
        impl Add for $f {
            type Output = $f;
            #[inline(always)]
            fn add(self, o: $f) -> $f {
                $f(zip(self.0, o.0, |x, y| x + y))
            }
        }
        impl Sub for $f {
            type Output = $f;
            #[inline(always)]
            fn sub(self, o: $f) -> $f {
                $f(zip(self.0, o.0, |x, y| x - y))
            }
        }
        impl Mul for $f {
            type Output = $f;
            #[inline(always)]
            fn mul(self, o: $f) -> $f {
                $f(zip(self.0, o.0, |x, y| x * y))
            }
        }
        impl Div for $f {
            type Output = $f;
            #[inline(always)]
            fn div(self, o: $f) -> $f {
                $f(zip(self.0, o.0, |x, y| x / y))
            }
        }
        impl Neg for $f {
            type Output = $f;
            #[inline(always)]
            fn neg(self) -> $f {
                $f(map(self.0, |x| -x))
            }
        }
        impl Float for $f {
            const MANT: u32 = $mant;
            const WIDTH: u32 = $width;
            type Mask = PMask;
            type Bits = $w;
            type Cx = ();
            #[inline(always)]
            fn cx(self) {}
            #[inline(always)]
            fn lit(_: (), v: f64) -> $f {
                $f([v as $e; LANES])
            }
            #[inline(always)]
            fn sqrt(self) -> $f {
                $f(map(self.0, <$e>::sqrt))
            }
            #[inline(always)]
            fn mul_add(self, b: $f, c: $f) -> $f {
                let (a, b, c) = (self.0, b.0, c.0);
                $f(std::array::from_fn(
                    #[inline(always)]
                    |i| a[i].mul_add(b[i], c[i]),
                ))
            }
            #[inline(always)]
            fn abs(self) -> $f {
                $f(map(self.0, <$e>::abs))
            }
            #[inline(always)]
            fn lt(self, o: $f) -> PMask {
                PMask(zip(self.0, o.0, |x, y| x < y))
            }
            #[inline(always)]
            fn le(self, o: $f) -> PMask {
                PMask(zip(self.0, o.0, |x, y| x <= y))
            }
            #[inline(always)]
            fn eq(self, o: $f) -> PMask {
                PMask(zip(self.0, o.0, |x, y| x == y))
            }
            #[inline(always)]
            fn select(m: PMask, a: $f, b: $f) -> $f {
                $f(pick(m, a.0, b.0))
            }
            #[inline(always)]
            fn to_bits(self) -> $w {
                $w(map(self.0, <$e>::to_bits))
            }
            #[inline(always)]
            fn from_bits(b: $w) -> $f {
                $f(map(b.0, <$e>::from_bits))
            }
            /// Runs `f` when a lane of `m` holds: the group of [`LANES`] is the unit skipped.
            #[inline(always)]
            fn if_any(m: PMask, f: impl FnOnce() -> $f, otherwise: $f) -> $f {
                if m.0.iter().any(|&b| b) {
                    f()
                } else {
                    otherwise
                }
            }
        }
    };
}
packed_float!(P32, f32, PU32, 23, 32);
packed_float!(P64, f64, PU64, 52, 64);

impl Real for P64 {}

impl Single for P32 {
    type Wide = P64;
    #[inline(always)]
    fn widen(self) -> P64 {
        P64(map(self.0, f64::from))
    }
    #[inline(always)]
    fn narrow(w: P64) -> P32 {
        P32(map(w.0, |x| x as f32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::MathFn;

    /// Every function of the library on packed lanes gives the reference's bits lane by lane,
    /// `f32` and `f64`, on edge values and a random spread (the CPU backend's kernels compile
    /// this same code with vector instructions enabled; `tests/math.rs` checks them).
    #[test]
    fn packed_lanes_give_the_reference_bits() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let edges = [
            0.0, -0.0, 1.0, -1.0, 0.5, 1e-40, -1e-310, 3.0e38, 700.0, -745.5,
        ];
        for f in MathFn::ALL {
            for round in 0..8 {
                let v = |k: usize, r: &mut dyn FnMut() -> u64| -> f64 {
                    if round == 0 && k < edges.len() {
                        edges[k]
                    } else {
                        let b = r();
                        // Mostly moderate arguments, some of any exponent.
                        if b.is_multiple_of(4) {
                            f64::from_bits(b)
                        } else {
                            (b >> 11) as f64 / (1u64 << 53) as f64 * 40.0 - 20.0
                        }
                    }
                };
                let args: Vec<[f64; LANES]> = (0..f.arity())
                    .map(|_| std::array::from_fn(|k| v(k, &mut next)))
                    .collect();
                let p64: Vec<P64> = args.iter().map(|a| P64(*a)).collect();
                let got = f.apply(&p64);
                let p32: Vec<P32> = args.iter().map(|a| P32(a.map(|x| x as f32))).collect();
                let got32 = f.apply_packed_f32(&p32);
                for k in 0..LANES {
                    let a: Vec<f64> = args.iter().map(|a| a[k]).collect();
                    let want = f.eval_f64(&a);
                    assert!(
                        got.0[k].to_bits() == want.to_bits()
                            || (got.0[k].is_nan() && want.is_nan()),
                        "{}({a:?}): packed {} reference {}",
                        f.name(),
                        got.0[k],
                        want
                    );
                    let a32: Vec<f32> = a.iter().map(|&x| x as f32).collect();
                    let want32 = f.eval_f32(&a32);
                    assert!(
                        got32.0[k].to_bits() == want32.to_bits()
                            || (got32.0[k].is_nan() && want32.is_nan()),
                        "{}({a32:?}) in f32: packed {} reference {}",
                        f.name(),
                        got32.0[k],
                        want32
                    );
                }
            }
        }
    }
}
