//! Rank groups ([`OpKind::Group`]): the ranks of a process grid `[d0, d1, ...]` (row-major over
//! the world ranks, the last axis fastest) whose coordinates differ only at one axis, numbered
//! by that coordinate. Nothing after this pass knows about groups: once P is known, a group's
//! rank, size and world ranks are index arithmetic on `rank ctx` and constants, its barrier is
//! signals among its ranks, and a collective within it is the world's expansion with the
//! group's rank, peers and signal slots ([`Em`]'s `group`). So every backend and executor runs
//! groups as they are, and a collective within a group has the bits of the same collective on
//! a world of the group's size.
//!
//! The signal window of a function with a group has `4P` slots ([`super::add_signal_windows`]):
//! - `0..P`: the world's two-phase and ring allreduces, as without groups;
//! - `P + w`: set by world rank `w` in a two-phase or ring allreduce within a group;
//! - `2P + w`: this rank's count of the group barriers it has passed with world rank `w`
//!   (written only by the rank itself);
//! - `3P + w`: set by world rank `w`, on arrival at a group barrier, to its count of the
//!   group barriers it has entered with this rank.
//!
//! A slot named by a world rank has one writer. The barrier counts count every group barrier
//! two ranks share, in program order, whichever group (or grid: a function may split the world
//! twice) it belongs to; both ranks enter the same shared barriers in the same order, so the
//! counts agree. They only grow, so a `Set` that overtakes an older one is harmless (no reset,
//! no atomic add across devices). An allreduce's slot `P + w` is reset after its last wait, as
//! the world's are.

use super::em::Em;
use crate::error::SpecializeError;
use eagle_ir::entity::SecondaryMap;
use eagle_ir::eval::{self, Scalar};
use eagle_ir::{BinOp, CmpOp, Const, DType, Defs, Function, Level, Op, OpKind, Type, Value, Want};
use std::collections::BTreeMap;

/// A `group` op of the function once its grid's extents are constants.
#[derive(Clone, Debug)]
pub(super) struct GroupDef {
    /// The world's context, the op's operand.
    ctx: Value,
    /// The grid's extents, outermost first.
    grid: Vec<u64>,
    /// The group's axis.
    axis: usize,
}

impl GroupDef {
    /// The grid's extents, outermost first.
    pub(super) fn grid(&self) -> &[u64] {
        &self.grid
    }

    /// The group's rank count: the grid's extent at its axis.
    pub(super) fn size(&self) -> u64 {
        self.grid[self.axis]
    }

    /// World ranks between consecutive ranks of the group: the extents after its axis,
    /// multiplied.
    fn stride(&self) -> u64 {
        self.grid[self.axis + 1..].iter().product()
    }

    /// Emits this rank's world rank and group rank (`(world / stride) % size`, defining `into`
    /// when given); returns both.
    fn ranks(&self, em: &mut Em<'_>, into: Option<Value>) -> (Value, Value) {
        let world = em.push(OpKind::Rank(self.ctx), Type::Scalar(DType::Index));
        let s = em.idx(self.stride());
        let t = em.ibin(BinOp::Div, world, s);
        let n = em.idx(self.size());
        let kind = OpKind::Binary(BinOp::Rem, t, n);
        let me = match into {
            Some(r) => {
                em.append(kind, Some(r));
                r
            }
            None => em.push(kind, Type::Scalar(DType::Index)),
        };
        (world, me)
    }

    /// Emits what an op within the group needs before its expansion: this rank's world and
    /// group ranks and the world rank of the group's rank 0.
    pub(super) fn at(&self, em: &mut Em<'_>, world_size: u64, sig: Option<Value>) -> GroupAt {
        let (world, me) = self.ranks(em, None);
        // `world - me * stride`, written so that range analysis bounds it (with `q * stride`
        // added, `q < size`) within 0..P: the start of this rank's block of `size * stride`
        // ranks plus its place within a stride.
        let block = em.idx(self.size() * self.stride());
        let b = em.ibin(BinOp::Div, world, block);
        let start = em.ibin(BinOp::Mul, b, block);
        let s = em.idx(self.stride());
        let within = em.ibin(BinOp::Rem, world, s);
        let base = em.ibin(BinOp::Add, start, within);
        GroupAt {
            ctx: self.ctx,
            size: self.size(),
            stride: self.stride(),
            world_size,
            world,
            me,
            base,
            sig,
        }
    }
}

