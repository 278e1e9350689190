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
use super::split::{self, lookup, Table};
use crate::error::SpecializeError;
use eagle_ir::entity::SecondaryMap;
use eagle_ir::{BinOp, CmpOp, Const, DType, Defs, Function, Level, Op, OpKind, Type, Value, Want};
use std::cell::OnceCell;
use std::rc::Rc;
use std::sync::Arc;

/// A `group` or `split` op of the function once P and the dims are bound.
#[derive(Clone, Debug)]
pub(super) struct GroupDef {
    /// The world's context, the op's operand.
    ctx: Value,
    /// Where its ranks sit among the world's.
    place: Place,
    /// For a split: its tables and its source location, which reports name a rank's place by.
    split: Option<(Arc<Table>, String)>,
}

/// A group's ranks among the world's.
#[derive(Clone, Debug)]
enum Place {
    /// The ranks of a process grid whose coordinates differ only at `axis`.
    Grid {
        /// The grid's extents, outermost first.
        grid: Vec<u64>,
        /// The group's axis.
        axis: usize,
    },
    /// A split's groups that are no grid's ([`split::Table`]), and this rank's entries of the
    /// tables once emitted where the split is ([`GroupDef::define`]).
    Table(Arc<Table>, Rc<OnceCell<Entries>>),
}

/// This rank's entries of a split's tables, emitted once where the split is (so that every
/// use of the group, which the split dominates, reads them).
#[derive(Clone, Copy, Debug)]
struct Entries {
    /// This rank's world rank.
    world: Value,
    /// Its group rank, `-1` in no group.
    me: Value,
    /// Its group's first index in the members.
    start: Value,
    /// Its group's rank count.
    size: Value,
    /// The members as a local `i64` array, when the table has too many runs for `select`s at
    /// each use.
    members: Option<Value>,
}

/// A members table of more runs than this is read from a local array.
const MAX_RUNS: usize = 8;

/// How a program's rank groups place a world rank, for reports
/// ([`crate::Artifact::rank_place`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RankLayout {
    /// A process grid's extents, outermost first (row-major over the world ranks): a rank's
    /// group rank in the group of axis `a` is its coordinate `a`.
    Grid(Vec<u64>),
    /// The groups of a split: where the split is (`file:line`) and per world rank its color,
    /// its group rank and its group's rank count (`None`: a negative color, in no group).
    Split {
        /// The split's source location.
        at: String,
        /// Per world rank.
        ranks: Vec<Option<(i64, u64, u64)>>,
    },
}

impl RankLayout {
    /// Where world rank `rank` sits: `at [1, 2] of the rank grid [2, 4]`, `rank 1 of 3 in
    /// the group of color 0 of the split at src/k.rs:12`, `in no group of the split at ...`.
    pub fn place(&self, rank: usize) -> String {
        let show = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
        match self {
            RankLayout::Grid(g) => {
                let mut rest = rank as u64;
                let mut at = vec![0u64; g.len()];
                for (i, e) in g.iter().enumerate().rev() {
                    at[i] = rest % (*e).max(1);
                    rest /= (*e).max(1);
                }
                format!("at [{}] of the rank grid [{}]", show(&at), show(g))
            }
            RankLayout::Split { at, ranks } => match ranks.get(rank).copied().flatten() {
                Some((c, q, n)) => {
                    format!("rank {q} of {n} in the group of color {c} of the split at {at}")
                }
                None => format!("in no group of the split at {at} (its color is negative)"),
            },
        }
    }
}

impl GroupDef {
    /// How reports name a rank's place in the group's grid or split.
    pub(super) fn layout(&self) -> RankLayout {
        match (&self.split, &self.place) {
            (Some((t, at)), _) => RankLayout::Split {
                at: at.clone(),
                ranks: (0..t.me.len())
                    .map(|w| {
                        let (c, n) = (t.color[w]?, t.size[w]?);
                        Some((c, t.me[w] as u64, n as u64))
                    })
                    .collect(),
            },
            (None, Place::Grid { grid, .. }) => RankLayout::Grid(grid.clone()),
            (None, Place::Table(..)) => RankLayout::Grid(vec![]),
        }
    }

    /// The rank count of the largest group of its grid or split (a constant group rank of it
    /// or more is past every group).
    pub(super) fn largest(&self) -> u64 {
        match &self.place {
            Place::Grid { grid, axis } => grid[*axis],
            Place::Table(t, _) => t.largest(),
        }
    }

