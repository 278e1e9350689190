//! `eagle-ulp`: the error of every function of eagle's math library (`eagle_ir::math`), in
//! ulps of the result, against MPFR correctly rounded at 192 bits; and its special values
//! against Rust std's.
//!
//! Usage: `cargo run --release --manifest-path tools/ulp/Cargo.toml -- [--n N] [--only NAME]`
//! (N inputs per function and dtype, default 1,000,000). Prints a Markdown table (the one in
//! `docs/language.md`) and exits 1 when a function exceeds 1 ulp anywhere or a special value
//! differs from std's.
//!
//! Inputs per function: the whole finite domain by random bits, log-uniform magnitudes over
//! every exponent (subnormals, near 0, near overflow) with both signs, uniform samples over the
//! function's main range, and fixed edge values (thresholds of overflow and underflow, ±1,
//! multiples of pi/2, ...). The `f32` path is measured on `f32` inputs (the same generators,
//! rounded) in `f32` ulps.

use eagle_ir::MathFn;
use rug::float::Round;
use rug::ops::Pow;
use rug::Float;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

const PREC: u32 = 192;

/// The error of `got` from `exact`, in ulps of the format with `mant` significand bits and
/// smallest subnormal exponent `emin_sub` (53 / -1074 for f64, 24 / -149 for f32); infinity
/// for a NaN or infinity mismatch.
fn ulp_err(got: f64, exact: &Float, mant: i32, emin_sub: i32, round: fn(&Float) -> f64) -> f64 {
    if exact.is_nan() {
        return if got.is_nan() { 0.0 } else { f64::INFINITY };
    }
    if got.is_nan() {
        return f64::INFINITY;
    }
    let want = round(exact);
    if want.is_infinite() {
        // The correctly rounded result overflows.
        return if got == want { 0.0 } else { f64::INFINITY };
    }
    if got.is_infinite() {
        return f64::INFINITY;
    }
    if exact.is_zero() {
        return if got == 0.0 { 0.0 } else { f64::INFINITY };
    }
    let e = exact.get_exp().unwrap_or(0);
    let ulp_exp = (e - mant).max(emin_sub);
    let diff = Float::with_val(PREC, Float::with_val(PREC, got) - exact);
    let q = Float::with_val(PREC, diff / Float::with_val(PREC, Float::i_exp(1, ulp_exp)));
    q.to_f64().abs()
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    fn any_finite(&mut self) -> f64 {
        loop {
            let x = f64::from_bits(self.next());
            if x.is_finite() {
                return x;
            }
        }
    }
    /// `±2^e` times a random significand, `e` uniform in `[lo, hi)`.
    fn log_uniform(&mut self, lo: f64, hi: f64) -> f64 {
        let x = self.uniform(lo, hi).exp2() * self.uniform(1.0, 2.0);
        if self.next() & 1 == 1 {
            -x
        } else {
            x
        }
    }
}

/// The main range of each function's argument (for the uniform samples).
fn main_range(f: MathFn) -> (f64, f64) {
    use MathFn::*;
    match f {
        Ln | Log2 | Log10 | Rsqrt | Cbrt => (0.0, 4.0),
        Log1p => (-1.0, 3.0),
        Exp | Expm1 | Sinh | Cosh => (-745.2, 709.8),
        Exp2 => (-1075.0, 1024.0),
        Sin | Cos | Tan => (-20.0, 20.0),
        Asin | Acos => (-1.0, 1.0),
        Atan | Tanh | Sigmoid | Erf | Atan2 | Hypot | Copysign => (-40.0, 40.0),
        Powf | Powi => (0.0, 8.0),
        Recip | Floor | Ceil | Round | Trunc => (-1e6, 1e6),
    }
}

/// Fixed edge arguments.
fn edges(f: MathFn) -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        5e-324,
        -5e-324,
        f64::MIN_POSITIVE,
        f64::MAX,
        -f64::MAX,
        1e-300,
        0.999_999_999_999_999_9,
        1.000_000_000_000_000_2,
        709.782_712_893_384,
        709.782_712_893_384_1,
        -745.133_219_101_941_1,
        -745.133_219_101_941_2,
        -708.396_418_532_264_1,
        88.722_839,
        -103.972_08,
        1023.999_999_999_999_9,
        -1074.0,
        -1075.0,
        6381956970095103.0 * 2f64.powi(797),
        1e22,
        22.0,
        0.844_25,
        6.0,
        19.0,
        710.475_860_073_943_9,
    ];
    for k in 1..200 {
        v.push(k as f64 * std::f64::consts::FRAC_PI_2);
        v.push(-(k as f64) * std::f64::consts::FRAC_PI_4);
    }
    if f == MathFn::Sigmoid {
        v.extend([36.7, 37.0, -745.0, -709.0]);
    }
    v
}