/// A group as an expansion within it uses it: its extents and the values [`GroupDef::at`]
/// emitted.
#[derive(Clone, Debug)]
pub(super) struct GroupAt {
    /// The world's context.
    ctx: Value,
    /// Ranks in the group.
    size: u64,
    /// World ranks between consecutive group ranks.
    stride: u64,
    /// P.
    pub(super) world_size: u64,
    /// This rank's world rank.
    world: Value,
    /// This rank's group rank.
    pub(super) me: Value,
    /// The world rank of the group's rank 0.
    base: Value,
    /// The function's signal window (`4P` slots), absent only in a direct call of the pass.
    sig: Option<Value>,
}

impl GroupAt {
    /// Ranks in the group.
    pub(super) fn size(&self) -> u64 {
        self.size
    }

    /// The world rank of group rank `q`: `base + q * stride`.
    pub(super) fn world_of(&self, em: &mut Em<'_>, q: Value) -> Value {
        let s = em.idx(self.stride);
        let o = em.ibin(BinOp::Mul, q, s);
        em.ibin(BinOp::Add, self.base, o)
    }

    /// Slot `region + w` of the signal window.
    fn slot(em: &mut Em<'_>, region: u64, w: Value) -> Value {
        let r = em.idx(region);
        em.ibin(BinOp::Add, r, w)
    }

    /// Runs `body(world rank)` for every other member of the group, in group-rank order.
    fn for_each_other(&self, em: &mut Em<'_>, body: impl Fn(&mut Em<'_>, Value)) {
        em.for_(0, self.size, |em, q| {
            let other = em.cmp(CmpOp::Ne, self.me, q);
            em.if_(
                other,
                |em| {
                    let w = self.world_of(em, q);
                    body(em, w);
                },
                |_| {},
            );
        });
    }

    /// Every rank of the group arrives before any leaves: each rank counts one more barrier
    /// with every other rank of the group and sets that count in its slot on that rank; then it
    /// waits until each of them has set its slot here to at least the same count. Without a
    /// signal window (a direct call of the pass, never at specialization) it is the world's
    /// barrier, correct only when every rank of the world reaches it.
    pub(super) fn barrier(&self, em: &mut Em<'_>) {
        if self.size == 1 {
            return;
        }
        let Some(sig) = self.sig else {
            em.push_void(OpKind::Barrier(self.ctx));
            return;
        };
        // The peers below are world ranks, whether or not `em` expands a collective within
        // the group (whose `world_of` would translate them a second time).
        let within = em.group.take();
        let p = self.world_size;
        // Arrive: one more barrier with each other member `w`, counted here (`2P + w`) and
        // set on `w` (its `3P + me`).
        self.for_each_other(em, |em, w| {
            let count = Self::slot(em, 2 * p, w);
            let c = em.remote_elem(sig, self.world, count);
            let one = em.i64c(1);
            let next = em.push(OpKind::Binary(BinOp::Add, c, one), Type::Scalar(DType::I64));
            em.notify_v(sig, self.world, count, next);
            let mine = Self::slot(em, 3 * p, self.world);
            em.notify_v(sig, w, mine, next);
        });
        // Leave once each member has set its count here (`3P + w`) at least as high.
        self.for_each_other(em, |em, w| {
            let count = Self::slot(em, 2 * p, w);
            let c = em.remote_elem(sig, self.world, count);
            let theirs = Self::slot(em, 3 * p, w);
            em.wait_v(sig, theirs, c);
        });
        em.group = within;
    }
}