    /// Emits, where a split is, this rank's entries of its tables (nothing for a grid's).
    pub(super) fn define(&self, em: &mut Em<'_>) {
        if let Place::Table(t, cell) = &self.place {
            if cell.get().is_none() {
                let e = entries(em, self.ctx, t);
                let _ = cell.set(e);
            }
        }
    }

    /// The group's rank count when every group of its grid or split has the same: the grid's
    /// extent at its axis; `None` for a split whose groups differ in size.
    pub(super) fn size(&self) -> Option<u64> {
        match &self.place {
            Place::Grid { grid, axis } => Some(grid[*axis]),
            Place::Table(t, _) => t.uniform(),
        }
    }

    /// The group sizes as a message names them when they differ (empty for a grid).
    pub(super) fn sizes(&self) -> String {
        match &self.place {
            Place::Grid { .. } => String::new(),
            Place::Table(t, _) => t.sizes(),
        }
    }

    /// Emits this rank's world rank and group rank (defining `into` when given); returns
    /// both. In a grid the group rank is `(world / stride) % size`; in a split's tables it is
    /// read from them, and a rank in no group stops here ([`eagle_ir::Trap::NoGroup`]).
    fn ranks(&self, em: &mut Em<'_>, into: Option<Value>) -> (Value, Value) {
        let (world, kind) = match &self.place {
            Place::Grid { grid, axis } => {
                let world = em.push(OpKind::Rank(self.ctx), Type::Scalar(DType::Index));
                let s = em.idx(grid[axis + 1..].iter().product());
                let t = em.ibin(BinOp::Div, world, s);
                let n = em.idx(grid[*axis]);
                (world, OpKind::Binary(BinOp::Rem, t, n))
            }
            Place::Table(t, cell) => {
                let e = *cell.get_or_init(|| entries(em, self.ctx, t));
                if t.excluded() {
                    let zero = em.idx(0);
                    let cond = em.cmp(CmpOp::Lt, e.me, zero);
                    em.push_void(OpKind::TrapIf {
                        cond,
                        a: e.world,
                        b: e.me,
                        kind: eagle_ir::Trap::NoGroup,
                    });
                }
                let zero = em.idx(0);
                (e.world, OpKind::Binary(BinOp::Add, e.me, zero))
            }
        };
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
    /// group ranks, the group's size and what turns a group rank into a world rank.
    pub(super) fn at(&self, em: &mut Em<'_>, world_size: u64, sig: Option<Value>) -> GroupAt {
        let (world, me) = self.ranks(em, None);
        let (size, to_world) = match &self.place {
            Place::Grid { grid, axis } => {
                let size = grid[*axis];
                let stride: u64 = grid[axis + 1..].iter().product();
                // `world - me * stride`, written so that range analysis bounds it (with `q *
                // stride` added, `q < size`) within 0..P: the start of this rank's block of
                // `size * stride` ranks plus its place within a stride.
                let block = em.idx(size * stride);
                let b = em.ibin(BinOp::Div, world, block);
                let start = em.ibin(BinOp::Mul, b, block);
                let s = em.idx(stride);
                let within = em.ibin(BinOp::Rem, world, s);
                let base = em.ibin(BinOp::Add, start, within);
                let n = em.idx(size);
                (n, ToWorld::Grid { stride, base })
            }
            Place::Table(t, cell) => {
                let e = *cell.get_or_init(|| entries(em, self.ctx, t));
                let to_world = ToWorld::Table {
                    table: Arc::clone(t),
                    start: e.start,
                    members: e.members,
                };
                (e.size, to_world)
            }
        };
        GroupAt {
            ctx: self.ctx,
            size: self.size(),
            size_v: size,
            to_world,
            world_size,
            world,
            me,
            sig,
        }
    }
}

/// Emits this rank's entries of the split tables `t` (`ctx` the world's context): `select`s
/// over the tables' runs, and the members as a local array when they have more than
/// [`MAX_RUNS`] runs (filled here, once per run of the function).
fn entries(em: &mut Em<'_>, ctx: Value, t: &Table) -> Entries {
    let world = em.push(OpKind::Rank(ctx), Type::Scalar(DType::Index));
    let me: Vec<Option<i64>> = t.me.iter().map(|&x| Some(x)).collect();
    let me = lookup(em, &me, world);
    let start = lookup(em, &t.start, world);
    let size = match t.uniform() {
        Some(n) => em.idx(n),
        None => lookup(em, &t.size, world),
    };
    let all: Vec<Option<i64>> = t.members.iter().map(|&w| Some(w)).collect();
    let members = (split::runs(&all).len() > MAX_RUNS).then(|| {
        let n = t.members.len() as u64;
        let a = em.push(
            OpKind::LocalArray,
            Type::Tensor(eagle_ir::Shape(vec![eagle_ir::Dim::Const(n)]), DType::I64),
        );
        for (i, &w) in t.members.iter().enumerate() {
            let v = em.push(
                OpKind::Const(Const::Int(i128::from(w))),
                Type::Scalar(DType::I64),
            );
            let i = em.idx(i as u64);
            em.push_void(OpKind::SetElem {
                value: v,
                dst: a,
                indices: vec![i],
            });
        }
        a
    });
    Entries {
        world,
        me,
        start,
        size,
        members,
    }
}

/// How [`GroupAt::world_of`] turns a group rank into a world rank.
#[derive(Clone, Debug)]
enum ToWorld {
    /// `base + q * stride`.
    Grid {
        /// World ranks between consecutive ranks of the group.
        stride: u64,
        /// The world rank of the group's rank 0.
        base: Value,
    },
    /// `members[start + q]`.
    Table {
        /// The split's tables.
        table: Arc<Table>,
        /// This rank's group's first index in `members`.
        start: Value,
        /// The members as a local array, if they are one.
        members: Option<Value>,
    },
}

/// A group as an expansion within it uses it: its extents and the values [`GroupDef::at`]
/// emitted.
#[derive(Clone, Debug)]
pub(super) struct GroupAt {
    /// The world's context.
    ctx: Value,
    /// Ranks in the group when every group of its split has as many.
    size: Option<u64>,
    /// Ranks in the group, as a value.
    size_v: Value,
    /// From group ranks to world ranks.
    to_world: ToWorld,
    /// P.
    pub(super) world_size: u64,
    /// This rank's world rank.
    world: Value,
    /// This rank's group rank.
    pub(super) me: Value,
    /// The function's signal window (`4P` slots), absent only in a direct call of the pass.
    sig: Option<Value>,
}

impl GroupAt {
    /// Ranks in the group (a collective within a group is lowered only when every group of
    /// its split has one size: `lower_team_op`).
    pub(super) fn size(&self) -> u64 {
        self.size.unwrap_or(0)
    }