fn inputs(f: MathFn, n: usize, seed: u64) -> Vec<f64> {
    let mut r = Rng(seed | 1);
    let (lo, hi) = main_range(f);
    let mut v = edges(f);
    let q = n.saturating_sub(v.len()) / 4;
    v.extend((0..q).map(|_| r.any_finite()));
    v.extend((0..q).map(|_| r.log_uniform(-1080.0, 1024.0)));
    v.extend((0..q).map(|_| r.log_uniform(-60.0, 12.0)));
    while v.len() < n {
        v.push(r.uniform(lo, hi));
    }
    v
}

/// The second argument of a binary function for first argument `x`: for `powf`, exponents that
/// take `x^y` over the whole result range (and integers); for `atan2` and `hypot`, magnitudes
/// from far smaller to far larger.
fn second(f: MathFn, x: f64, r: &mut Rng) -> f64 {
    match f {
        MathFn::Powf => match r.next() % 4 {
            0 => r.any_finite(),
            1 => {
                // |y ln x| over [0, 760]: results from subnormal to overflow.
                let l = x.abs().ln();
                let t = r.uniform(-760.0, 760.0);
                if l == 0.0 || !l.is_finite() {
                    t
                } else {
                    t / l
                }
            }
            2 => (r.next() % 200) as f64 - 100.0,
            _ => r.uniform(-10.0, 10.0),
        },
        MathFn::Powi => ((r.next() % 600) as i64 - 300) as f64,
        _ => match r.next() % 3 {
            0 => r.any_finite(),
            1 => x * r.log_uniform(-60.0, 60.0),
            _ => r.uniform(-40.0, 40.0),
        },
    }
}

/// MPFR's value of `f` at `args` (exact inputs), correctly rounded at `PREC` bits.
fn reference(f: MathFn, a: &[f64]) -> Float {
    use MathFn::*;
    let x = Float::with_val(PREC, a[0]);
    let y = || Float::with_val(PREC, a[1]);
    match f {
        Ln => x.ln(),
        Log2 => x.log2(),
        Log10 => x.log10(),
        Log1p => x.ln_1p(),
        Exp => x.exp(),
        Exp2 => x.exp2(),
        Expm1 => x.exp_m1(),
        Sin => x.sin(),
        Cos => x.cos(),
        Tan => x.tan(),
        Asin => x.asin(),
        Acos => x.acos(),
        Atan => x.atan(),
        Atan2 => x.atan2(&y()),
        Sinh => x.sinh(),
        Cosh => x.cosh(),
        Tanh => x.tanh(),
        Sigmoid => {
            let e = Float::with_val(PREC, -x).exp();
            Float::with_val(PREC, Float::with_val(PREC, e + 1u32).recip())
        }
        Erf => x.erf(),
        Powf | Powi => {
            let y = y();
            // MPFR follows C99's pow special cases, as Rust does.
            Float::with_val(PREC, x.pow(&y))
        }
        Cbrt => x.cbrt(),
        Hypot => x.hypot(&y()),
        // `1 / sqrt(x)` (MPFR's `rec_sqrt` gives +inf at -0; eagle, like IEEE 754's rSqrt
        // and `1.0 / x.sqrt()`, gives -inf).
        Rsqrt => Float::with_val(PREC, x.sqrt()).recip(),
        Recip => x.recip(),
        Floor => x.floor(),
        Ceil => x.ceil(),
        Round => x.round(),
        Trunc => x.trunc(),
        Copysign => x.copysign(&y()),
    }
}

/// Rust std's value, for the functions std has.
fn std_value(f: MathFn, a: &[f64]) -> Option<f64> {
    use MathFn::*;
    let x = a[0];
    Some(match f {
        Ln => x.ln(),
        Log2 => x.log2(),
        Log10 => x.log10(),
        Log1p => x.ln_1p(),
        Exp => x.exp(),
        Exp2 => x.exp2(),
        Expm1 => x.exp_m1(),
        Sin => x.sin(),
        Cos => x.cos(),
        Tan => x.tan(),
        Asin => x.asin(),
        Acos => x.acos(),
        Atan => x.atan(),
        Atan2 => x.atan2(a[1]),
        Sinh => x.sinh(),
        Cosh => x.cosh(),
        Tanh => x.tanh(),
        Powf => x.powf(a[1]),
        Powi => x.powi(a[1] as i32),
        Cbrt => x.cbrt(),
        Hypot => x.hypot(a[1]),
        Recip => x.recip(),
        Floor => x.floor(),
        Ceil => x.ceil(),
        Round => x.round(),
        Trunc => x.trunc(),
        Copysign => x.copysign(a[1]),
        // A user's `1.0 / x.sqrt()` (so `rsqrt(-0) = -inf`, as IEEE 754's rSqrt; MPFR's
        // `rec_sqrt` gives +inf there).
        Rsqrt => 1.0 / x.sqrt(),
        Sigmoid | Erf => return None,
    })
}

const SPECIALS: [f64; 14] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    -0.5,
    2.0,
    -3.0,
    1e308,
    5e-324,
    -2.5,
];

