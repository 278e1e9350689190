//! `split(ctx, color, key)` ([`OpKind::Split`]) once P is known: the color and key are
//! evaluated for every world rank before anything runs ([`AtRank`]), and the ranks of each
//! color are numbered by key and then by world rank, as `MPI_Comm_split` numbers a
//! communicator's; a negative color (`UNDEFINED`, as `MPI_UNDEFINED` is negative) puts the rank
//! in no group. Groups that are those of a process grid become the grid's group (index
//! arithmetic); any others (sizes that differ, a key order against world-rank order, members
//! anywhere, ranks left out) are per-rank tables ([`Table`]) that the lowering reads through
//! [`lookup`] and, for the members of scattered groups, a local array.

use super::em::Em;
use eagle_ir::entity::SecondaryMap;
use eagle_ir::eval::{self, Scalar};
use eagle_ir::{BinOp, CmpOp, Const, DType, Defs, Function, OpKind, Type, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// How a split's groups sit among the world's ranks: its tables (which reports name a rank's
/// place by), and the process grid whose axis-1 groups they are, when they are one (`[P / (n
/// s), n, s]`: `n` ranks per group, `s` world ranks apart, in world-rank order).
pub(super) struct Layout {
    /// The grid, lowered as a `group` of it is.
    pub(super) grid: Option<Vec<u64>>,
    /// The tables, read by the lowering when there is no grid.
    pub(super) table: Arc<Table>,
}

/// A split's groups by world rank: what `rank`, `nranks` and `world_rank` of the group are on
/// each rank. Entries of a rank in no group are `-1` in `me` and `None` elsewhere (never read:
/// the rank stops first, [`eagle_ir::Trap::NoGroup`]).
#[derive(Debug)]
pub(crate) struct Table {
    /// Per world rank: its group rank, `-1` for a rank in no group.
    pub(super) me: Vec<i64>,
    /// Per world rank: the index in `members` of its group's rank 0.
    pub(super) start: Vec<Option<i64>>,
    /// Per world rank: its group's rank count.
    pub(super) size: Vec<Option<i64>>,
    /// The world ranks of every group in group-rank order, the groups by ascending color.
    pub(super) members: Vec<i64>,
    /// Per world rank: its color, `None` for a rank in no group (for reports).
    pub(super) color: Vec<Option<i64>>,
}

impl Table {
    /// The rank count of every group when they all have one (`None` also when there is no
    /// group).
    pub(super) fn uniform(&self) -> Option<u64> {
        let mut sizes = self.size.iter().flatten();
        let first = *sizes.next()?;
        sizes.all(|&n| n == first).then_some(first as u64)
    }

    /// Whether some rank is in no group.
    pub(super) fn excluded(&self) -> bool {
        self.me.contains(&-1)
    }

    /// The rank count of the largest group (0 when there is none).
    pub(super) fn largest(&self) -> u64 {
        self.size.iter().flatten().max().map_or(0, |&n| n as u64)
    }

    /// The groups' sizes as a message names them when they differ: `color 0 holds 3 ranks,
    /// color 1 holds 1`.
    pub(super) fn sizes(&self) -> String {
        let mut seen: BTreeMap<i64, i64> = BTreeMap::new();
        for (c, n) in self.color.iter().zip(&self.size) {
            if let (Some(c), Some(n)) = (c, n) {
                seen.insert(*c, *n);
            }
        }
        let all: Vec<String> = seen
            .iter()
            .map(|(c, n)| format!("color {c} holds {n}"))
            .collect();
        all.join(", ")
    }
}

/// The values of a function on one world rank `r` of `p`, computed before anything runs from
/// their definitions: the function's constants (`consts`), `rank` and `nranks` of the world's
/// context `world`, and elementwise ops of them, evaluated as every backend computes them
/// ([`eval::elementwise`]: integers wrap at their width, casts are Rust's `as`). Each value is
/// evaluated once (`memo`), so shared subexpressions cost nothing more.
struct AtRank<'a, 'f> {
    f: &'a Function,
    facts: &'a Defs<'f>,
    consts: &'a SecondaryMap<Value, i128>,
    world: Value,
    r: u64,
    p: u64,
    memo: SecondaryMap<Value, Scalar>,
}

impl AtRank<'_, '_> {
    /// The value of `v` on this rank, in its own dtype.
    ///
    /// # Errors
    /// What the value depends on that is not known before the program runs (a load, a
    /// loop's variable, an argument, another group's rank), or the evaluator's error (a
    /// division by zero), as a phrase for the message (`depend on ...`, `cannot be computed
    /// ...`).
    fn at(&mut self, v: Value) -> Result<Scalar, String> {
        if let Some(&x) = self.memo.get(v) {
            return Ok(x);
        }
        let x = self.eval(v)?;
        self.memo.insert(v, x);
        Ok(x)
    }

    /// [`AtRank::at`] of a value not yet evaluated on this rank.
    fn eval(&mut self, v: Value) -> Result<Scalar, String> {
        let d = self.f.ty(v).dtype().unwrap_or(DType::Index);
        if let Some(&c) = self.consts.get(v) {
            return Scalar::from_const(Const::Int(c), d).ok_or_else(|| {
                format!("depend on the constant {c}, which does not fit its dtype")
            });
        }
        let Some(op) = self.facts.op(v) else {
            return Err("depend on an argument or a loop's variable".into());
        };
        let (r, p) = (self.r, self.p);
        let index = |x: u64| Scalar::Index(x as i64);
        match &op.kind {
            OpKind::Rank(c) if *c == self.world => Ok(index(r)),
            OpKind::NRanks(c) if *c == self.world => Ok(index(p)),
            OpKind::Const(c) => Scalar::from_const(*c, d)
                .ok_or_else(|| format!("depend on the constant {c}, which does not fit its dtype")),
            kind if kind.as_elementwise().is_some() => {
                let args = kind
                    .operands()
                    .into_iter()
                    .map(|a| self.at(a))
                    .collect::<Result<Vec<_>, _>>()?;
                eval::elementwise(kind, &args, d)
                    .map_err(|e| format!("cannot be computed on rank {r}: {e}"))
            }
            OpKind::Read(_) => Err("depend on a `let mut` variable, whose value is only known \
                                    as the program runs (compute the color in one expression)"
                .into()),
            OpKind::Rank(_) | OpKind::NRanks(_) => Err("depend on a group's `rank` or \
                                                        `nranks` (only the world's are known \
                                                        for every rank before anything runs)"
                .into()),
            kind => Err(format!("depend on `{}`", kind.info().name)),
        }
    }
}

/// The groups of `split(world, color, key)` on a world of `p` ranks: a grid's when they are
/// one, and its tables ([`Layout`]).
///
/// # Errors
/// The message, naming the fix, when a color or key is not computed from the rank.
pub(super) fn layout(
    f: &Function,
    facts: &Defs<'_>,
    consts: &SecondaryMap<Value, i128>,
    (world, color, key): (Value, Value, Value),
    p: u64,
) -> Result<Layout, String> {
    // Members of each color as (key, world rank), and the colors by world rank.
    let mut groups: BTreeMap<i64, Vec<(i64, u64)>> = BTreeMap::new();
    let mut colors: Vec<Option<i64>> = Vec::with_capacity(p as usize);
    for r in 0..p {
        let mut values = AtRank {
            f,
            facts,
            consts,
            world,
            r,
            p,
            memo: SecondaryMap::new(),
        };
        let mut at = |v| values.at(v).map(|x| x.bits() as i64);
        let (c, k) = match (at(color), at(key)) {
            (Ok(c), Ok(k)) => (c, k),
            (Err(why), _) | (_, Err(why)) => {
                return Err(format!(
                    "the color and key of `split` are computed before anything runs, for every \
                     rank, from `rank(ctx)`, `nranks(ctx)`, dims, constants and arithmetic on \
                     them (`split(ctx, rank(ctx) / TP, rank(ctx))`); these {why}"
                ));
            }
        };
        // A color of a signed dtype below zero (`UNDEFINED`): in no group.
        let signed = f.ty(color).dtype().is_none_or(DType::is_signed);
        let none = signed && c < 0;
        colors.push((!none).then_some(c));
        if !none {
            groups.entry(c).or_default().push((k, r));
        }
    }
    for members in groups.values_mut() {
        // By key, then by world rank, as `MPI_Comm_split` (keys compared in their dtype's
        // bits as `i64`: an unsigned key of 2^63 or more sorts before 0).
        members.sort_unstable();
    }
    let grid = as_grid(&groups, p);
    let n = p as usize;
    let mut t = Table {
        me: vec![-1; n],
        start: vec![None; n],
        size: vec![None; n],
        members: Vec::with_capacity(n),
        color: colors,
    };
    for members in groups.values() {
        let start = t.members.len() as i64;
        for (q, &(_, w)) in members.iter().enumerate() {
            let w = w as usize;
            t.me[w] = q as i64;
            t.start[w] = Some(start);
            t.size[w] = Some(members.len() as i64);
            t.members.push(w as i64);
        }
    }
    Ok(Layout {
        grid,
        table: Arc::new(t),
    })
}

/// The process grid whose axis-1 groups are `groups` (each sorted by key), when they are one:
/// every rank in a group, one size `n`, members in world-rank order `s` apart, each group
/// starting at `(r / (n s)) n s + r % s`. Then a split has the bits of the equal `group`.
fn as_grid(groups: &BTreeMap<i64, Vec<(i64, u64)>>, p: u64) -> Option<Vec<u64>> {
    if groups.is_empty() {
        return None;
    }
    let n = groups.values().next()?.len() as u64;
    let total: u64 = groups.values().map(|m| m.len() as u64).sum();
    if total != p || groups.values().any(|m| m.len() as u64 != n) {
        return None;
    }
    let mut s = None;
    for members in groups.values() {
        for w in members.windows(2) {
            let (a, b) = (w[0].1, w[1].1);
            if b <= a || s.is_some_and(|t| t != b - a) {
                return None;
            }
            s = Some(b - a);
        }
    }
    let s = s.unwrap_or(1);
    let block = n * s;
    let starts_right = |m: &Vec<(i64, u64)>| m[0].1 == m[0].1 / block * block + m[0].1 % s;
    (p.is_multiple_of(block) && groups.values().all(starts_right)).then(|| vec![p / block, n, s])
}

/// The runs of `t` on which it is affine in its index, `(start, end, b, d)` with `t[x] = b +
/// d x` for `x` in `start..end`; `None` entries (never read) join any run.
pub(super) fn runs(t: &[Option<i64>]) -> Vec<(usize, usize, i64, i64)> {
    let mut out = vec![];
    let mut s = 0;
    while s < t.len() {
        // The run's first defined point, and its slope once a second one is met.
        let mut anchor: Option<(usize, i64)> = None;
        let mut slope: Option<i64> = None;
        let mut e = s;
        while e < t.len() {
            if let Some(v) = t[e] {
                match (anchor, slope) {
                    (None, _) => anchor = Some((e, v)),
                    (Some((i0, v0)), None) => {
                        let (dv, di) = (v - v0, (e - i0) as i64);
                        if dv % di != 0 {
                            break;
                        }
                        slope = Some(dv / di);
                    }
                    (Some((i0, v0)), Some(d)) => {
                        if v0 + d * (e - i0) as i64 != v {
                            break;
                        }
                    }
                }
            }
            e += 1;
        }
        let (i0, v0) = anchor.unwrap_or((s, 0));
        let d = slope.unwrap_or(0);
        out.push((s, e, v0 - d * i0 as i64, d));
        s = e;
    }
    out
}

/// Emits `t[x]` for an `index` value `x` in `0..t.len()`: one affine expression per run of
/// `t` ([`runs`]), chosen by comparing `x` with the runs' ends (`select`s, about four ops per
/// run: a split's tables have a run or two per group). Entries that are `None` may read as
/// anything.
pub(super) fn lookup(em: &mut Em<'_>, t: &[Option<i64>], x: Value) -> Value {
    let mut acc: Option<Value> = None;
    for (_, end, b, d) in runs(t).into_iter().rev() {
        let v = affine(em, b, d, x);
        acc = Some(match acc {
            None => v,
            Some(rest) => {
                let e = em.idx(end as u64);
                let c = em.cmp(CmpOp::Lt, x, e);
                em.push(OpKind::Select(c, v, rest), Type::Scalar(DType::Index))
            }
        });
    }
    acc.unwrap_or_else(|| em.idx(0))
}

/// `b + d x` as `index` ops (none for a `d` of 1 and a `b` of 0).
fn affine(em: &mut Em<'_>, b: i64, d: i64, x: Value) -> Value {
    let c = |em: &mut Em<'_>, k: i64| {
        em.push(
            OpKind::Const(Const::Int(i128::from(k))),
            Type::Scalar(DType::Index),
        )
    };
    if d == 0 {
        return c(em, b);
    }
    let m = if d == 1 {
        x
    } else {
        let k = c(em, d);
        em.ibin(BinOp::Mul, x, k)
    };
    if b == 0 {
        return m;
    }
    let k = c(em, b);
    em.ibin(BinOp::Add, m, k)
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn runs_cover_the_table_with_affine_pieces_and_skip_unread_entries() {
        // Two groups of three numbered backwards, then a group of two forwards.
        let t = [2, 1, 0, 2, 1, 0, 0, 1].map(Some);
        assert_eq!(runs(&t), vec![(0, 3, 2, -1), (3, 6, 5, -1), (6, 8, -6, 1)]);
        // An unread entry joins the run it falls in; one at the start takes the run's line.
        let t = [None, Some(1), None, Some(3), Some(7)];
        assert_eq!(runs(&t), vec![(0, 4, 0, 1), (4, 5, 7, 0)]);
        assert_eq!(runs(&[None, None]), vec![(0, 2, 0, 0)]);
        // A slope that is not whole ends the run.
        assert_eq!(
            runs(&[Some(0), None, Some(1)]),
            vec![(0, 2, 0, 0), (2, 3, 1, 0)]
        );
        let t = [5, 3, 9, 9, 2, 0, 1, 4].map(Some);
        for (s, e, b, d) in runs(&t) {
            for (x, v) in t.iter().enumerate().take(e).skip(s) {
                assert_eq!(*v, Some(b + d * x as i64));
            }
        }
    }
}