/// The function's `group` ops by their results, with their grids' extents (constants once
/// the dims are bound).
///
/// # Errors
/// [`SpecializeError::Group`] for a grid whose extents do not multiply to the world size `p`
/// (naming the extents, P and the fix), a group of a group, and a group passed to a kernel
/// call.
pub(super) fn group_defs(
    f: &Function,
    p: u64,
    consts: &SecondaryMap<Value, i128>,
) -> Result<SecondaryMap<Value, GroupDef>, SpecializeError> {
    let mut defs: SecondaryMap<Value, GroupDef> = SecondaryMap::new();
    let mut err = None;
    let facts = Defs::of(f);
    f.walk(&mut |op| {
        if err.is_some() {
            return;
        }
        let fail = |what: &str, message: String| SpecializeError::Group {
            function: f.name.clone(),
            op: what.into(),
            loc: op.loc.clone().map(Box::new),
            message,
        };
        if let OpKind::Group { ctx, grid, axis } = &op.kind {
            if !matches!(f.level, Level::Device | Level::Compute) {
                err = Some(fail(
                    "group",
                    format!(
                        "a rank group in the {} function `{}`: a group lives in a \
                         per-device program or a compute kernel it calls, whose signal window \
                         its barriers and collectives use; create it there",
                        f.level.name(),
                        f.name
                    ),
                ));
                return;
            }
            if defs.contains_key(*ctx) {
                err = Some(fail(
                    "group",
                    "the context of a group is a group; split the world's context instead: \
                     give `group(ctx, [...], axis)` the kernel's `ctx` and a grid with one axis \
                     more"
                        .into(),
                ));
                return;
            }
            let extents: Vec<u64> = grid
                .iter()
                .map(|g| consts.get(*g).map_or(0, |&c| u64::try_from(c).unwrap_or(0)))
                .collect();
            let n: u64 = extents.iter().product();
            if n != p || extents.contains(&0) {
                err = Some(fail(
                    "group",
                    format!(
                        "the grid {extents:?} holds {n} ranks but the world has P = {p}; give \
                         it extents that multiply to P, for example `[{{ NR / TP }}, TP]` \
                         with `NR = dynamic!(\"NR\")` and `TP` a dim bound at launch"
                    ),
                ));
                return;
            }
            if let Some(r) = op.result {
                let axis = *axis as usize;
                defs.insert(
                    r,
                    GroupDef {
                        ctx: *ctx,
                        grid: extents,
                        axis,
                    },
                );
            }
        } else if let OpKind::Split { ctx, color, key } = &op.kind {
            let place = if matches!(f.level, Level::Device | Level::Compute) {
                None
            } else {
                Some(format!(
                    "a rank group in the {} function `{}`: a group lives in a per-device \
                     program or a compute kernel it calls, whose signal window its barriers \
                     and collectives use; create it there",
                    f.level.name(),
                    f.name
                ))
            };
            let nested = defs.contains_key(*ctx).then(|| {
                "the context of a split is a group; split the world's context instead: give \
                 `split(ctx, color, key)` the kernel's `ctx` and a color that tells every \
                 group apart"
                    .to_string()
            });
            let grid = place
                .or(nested)
                .map_or_else(|| split_grid(f, &facts, consts, *ctx, *color, *key, p), Err);
            match (grid, op.result) {
                (Err(m), _) => err = Some(fail("split", m)),
                (Ok(grid), Some(r)) => {
                    defs.insert(
                        r,
                        GroupDef {
                            ctx: *ctx,
                            grid,
                            axis: 1,
                        },
                    );
                }
                (Ok(_), None) => {}
            }
        } else if let OpKind::Call { callee, args } = &op.kind {
            if args.iter().any(|&a| defs.contains_key(a)) {
                err = Some(fail(
                    "call",
                    format!(
                        "a group is passed to the kernel `{callee}`, whose `ctx` is the \
                         world's; call it with the kernel's own `ctx` and pass what it needs \
                         of the group (its rank, its size) as index arguments"
                    ),
                ));
            }
        }
    });
    err.map_or(Ok(defs), Err)
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
    /// division by zero), as a phrase for the message.
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
            return Scalar::from_const(Const::Int(c), d).ok_or_else(|| format!("the constant {c}"));
        }
        let Some(op) = self.facts.op(v) else {
            return Err("an argument or a loop's variable".into());
        };
        let (r, p) = (self.r, self.p);
        let index = |x: u64| Scalar::Index(x as i64);
        match &op.kind {
            OpKind::Rank(c) if *c == self.world => Ok(index(r)),
            OpKind::NRanks(c) if *c == self.world => Ok(index(p)),
            OpKind::Const(c) => {
                Scalar::from_const(*c, d).ok_or_else(|| format!("the constant {c}"))
            }
            kind if kind.as_elementwise().is_some() => {
                let args = kind
                    .operands()
                    .into_iter()
                    .map(|a| self.at(a))
                    .collect::<Result<Vec<_>, _>>()?;
                eval::elementwise(kind, &args, d).map_err(|e| format!("{e} on rank {r}"))
            }
            kind => Err(format!("`{}`", kind.info().name)),
        }
    }
}