/// Special values that differ from std's (NaN equals NaN; for the functions without a std
/// form, from MPFR's value rounded to f64, which follows C99).
fn special_mismatches(f: MathFn) -> Vec<String> {
    let mut out = vec![];
    let pairs: Vec<Vec<f64>> = if f.arity() == 1 {
        SPECIALS.iter().map(|&x| vec![x]).collect()
    } else {
        SPECIALS
            .iter()
            .flat_map(|&x| SPECIALS.iter().map(move |&y| vec![x, y]))
            // `powi`'s exponent is an `i32`.
            .map(|a| {
                if f == MathFn::Powi {
                    vec![a[0], a[1] as i32 as f64]
                } else {
                    a
                }
            })
            .collect()
    };
    for a in pairs {
        let got = f.eval_f64(&a);
        let want =
            std_value(f, &a).unwrap_or_else(|| reference(f, &a).to_f64_round(Round::Nearest));
        let ok = got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan());
        // std's finite non-special results are within an ulp, not bit-equal: compare only
        // where std's result is a special value or exact.
        let special = !want.is_finite() || want == 0.0 || want.abs() == 1.0 || want == want.trunc();
        if !ok && special {
            out.push(format!("{}({a:?}) = {got:?}, std {want:?}", f.name()));
        }
    }
    out
}

struct Row {
    f: MathFn,
    n: usize,
    max64: f64,
    at64: Vec<f64>,
    max32: f64,
    at32: Vec<f64>,
    specials: Vec<String>,
}

fn measure(f: MathFn, n: usize) -> Row {
    let seed = 0x9e37_79b9_7f4a_7c15 ^ (f as u64).wrapping_mul(0x2545_f491_4f6c_dd1d);
    let xs = inputs(f, n, seed);
    let mut r2 = Rng(seed.rotate_left(17) | 1);
    let (mut max64, mut at64, mut max32, mut at32) = (0.0f64, vec![], 0.0f64, vec![]);
    for &x in &xs {
        let a: Vec<f64> = if f.arity() == 2 {
            vec![x, second(f, x, &mut r2)]
        } else {
            vec![x]
        };
        let e = ulp_err(f.eval_f64(&a), &reference(f, &a), 53, -1074, |e| {
            e.to_f64_round(Round::Nearest)
        });
        if e > max64 {
            max64 = e;
            at64 = a.clone();
        }
        let a32: Vec<f32> = a.iter().map(|&v| v as f32).collect();
        let a32w: Vec<f64> = a32.iter().map(|&v| v as f64).collect();
        let e = ulp_err(
            f.eval_f32(&a32).into(),
            &reference(f, &a32w),
            24,
            -149,
            |e| e.to_f32_round(Round::Nearest).into(),
        );
        if e > max32 {
            max32 = e;
            at32 = a32w;
        }
    }
    Row {
        f,
        n: xs.len(),
        max64,
        at64,
        max32,
        at32,
        specials: special_mismatches(f),
    }
}

fn main() {
    let mut n = 1_000_000usize;
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--n" => n = args.next().and_then(|v| v.parse().ok()).unwrap_or(n),
            "--only" => only = args.next(),
            other => {
                eprintln!("unknown argument `{other}`; usage: eagle-ulp [--n N] [--only NAME]");
                std::process::exit(2);
            }
        }
    }
    let fns: Vec<MathFn> = MathFn::ALL
        .into_iter()
        .filter(|f| only.as_deref().is_none_or(|o| o == f.name()))
        .collect();
    let next = AtomicUsize::new(0);
    let rows = Mutex::new(vec![]);
    let threads = std::thread::available_parallelism().map_or(1, |p| p.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&f) = fns.get(i) else { break };
                let row = measure(f, n);
                eprintln!("{}: {:.3} / {:.3} ulp", f.name(), row.max64, row.max32);
                rows.lock().unwrap_or_else(|e| e.into_inner()).push(row);
            });
        }
    });
    let mut rows = rows.into_inner().unwrap_or_else(|e| e.into_inner());
    rows.sort_by_key(|r| fns.iter().position(|f| *f == r.f));
    println!("| function | max ulp f64 | worst f64 argument | max ulp f32 | worst f32 argument | inputs |");
    println!("|---|---|---|---|---|---|");
    let mut bad = false;
    for r in &rows {
        println!(
            "| `{}` | {:.3} | {:?} | {:.3} | {:?} | {} |",
            r.f.name(),
            r.max64,
            r.at64,
            r.max32,
            r.at32,
            r.n
        );
        bad |= r.max64 > 1.0 || r.max32 > 1.0 || !r.specials.is_empty();
        for m in &r.specials {
            println!("special value differs: {m}");
        }
    }
    if bad {
        eprintln!("FAILED: a function exceeds 1 ulp or a special value differs from std");
        std::process::exit(1);
    }
}