    /// The world rank of group rank `q`: `base + q * stride` in a grid, `members[start + q]`
    /// in a split's tables.
    pub(super) fn world_of(&self, em: &mut Em<'_>, q: Value) -> Value {
        match &self.to_world {
            ToWorld::Grid { stride, base } => {
                let s = em.idx(*stride);
                let o = em.ibin(BinOp::Mul, q, s);
                em.ibin(BinOp::Add, *base, o)
            }
            ToWorld::Table {
                table,
                start,
                members,
            } => {
                let i = em.ibin(BinOp::Add, *start, q);
                match members {
                    Some(a) => {
                        let w = em.push(
                            OpKind::Elem {
                                src: *a,
                                indices: vec![i],
                            },
                            Type::Scalar(DType::I64),
                        );
                        em.push(OpKind::Cast(w), Type::Scalar(DType::Index))
                    }
                    None => {
                        let all: Vec<Option<i64>> =
                            table.members.iter().map(|&w| Some(w)).collect();
                        lookup(em, &all, i)
                    }
                }
            }
        }
    }

    /// Slot `region + w` of the signal window.
    fn slot(em: &mut Em<'_>, region: u64, w: Value) -> Value {
        let r = em.idx(region);
        em.ibin(BinOp::Add, r, w)
    }

