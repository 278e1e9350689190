//! The mapreduce fold: a reduction's identity, one combine step, and the fold of row partials
//! in row order, each the evaluator's op (`eagle_ir::eval`), so the bits are the same as
//! compiled code's at every world size and thread count.

use eagle_ir::{DType, ReduceKind};

/// The bytes of the identity of reduction `kind` on dtype `d` (little-endian, `d.size()`
/// bytes): where every row partial starts.
pub fn identity(kind: ReduceKind, d: DType) -> Vec<u8> {
    use eagle_ir::eval::{cast, Scalar};
    use eagle_ir::tile::reduce_identity;
    use eagle_ir::ReduceOp;
    let s = match kind {
        // A mapreduce's rows start from +0 (the tile reductions' lanes from -0.0).
        ReduceKind::Sum => Scalar::from_bits(0, d),
        ReduceKind::Times => reduce_identity(ReduceOp::Prod, d),
        ReduceKind::Max => reduce_identity(ReduceOp::Max, d),
        ReduceKind::Land => cast(Scalar::Bool(true), d),
    };
    s.bits().to_le_bytes()[..d.size()].to_vec()
}

/// `acc = acc <kind> x`, elementwise, in dtype `d`: the evaluator's op (`eagle_ir::eval`, the
/// one definition compiled code also follows: wrapping integers, `max` with the canonical
/// NaN, `f16` rounded after each op).
pub fn combine(kind: ReduceKind, d: DType, acc: &mut [u8], x: &[u8]) {
    use eagle_ir::eval::{binary, Scalar};
    use eagle_ir::BinOp;
    let op = match kind {
        ReduceKind::Sum => BinOp::Add,
        ReduceKind::Times => BinOp::Mul,
        ReduceKind::Max => BinOp::Max,
        ReduceKind::Land => BinOp::And,
    };
    let w = d.size();
    let word = |b: &[u8]| {
        let mut le = [0u8; 8];
        le[..w].copy_from_slice(b);
        Scalar::from_bits(u64::from_le_bytes(le), d)
    };
    for (a, b) in acc.chunks_exact_mut(w).zip(x.chunks_exact(w)) {
        let (av, bv) = (word(a), word(b));
        // The plan's verifier admits only ops defined on the dtype.
        let r = binary(op, av, bv).unwrap_or(av);
        a.copy_from_slice(&r.bits().to_le_bytes()[..w]);
    }
}

/// `acc = acc <kind> row` for every row of `rows` in order, elementwise, in dtype `d`
/// (`acc.len()` bytes per row): [`combine`] row by row, with the common float sums
/// and products done directly: for values that are not NaN that is the IEEE operation the
/// evaluator defines. A NaN, once it appears in a sum or product, stays; so a result with no
/// NaN had none on the way, and a result with one is folded again by the evaluator (whose NaN
/// is the reference). Checked bit for bit by `folding_rows_matches_the_evaluator`.
pub fn fold(kind: ReduceKind, d: DType, acc: &mut [u8], rows: &[u8]) {
    let w = acc.len();
    if w == 0 {
        return;
    }
    let slow = |acc: &mut [u8]| {
        for row in rows.chunks_exact(w) {
            combine(kind, d, acc, row);
        }
    };
    macro_rules! direct {
        ($t:ty, $op:tt) => {{
            const S: usize = std::mem::size_of::<$t>();
            let mut a: Vec<$t> = acc
                .chunks_exact(S)
                .map(|c| <$t>::from_le_bytes(c.try_into().unwrap_or([0; S])))
                .collect();
            // Element by element, each over the rows in row order (the elements' folds are
            // independent, so the order of each is unchanged): the running value stays in a
            // register, so a row costs one add's latency, not a store and a reload as well.
            for (j, x) in a.iter_mut().enumerate() {
                let mut v = *x;
                for c in rows.chunks_exact(S).skip(j).step_by(w / S) {
                    v $op <$t>::from_le_bytes(c.try_into().unwrap_or([0; S]));
                }
                *x = v;
            }
            if a.iter().any(|x| x.is_nan()) {
                slow(acc);
            } else {
                for (o, x) in acc.chunks_exact_mut(S).zip(&a) {
                    o.copy_from_slice(&x.to_le_bytes());
                }
            }
        }};
    }
    match (kind, d) {
        (ReduceKind::Sum, DType::F64) => direct!(f64, +=),
        (ReduceKind::Sum, DType::F32) => direct!(f32, +=),
        (ReduceKind::Times, DType::F64) => direct!(f64, *=),
        (ReduceKind::Times, DType::F32) => direct!(f32, *=),
        _ => slow(acc),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_rows_matches_the_evaluator() {
        // Values with NaNs, infinities, signed zeros and subnormals, folded both ways.
        let specials64 = [
            0.0,
            -0.0,
            1.5,
            -3.25,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE / 4.0,
            1e308,
            1e-300,
        ];
        for (kind, nan) in [
            (ReduceKind::Sum, false),
            (ReduceKind::Sum, true),
            (ReduceKind::Times, false),
            (ReduceKind::Times, true),
            (ReduceKind::Max, true),
        ] {
            for d in [DType::F64, DType::F32] {
                let mut rows = vec![];
                for k in 0..200usize {
                    let mut x = specials64[k % specials64.len()] * (1.0 + k as f64 / 7.0);
                    if nan && k % 37 == 5 {
                        x = if k % 2 == 0 { f64::NAN } else { -f64::NAN };
                    }
                    match d {
                        DType::F64 => rows.extend_from_slice(&x.to_le_bytes()),
                        _ => rows.extend_from_slice(&(x as f32).to_le_bytes()),
                    }
                }
                // One element and two (each folded over the rows on its own).
                for lanes in [1, 2] {
                    let w = d.size() * lanes;
                    let mut fast = super::identity(kind, d).repeat(lanes);
                    let mut slow = fast.clone();
                    fold(kind, d, &mut fast, &rows);
                    for row in rows.chunks_exact(w) {
                        super::combine(kind, d, &mut slow, row);
                    }
                    assert_eq!(fast, slow, "{kind:?} {d} {lanes} lanes");
                }
            }
        }
    }
}