/// The process grid whose axis-1 groups are those of `split(ctx, color, key)` on a world of
/// `p` ranks: with `n` ranks per group, spaced `s` world ranks apart, `[p / (n s), n, s]`.
///
/// # Errors
/// The message, naming ranks and colors, when a color or key is not computed from the rank,
/// when the groups differ in size, when a key numbers a group against world-rank order, and
/// when the groups are not those of a process grid.
fn split_grid(
    f: &Function,
    facts: &Defs<'_>,
    consts: &SecondaryMap<Value, i128>,
    world: Value,
    color: Value,
    key: Value,
    p: u64,
) -> Result<Vec<u64>, String> {
    let mut groups: BTreeMap<i128, Vec<(i128, u64)>> = BTreeMap::new();
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
        let mut at = |v| values.at(v).map(|x| i128::from(x.bits() as i64));
        let (c, k) = match (at(color), at(key)) {
            (Ok(c), Ok(k)) => (c, k),
            (Err(why), _) | (_, Err(why)) => {
                return Err(format!(
                    "the color and key of `split` are computed before anything runs, for every \
                     rank, from `rank(ctx)`, `nranks(ctx)`, dims, constants and arithmetic on \
                     them (`split(ctx, rank(ctx) / TP, rank(ctx))`); these depend on {why}"
                ));
            }
        };
        groups.entry(c).or_default().push((k, r));
    }
    let mut n = None;
    let mut s = None;
    for (c, members) in &mut groups {
        members.sort();
        let size = members.len() as u64;
        let first = groups_first(members);
        match n {
            None => n = Some((size, *c, first)),
            Some((m, c0, f0)) if m != size => {
                return Err(format!(
                    "color {c0} holds {m} ranks (from rank {f0}) but color {c} holds {size} (from \
                     rank {first}); the groups of a split have one size: give every group the \
                     same number of ranks (`rank(ctx) / TP` makes groups of TP)"
                ))
            }
            Some(_) => {}
        }
        for w in members.windows(2) {
            let (a, b) = (w[0].1, w[1].1);
            if b < a {
                return Err(format!(
                    "the key numbers rank {a} before rank {b} in the group of color {c}; unlike \
                     `MPI_Comm_split`, eagle numbers a group's ranks in world-rank order: give a \
                     key that grows with the rank (`rank(ctx)`) or one key for all, and number \
                     the ranks yourself where you need another order (`nranks(g) - 1 - \
                     rank(g)`, with `world_rank(g, q)` for the peers)"
                ));
            }
            match s {
                None => s = Some(b - a),
                Some(t) if t != b - a => {
                    return Err(format!(
                        "ranks {a} and {b} of color {c} are {} apart, but the ranks of a group \
                         so far are {t} apart; the groups of a split are those of a process \
                         grid, their ranks equally spaced alike: ranks `r / TP` (consecutive) or \
                         `r % TP` (strided)",
                        b - a
                    ))
                }
                Some(_) => {}
            }
        }
    }
    let (n, s) = (n.map_or(1, |x| x.0), s.unwrap_or(1));
    // One size, one spacing, members in world-rank order and a partition of `0..p` make the
    // groups the grid's along axis 1 (each starts at `(r / (n s)) n s + r % s`); checked
    // again here, an error rather than a wrong lowering should that reasoning ever fail.
    let grid = vec![p / (n * s), n, s];
    let starts_right = |m: &Vec<(i128, u64)>| m[0].1 == m[0].1 / (n * s) * (n * s) + m[0].1 % s;
    if !p.is_multiple_of(n * s) || !groups.values().all(starts_right) {
        return Err(format!(
            "the groups of this split ({n} ranks each, {s} apart) are not those of a process \
             grid [{}, {n}, {s}] on {p} ranks; give colors `r / TP` (consecutive) or `r % TP` \
             (strided)",
            p / (n * s)
        ));
    }
    Ok(grid)
}

/// The world rank of a group's first member.
fn groups_first(members: &[(i128, u64)]) -> u64 {
    members.first().map_or(0, |m| m.1)
}

