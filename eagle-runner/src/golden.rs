//! Host-side goldens for the collective steps and the tile reductions, computed in the combine
//! orders that `docs/collectives.md` and `docs/language.md` document (so results compare bit
//! for bit).

use eagle::Tensor;
use std::ops::Range;

/// Float `max` / `min` as compiled code and every collective mode compute them (IEEE 754-2019
/// maximum / minimum; a NaN result is the canonical NaN, `f32::NAN` / `f64::NAN` bits): use
/// these, not `f32::max` (which ignores NaN), in goldens of `Max` / `Min` reductions.
pub use eagle::ir::eval::{fmax_f32, fmax_f64, fmin_f32, fmin_f64};

/// The `f32` sum of `xs` in the order of eagle's sum reductions (`row_sum`, `col_sum`,
/// `reduce_sum`; `docs/language.md`, "Reductions"), in plain Rust: eight lanes from `-0.0`,
/// lane `j` adding `xs[j], xs[j + 8], ...` in turn, then
/// `((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))`.
pub fn lane_sum(xs: &[f32]) -> f32 {
    let mut l = [-0.0f32; 8];
    for (i, x) in xs.iter().enumerate() {
        l[i % 8] += x;
    }
    ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
}

/// Elements of chunk `c` when `n` elements are cut into `p` contiguous chunks, the first
/// `n % p` one element longer (the rank-partition rule of the multi-GPU seed).
pub fn chunk(n: usize, p: usize, c: usize) -> Range<usize> {
    let (off, len) = eagle::codegen::lower::chunk(n as u64, p as u64, c as u64);
    off as usize..(off + len) as usize
}

/// The chunk that holds element `j`.
pub fn owner(n: usize, p: usize, j: usize) -> usize {
    (0..p).find(|&c| chunk(n, p, c).contains(&j)).unwrap_or(0)
}

/// Allreduce of the rows of `x` (`[p, n]`) with `op`: element `j` folds the rows left to right
/// in rank order `0, 1, ..., p-1` (mesh, two-phase), or for `ring`, in ring order starting at
/// the owner `c` of `j`: `c, c+1, ..., c-1`.
pub fn allreduce(x: &Tensor<f32>, op: fn(f32, f32) -> f32, ring: bool) -> Vec<f32> {
    let (p, n) = (x.shape()[0], x.shape()[1]);
    (0..n)
        .map(|j| {
            let start = if ring { owner(n, p, j) } else { 0 };
            (1..p).fold(x.row(start)[j], |acc, k| op(acc, x.row((start + k) % p)[j]))
        })
        .collect()
}

/// Checks that row r of `y` is row `(r + shift) mod P` of `x` (`shift = 1`: pull / get mode,
/// `y[r] = x[(r+1) % P]`; `shift = -1`: push / put mode, `y[r] = x[(r-1+P) % P]`), bit for bit.
///
/// When the check fails it says which shift the result does match, so the tutorial seed's
/// "golden is one step behind" symptom (pull and push confused) is reported as such.
///
/// # Errors
/// [`eagle::Error::Check`] naming the expected and the observed shift, or the first
/// differing element.
pub fn check_ring_shift(y: &Tensor<f32>, x: &Tensor<f32>, shift: isize) -> eagle::Result<()> {
    let p = x.shape().first().copied().unwrap_or(0);
    let src = |r: usize, s: isize| (r as isize + s).rem_euclid(p.max(1) as isize) as usize;
    let matches = |s: isize| {
        (0..p).all(|r| {
            y.row(r)
                .iter()
                .zip(x.row(src(r, s)))
                .all(|(a, b)| a.to_bits() == b.to_bits())
        })
    };
    if matches(shift) {
        return Ok(());
    }
    let name = |s: isize| match s {
        1 => "y[r] = x[(r + 1) % P] (pull / get mode)".to_string(),
        -1 => "y[r] = x[(r + P - 1) % P] (push / put mode)".to_string(),
        0 => "y[r] = x[r] (nothing moved)".to_string(),
        s => format!("y[r] = x[(r {s:+}) mod P]"),
    };
    if let Some(seen) = (-(p as isize)..=p as isize).find(|&s| s != shift && matches(s)) {
        let hint = if seen == -shift {
            "; the golden is one step behind: pull and push are confused (get reads the next rank, put writes the next rank)"
        } else {
            ""
        };
        return Err(eagle::Error::Check(format!(
            "the result is {} but the golden expects {}{hint}",
            name(seen),
            name(shift)
        )));
    }
    for r in 0..p {
        crate::check_bits(&format!("y[{r}]"), y.row(r), x.row(src(r, shift)))?;
    }
    Ok(())
}

/// How many `f32` values lie between `a` and `b` (0 when they are equal, `-0` equal to `+0`;
/// `u32::MAX` when either is NaN and the other is not). Ordered by their bits, so the count is
/// in units in the last place.
pub fn ulps_apart(a: f32, b: f32) -> u32 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() {
            0
        } else {
            u32::MAX
        };
    }
    let key = |x: f32| {
        let i = x.to_bits() as i32;
        if i < 0 {
            i64::from(i32::MIN) - i64::from(i)
        } else {
            i64::from(i)
        }
    };
    (key(a) - key(b)).unsigned_abs().min(u64::from(u32::MAX)) as u32
}

/// Checks eagle's math function `f` against Rust std's `std_f` at each of `args`: at most
/// `max_ulps` apart (eagle's functions are within 1 ulp of the exact value, see
/// `docs/language.md`; std's are within its libm's bound).
///
/// # Errors
/// [`eagle::Error::Check`] naming the function, the argument and both results.
pub fn check_near_std(
    f: eagle::ir::MathFn,
    std_f: fn(f32) -> f32,
    args: &[f32],
    max_ulps: u32,
) -> eagle::Result<()> {
    for &x in args {
        let (a, b) = (f.eval_f32(&[x]), std_f(x));
        if ulps_apart(a, b) > max_ulps {
            return Err(eagle::Error::Check(format!(
                "{}({x:e}) = {a:e} in eagle, {b:e} in Rust std: {} ulp apart, more than {max_ulps}",
                f.name(),
                ulps_apart(a, b)
            )));
        }
    }
    Ok(())
}