    /// Runs `body(world rank)` for every other member of the group, in group-rank order.
    fn for_each_other(&self, em: &mut Em<'_>, body: impl Fn(&mut Em<'_>, Value)) {
        let each = |em: &mut Em<'_>, q: Value| {
            let other = em.cmp(CmpOp::Ne, self.me, q);
            em.if_(
                other,
                |em| {
                    let w = self.world_of(em, q);
                    body(em, w);
                },
                |_| {},
            );
        };
        match self.size {
            Some(n) => em.for_(0, n, each),
            None => {
                let zero = em.idx(0);
                em.for_v(zero, self.size_v, each);
            }
        }
    }

    /// Every rank of the group arrives before any leaves: each rank counts one more barrier
    /// with every other rank of the group and sets that count in its slot on that rank; then it
    /// waits until each of them has set its slot here to at least the same count. Without a
    /// signal window (a direct call of the pass, never at specialization) it is the world's
    /// barrier, correct only when every rank of the world reaches it.
    pub(super) fn barrier(&self, em: &mut Em<'_>) {
        if self.size == Some(1) {
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
                        place: Place::Grid {
                            grid: extents,
                            axis,
                        },
                        split: None,
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
            let layout = place.or(nested).map_or_else(
                || split::layout(f, &facts, consts, (*ctx, *color, *key), p),
                Err,
            );
            match (layout, op.result) {
                (Err(m), _) => err = Some(fail("split", m)),
                (Ok(layout), Some(r)) => {
                    let place = match layout.grid {
                        Some(grid) => Place::Grid { grid, axis: 1 },
                        None => Place::Table(Arc::clone(&layout.table), Rc::default()),
                    };
                    let at = op.loc.as_ref().map_or_else(
                        || "an unknown line".to_string(),
                        |l| format!("{}:{}", l.file, l.line),
                    );
                    let split = Some((layout.table, at));
                    defs.insert(
                        r,
                        GroupDef {
                            ctx: *ctx,
                            place,
                            split,
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

/// A `broadcast` within the group `def` (of `n` ranks) from `root`: a constant root past the
/// group's ranks is refused before anything runs; any other is checked when it runs
/// ([`Trap::GroupRoot`]).
///
/// # Errors
/// [`SpecializeError::Group`] for a constant root of `n` or more.
///
/// [`Trap::GroupRoot`]: eagle_ir::Trap::GroupRoot
pub(super) fn check_root(
    em: &mut Em<'_>,
    op: &Op,
    root: Value,
    n: u64,
    cx: &super::Lowering<'_>,
) -> Result<(), SpecializeError> {
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

/// Lowers collective `op` within `def`, a split whose groups differ in size: one expansion per
/// size `n` (ascending), each the world's expansion for a world of `n` ranks, the one run
/// chosen by this rank's group size; so each group gets the bits of the collective on a world
/// of its size. A `broadcast` root is checked when it runs.
///
/// # Errors
/// [`SpecializeError::Group`] for the collectives whose buffers have one row per group rank
/// (the row forms of `allgather` and `reduce_scatter`, `all_to_all`, `all_to_all_v`,
/// `allgather_v`): one buffer shape cannot fit groups of different sizes; and what the
/// expansions return.
pub(super) fn lower_uneven(
    em: &mut Em<'_>,
    op: &Op,
    def: &GroupDef,
    cx: &super::Lowering<'_>,
) -> Result<bool, SpecializeError> {
    let ty = |v: Value| em.ty(v);
    let per_rank = if let OpKind::AllGather { src, dst, .. } = &op.kind {
        ty(*dst).holds_rows_of(&ty(*src)) || !matches!(ty(*src), Type::Window(..))
    } else if let OpKind::ReduceScatter { src, dst, .. } = &op.kind {
        ty(*src).holds_rows_of(&ty(*dst))
    } else {
        matches!(
            op.kind,
            OpKind::AllToAll { .. } | OpKind::AllToAllV { .. } | OpKind::AllGatherV { .. }
        )
    };
    if def.largest() == 0 {
        // No rank has a group: every rank that gets here stops (`no_group`).
        def.at(em, cx.p, cx.sig);
        return Ok(true);
    }
    if per_rank {
        return Err(SpecializeError::Group {
            function: cx.f_name.to_string(),
            op: op.kind.info().name.to_string(),
            loc: op.loc.clone().map(Box::new),
            message: format!(
                "a collective whose buffers have one row per group rank, within the groups of \
                 a split whose groups differ in size ({}): one buffer shape cannot fit them; \
                 give every group the same number of ranks, or use the same-shape forms \
                 (`allreduce`, `broadcast`, `allgather` and `reduce_scatter` of equal \
                 buffers), which take groups of any size",
                def.sizes()
            ),
        });
    }
    let mut sizes = match &def.place {
        Place::Table(t, _) => t.size.iter().flatten().map(|&n| n as u64).collect(),
        Place::Grid { .. } => vec![],
    };
    sizes.sort_unstable();
    sizes.dedup();
    if let OpKind::Broadcast { root, .. } = op.kind {
        // A constant root past every group is refused now; others are checked as they run.
        let n = def.largest();
        refuse_constant_past(op, root, n, cx, "broadcast", |r| {
            format!(
                "the root is {r}, but the largest group's ranks are 0 to {}; the root of a \
                 broadcast within a group is a group rank: give one below `nranks(group)`",
                n - 1
            )
        })?;
    }
    let at = def.at(em, cx.p, cx.sig);
    by_size(em, &at, &sizes, op, cx)
}

/// [`lower_uneven`]'s expansions for `sizes`: the first when this rank's group has that many
/// ranks, else the others.
fn by_size(
    em: &mut Em<'_>,
    at: &GroupAt,
    sizes: &[u64],
    op: &Op,
    cx: &super::Lowering<'_>,
) -> Result<bool, SpecializeError> {
    let Some((&n, rest)) = sizes.split_first() else {
        return Ok(true);
    };
    let expand = |em: &mut Em<'_>| {
        let mut g = at.clone();
        g.size = Some(n);
        em.group = Some(g);
        if let OpKind::Broadcast { root, .. } = op.kind {
            em.trap_unless_below(root, n, eagle_ir::Trap::GroupRoot);
        }
        let r = super::lower_collective(em, op.kind.clone(), cx.f_name, op.loc.clone(), n, cx.sig);
        em.group = None;
        r
    };
    if rest.is_empty() {
        return expand(em);
    }
    let (mut this, mut others) = (Ok(true), Ok(true));
    let nv = em.idx(n);
    let here = em.cmp(CmpOp::Eq, at.size_v, nv);
    em.if_(
        here,
        |em| this = expand(em),
        |em| others = by_size(em, at, rest, op, cx),
    );
    this?;
    others
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
/// anything runs (when every group has one size); any other `q` is checked when it runs
/// ([`Trap::GroupRank`]).
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
    // Groups of different sizes: a rank past the largest now, others as it runs.
    let (n, whose) = match def.size() {
        Some(n) => (n, "a group whose"),
        None => (def.largest(), "a split whose largest group's"),
    };
    if n == 0 {
        return Ok(());
    }
    refuse_constant_past(op, q, n, cx, "world_rank", |k| {
        format!(
            "group rank {k} of {whose} ranks are 0 to {}; give a rank below \
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
    let zero = |em: &mut Em<'_>| em.idx(0);
    if let OpKind::Rank(_) = op.kind {
        def.ranks(em, op.result);
    } else if let OpKind::NRanks(_) = op.kind {
        if let (Place::Grid { .. }, Some(n)) = (&def.place, def.size()) {
            em.append(OpKind::Const(Const::Int(i128::from(n))), op.result);
        } else {
            // A split's tables: a rank in no group stops; sizes may differ by rank.
            let g = def.at(em, world_size, sig);
            let z = zero(em);
            em.append(OpKind::Binary(BinOp::Add, g.size_v, z), op.result);
        }
    } else if let OpKind::WorldRank { rank, .. } = op.kind {
        // First the group (a rank in none stops there), then the rank within it.
        let g = def.at(em, world_size, sig);
        if let Some(n) = def.size() {
            em.trap_unless_below(rank, n, eagle_ir::Trap::GroupRank);
        } else {
            // `rank` past this rank's group, compared as unsigned (a negative one is past).
            let u = em.push(OpKind::Cast(rank), Type::Scalar(DType::U64));
            let n = em.push(OpKind::Cast(g.size_v), Type::Scalar(DType::U64));
            let cond = em.cmp(CmpOp::Ge, u, n);
            em.push_void(OpKind::TrapIf {
                cond,
                a: rank,
                b: g.size_v,
                kind: eagle_ir::Trap::GroupRank,
            });
        }
        let w = g.world_of(em, rank);
        let z = zero(em);
        em.append(OpKind::Binary(BinOp::Add, w, z), op.result);
    } else if let OpKind::Barrier(_) = op.kind {
        def.at(em, world_size, sig).barrier(em);
    } else {
        // A collective (the only other ops that take a context).
        return false;
    }
    true
}