/// A `broadcast` within the group `def` from `root`: a constant root past the group's ranks
/// is refused before anything runs; any other is checked when it runs ([`Trap::GroupRoot`]).
///
/// # Errors
/// [`SpecializeError::Group`] for a constant root of `size` or more.
///
/// [`Trap::GroupRoot`]: eagle_ir::Trap::GroupRoot
pub(super) fn check_root(
    em: &mut Em<'_>,
    op: &Op,
    root: Value,
    def: &GroupDef,
    cx: &super::Lowering<'_>,
) -> Result<(), SpecializeError> {
    let n = def.size();
    if !cx.consts.contains_key(root) {
        em.trap_unless_below(root, n, eagle_ir::Trap::GroupRoot);
    }
    refuse_constant_past(op, root, n, cx, "broadcast", |r| {
        format!(
            "the root is {r}, but the group's ranks are 0 to {}; the root of a broadcast \
             within a group is a group rank: give one below `nranks(group)` \
             (`world_rank(group, q)` turns a group rank into a world rank, not back)",
            n - 1
        )
    })
}

/// [`SpecializeError::Group`] at `op` (`what` names it) when group rank `q` of a group of
/// `n` ranks is a constant outside `0..n`, with `message(q)`.
fn refuse_constant_past(
    op: &Op,
    q: Value,
    n: u64,
    cx: &super::Lowering<'_>,
    what: &str,
    message: impl FnOnce(i128) -> String,
) -> Result<(), SpecializeError> {
    match cx.consts.get(q) {
        Some(&k) if k < 0 || k >= i128::from(n) => Err(SpecializeError::Group {
            function: cx.f_name.to_string(),
            op: what.into(),
            loc: op.loc.clone().map(Box::new),
            message: message(k),
        }),
        _ => Ok(()),
    }
}

/// `world_rank(group, q)` with a constant `q` past the group's ranks is refused before
/// anything runs; any other `q` is checked when it runs ([`Trap::GroupRank`]).
///
/// # Errors
/// [`SpecializeError::Group`] for a constant `q` of the group's size or more.
///
/// [`Trap::GroupRank`]: eagle_ir::Trap::GroupRank
pub(super) fn check_group_rank(
    op: &Op,
    q: Value,
    def: &GroupDef,
    cx: &super::Lowering<'_>,
) -> Result<(), SpecializeError> {
    let n = def.size();
    refuse_constant_past(op, q, n, cx, "world_rank", |k| {
        format!(
            "group rank {k} of a group whose ranks are 0 to {}; give a rank below \
             `nranks(group)` (reduce it modulo `nranks(group)` for a ring)",
            n - 1
        )
    })
}

/// The group whose context `op` takes (its `val as ctx` operand is a `group` result), if any.
pub(super) fn group_of<'d>(
    op: &Op,
    defs: &'d SecondaryMap<Value, GroupDef>,
) -> Option<&'d GroupDef> {
    let mut found = None;
    op.kind.for_each_want(&mut |_, _, want, v| {
        if want == Want::Ctx {
            found = found.or_else(|| defs.get(v));
        }
    });
    found
}

/// `world_rank(ctx, q)` of the world's own context: `q`, checked against the world size `p`.
pub(super) fn lower_world_rank(em: &mut Em<'_>, op: &Op, q: Value, p: u64) {
    em.trap_unless_below(q, p, eagle_ir::Trap::WorldRank);
    let zero = em.idx(0);
    em.append(OpKind::Binary(BinOp::Add, q, zero), op.result);
}

/// Lowers `op`, whose context is the group `def`, when it is one of the group's own queries:
/// `rank` (the group rank), `nranks` (the group's size), `world_rank` and `barrier`. Returns
/// `false` for a collective, which the caller expands with the group's [`GroupAt`].
pub(super) fn lower_group_op(
    em: &mut Em<'_>,
    op: &Op,
    def: &GroupDef,
    world_size: u64,
    sig: Option<Value>,
) -> bool {
    if let OpKind::Rank(_) = op.kind {
        def.ranks(em, op.result);
    } else if let OpKind::NRanks(_) = op.kind {
        em.append(OpKind::Const(Const::Int(i128::from(def.size()))), op.result);
    } else if let OpKind::WorldRank { rank, .. } = op.kind {
        em.trap_unless_below(rank, def.size(), eagle_ir::Trap::GroupRank);
        let g = def.at(em, world_size, sig);
        let s = em.idx(g.stride);
        let o = em.ibin(BinOp::Mul, rank, s);
        em.append(OpKind::Binary(BinOp::Add, g.base, o), op.result);
    } else if let OpKind::Barrier(_) = op.kind {
        def.at(em, world_size, sig).barrier(em);
    } else {
        // A collective (the only other ops that take a context).
        return false;
    }
    true
}
