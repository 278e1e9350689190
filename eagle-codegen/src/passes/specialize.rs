//! Specialization: bind a world size and symbolic dims, fold constants, check bounds.

use super::bind::derived_dim_error;
use crate::error::SpecializeError;
use eagle_ir::entity::{EntitySet, SecondaryMap};
use eagle_ir::eval::{self, Scalar};
use eagle_ir::{
    print_op, verify_module, BinOp, Block, CmpOp, Const, DType, Dim, Facts, Function,
    FunctionFacts, IndexRange, Level, Module, Op, OpKind, Ops, Type, UnOp, Value,
};
use std::collections::{BTreeMap, HashMap};

/// Largest tensor or window (bytes) a specialization accepts: 1 TiB.
pub const MAX_BUFFER_BYTES: u64 = 1 << 40;

/// Most bytes of tile storage one device or compute function may use on the CPU (device
/// threads run on 16 MiB stacks). Defined here, where specialization checks it, and used by
/// the CPU backend (`crate::cpu::MAX_TILE_BYTES`), so that passes depend on no backend.
pub const CPU_MAX_TILE_BYTES: u64 = 4 << 20;

/// What a module is specialized for: the world size P and a value for every symbolic dim.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Bindings {
    /// Number of ranks (P).
    pub world_size: u64,
    /// Symbolic dim values, by name (`NR` = P for the tutorial programs).
    pub dims: BTreeMap<String, u64>,
}

impl Bindings {
    /// Bindings for world size `p` and no dims.
    pub fn world(p: u64) -> Self {
        Bindings {
            world_size: p,
            dims: BTreeMap::new(),
        }
    }
    /// Adds a dim binding.
    pub fn with(mut self, name: &str, value: u64) -> Self {
        self.dims.insert(name.to_string(), value);
        self
    }
    /// Canonical text, part of the cache key: `P=4 NR=4`.
    pub fn key_text(&self) -> String {
        let mut s = format!("P={}", self.world_size);
        for (k, v) in &self.dims {
            s.push_str(&format!(" {k}={v}"));
        }
        s
    }
}

/// A closed interval of an integer value's mathematical values; whether it derives from the
/// world size or a rank; whether it is only a bound (`loose`: a clamp of a value with no
/// range, `min(x, 7)`, lies in `i64::MIN..=7`, yet need not reach 7); and whether the
/// run-time value may differ from the mathematical one (`wrapped`: this range, or one it was
/// built from, does not fit its dtype, as `me - 1` on `u32` at rank 0).
///
/// Error reports use ranges that are not loose (a wrapped range still shows the bug: `-1`
/// as a peer). The backends skip the bounds checks that the exported ranges prove
/// ([`eagle_ir::Facts`]): only ranges that are not wrapped, which hold every run-time value.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Range {
    lo: i128,
    hi: i128,
    world: bool,
    loose: bool,
    wrapped: bool,
}

impl Range {
    /// `lo..=hi`, a fact of the world size (a rank, or P itself).
    fn of_world(lo: i128, hi: i128) -> Range {
        Range {
            lo,
            hi,
            world: true,
            loose: false,
            wrapped: false,
        }
    }

    /// The induction variable of `for i in lo..hi` with `lo` in `l` and `hi` in `h`.
    fn loop_var(l: Range, h: Range) -> Range {
        Range {
            lo: l.lo,
            hi: (h.hi - 1).max(l.lo),
            world: l.world || h.world,
            loose: l.loose || h.loose,
            wrapped: l.wrapped || h.wrapped,
        }
    }

    fn point(v: i128) -> Range {
        Range {
            lo: v,
            hi: v,
            world: false,
            loose: false,
            wrapped: false,
        }
    }
    /// The values of both, or None when they share none.
    fn meet(self, o: Range) -> Option<Range> {
        let (lo, hi) = (self.lo.max(o.lo), self.hi.min(o.hi));
        (lo <= hi).then_some(Range {
            lo,
            hi,
            world: self.world || o.world,
            loose: self.loose || o.loose,
            wrapped: self.wrapped || o.wrapped,
        })
    }
    fn with(self, lo: i128, hi: i128) -> Option<Range> {
        (lo <= hi).then_some(Range { lo, hi, ..self })
    }
    /// Every value of integer dtype `d` (`index` is a signed 64-bit integer), as a loose
    /// range (None for other dtypes).
    fn full(d: DType) -> Option<Range> {
        // The compute dtypes' ranges (narrow integers are widened before this pass).
        let (lo, hi) = d.int_range().filter(|_| !d.is_narrow())?;
        Some(Range {
            lo,
            hi,
            world: false,
            loose: true,
            wrapped: false,
        })
    }
    /// Whether every value of the range is representable in `d`: then the run-time value is
    /// the mathematical one (no wrap-around), so a comparison on it can narrow the range.
    fn fits(self, d: DType) -> bool {
        let nonneg = d != DType::Index || self.lo >= 0;
        !self.wrapped && nonneg && self.representable(d)
    }
    /// Whether every value of the range is a value of `d` (so the run-time value cannot
    /// have wrapped around in this op).
    fn representable(self, d: DType) -> bool {
        Range::full(d).is_some_and(|f| self.lo >= f.lo && self.hi <= f.hi)
    }
}

/// The ranges of `a` and `b` where `a c b` holds, or None when it never does.
fn narrow_cmp(c: CmpOp, a: Range, b: Range) -> Option<(Range, Range)> {
    Some(match c {
        CmpOp::Lt => (
            a.with(a.lo, a.hi.min(b.hi - 1))?,
            b.with(b.lo.max(a.lo + 1), b.hi)?,
        ),
        CmpOp::Le => (a.with(a.lo, a.hi.min(b.hi))?, b.with(b.lo.max(a.lo), b.hi)?),
        CmpOp::Gt => {
            let (b2, a2) = narrow_cmp(CmpOp::Lt, b, a)?;
            (a2, b2)
        }
        CmpOp::Ge => {
            let (b2, a2) = narrow_cmp(CmpOp::Le, b, a)?;
            (a2, b2)
        }
        CmpOp::Eq => {
            let m = a.meet(b)?;
            (
                Range {
                    world: a.world,
                    ..m
                },
                Range {
                    world: b.world,
                    ..m
                },
            )
        }
        CmpOp::Ne => {
            // Only a point can be cut off the end of the other range.
            let cut = |x: Range, p: Range| -> Option<Range> {
                if p.lo != p.hi {
                    Some(x)
                } else if x.lo == p.lo {
                    x.with(x.lo + 1, x.hi)
                } else if x.hi == p.lo {
                    x.with(x.lo, x.hi - 1)
                } else {
                    Some(x)
                }
            };
            (cut(a, b)?, cut(b, a)?)
        }
    })
}

/// The hull of the argument ranges of two call sites (unknown where either is unknown).
fn hull_sites(a: &[Option<Range>], b: &[Option<Range>]) -> Vec<Option<Range>> {
    a.iter()
        .zip(b)
        .map(|(x, y)| match (x, y) {
            (Some(x), Some(y)) => Some(Range {
                lo: x.lo.min(y.lo),
                hi: x.hi.max(y.hi),
                world: x.world || y.world,
                loose: x.loose || y.loose,
                wrapped: x.wrapped || y.wrapped,
            }),
            _ => None,
        })
        .collect()
}

fn range_bin(op: BinOp, a: Range, b: Range) -> Option<Range> {
    let world = a.world || b.world;
    let loose = a.loose || b.loose;
    let wrapped = a.wrapped || b.wrapped;
    let (lo, hi) = match op {
        BinOp::Add => (a.lo.checked_add(b.lo)?, a.hi.checked_add(b.hi)?),
        BinOp::Sub => (a.lo.checked_sub(b.hi)?, a.hi.checked_sub(b.lo)?),
        BinOp::Mul => {
            let p = [
                a.lo.checked_mul(b.lo)?,
                a.lo.checked_mul(b.hi)?,
                a.hi.checked_mul(b.lo)?,
                a.hi.checked_mul(b.hi)?,
            ];
            (*p.iter().min()?, *p.iter().max()?)
        }
        BinOp::Div if b.lo > 0 => {
            let p = [a.lo / b.lo, a.lo / b.hi, a.hi / b.lo, a.hi / b.hi];
            (*p.iter().min()?, *p.iter().max()?)
        }
        BinOp::Rem if b.lo > 0 => {
            let m = b.hi - 1;
            if a.lo >= 0 {
                (0, a.hi.min(m))
            } else if a.hi <= 0 {
                (a.lo.max(-m), 0)
            } else {
                (a.lo.max(-m), a.hi.min(m))
            }
        }
        BinOp::Min => (a.lo.min(b.lo), a.hi.min(b.hi)),
        BinOp::Max => (a.lo.max(b.lo), a.hi.max(b.hi)),
        // No range kept: the result may leave the operands' ranges in ways not tracked here.
        BinOp::Div | BinOp::Rem | BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Shl | BinOp::Shr => {
            return None
        }
    };
    Some(Range {
        lo,
        hi,
        world,
        loose,
        wrapped,
    })
}

struct Spec<'a> {
    b: &'a Bindings,
    /// The function's op arena while the analysis runs (taken out of the function, so an op
    /// being rewritten and the function it reads stay apart).
    ops: Ops,
    /// Storage dtypes are widened (the second pass of a device or compute function): a value
    /// of a storage dtype is then a bit pattern on its way to or from memory, and is not
    /// folded into a constant (the backends hold no constants of those dtypes).
    widened: bool,
    consts: SecondaryMap<Value, Const>,
    ranges: SecondaryMap<Value, Range>,
    /// Tensor values that are (slices of) a parameter: (param name, dims sliced off).
    origin: SecondaryMap<Value, (String, usize)>,
    /// Depth of `if` and `while` bodies around the op: there the range analysis (which is not
    /// path-sensitive) cannot prove a violation, so checks are left to run time.
    guarded: usize,
    /// Depth of code proven not to run around the op (empty loops, branches whose condition
    /// cannot hold): nothing there runs, nothing is checked.
    dead: usize,
    /// Defining op of scalar integer and boolean values (for narrowing at branches).
    defs: SecondaryMap<Value, OpKind>,
    /// The value types before binding (a dim written as a constant or as a symbol).
    generic: &'a [Type],
    /// The ranges of the arguments at this function's call and dispatch sites, per callee
    /// (the hull over the sites; `None` where some site's argument has no range).
    calls: HashMap<String, Vec<Option<Range>>>,
    /// Parameters whose range comes from every call site: (parameter name, caller).
    seeded: SecondaryMap<Value, (String, String)>,
}

impl Spec<'_> {
    fn p(&self) -> u64 {
        self.b.world_size
    }

    fn set_const(&mut self, v: Value, c: Const) {
        self.consts.insert(v, c);
        if let Const::Int(i) = c {
            let world = self.ranges.get(v).is_some_and(|r| r.world);
            self.ranges.insert(
                v,
                Range {
                    world,
                    ..Range::point(i)
                },
            );
        }
    }

    /// The ranges recorded over the whole function, for the backends.
    fn proven(&self, f: &Function) -> FunctionFacts {
        let mut out = FunctionFacts::default();
        for (v, r) in self.ranges.iter() {
            if !r.wrapped && f.ty(v).dtype().is_some_and(|d| r.representable(d)) {
                out.set_range(v, IndexRange { lo: r.lo, hi: r.hi });
            }
        }
        out
    }

    /// The range of `v` where it is certain enough to report a violation: everywhere outside
    /// `if` bodies, and inside them only for constants (the analysis is not path-sensitive, so
    /// a guarded range may include values the guard excludes; those are checked at run time).
    fn known(&self, v: Value) -> Option<Range> {
        self.ranges
            .get(v)
            .copied()
            .filter(|r| !r.loose && self.dead == 0 && (self.guarded == 0 || r.lo == r.hi))
    }

    /// A world `broadcast`'s root against P; a group's is a group rank (`lower_collectives`).
    fn check_root(&self, f: &Function, op: &Op, r: Value, c: Value) -> Result<(), SpecializeError> {
        if !f.params.iter().any(|q| q.value == c) {
            return Ok(());
        }
        self.check_rank(f, op, r, "root")
    }

    fn check_rank(
        &self,
        f: &Function,
        op: &Op,
        v: Value,
        what: &str,
    ) -> Result<(), SpecializeError> {
        let Some(r) = self.known(v) else {
            return Ok(());
        };
        if r.lo < 0 {
            return Err(SpecializeError::NegativePeer {
                function: f.name.clone(),
                op: print_op(f, op),
                loc: op.loc.clone().map(Box::new),
                lo: r.lo,
                hi: r.hi,
            });
        }
        if r.hi >= self.p() as i128 {
            let what = match self.seeded.get(v) {
                Some((param, caller)) => {
                    format!("{what} (parameter `{param}`, as `{caller}` passes it)")
                }
                None => what.to_string(),
            };
            return Err(SpecializeError::RankOutOfRange {
                function: f.name.clone(),
                op: print_op(f, op),
                loc: op.loc.clone().map(Box::new),
                what,
                lo: r.lo,
                hi: r.hi,
                world_size: self.p(),
            });
        }
        Ok(())
    }

    fn check_offsets(
        &self,
        f: &Function,
        op: &Op,
        mem: Value,
        offsets: &[Value],
        tile: Option<Value>,
    ) -> Result<(), SpecializeError> {
        if self.dead > 0 {
            return Ok(());
        }
        let extents = f
            .ty(mem)
            .shape()
            .and_then(|s| s.consts())
            .unwrap_or_default();
        let tile_ext = tile
            .and_then(|t| f.ty(t).shape().and_then(|s| s.consts()))
            .unwrap_or_else(|| vec![1; extents.len()]);
        for (d, (&o, (&e, &t))) in offsets
            .iter()
            .zip(extents.iter().zip(&tile_ext))
            .enumerate()
        {
            let r = self.known(o);
            let bad = |lo: i128, hi: i128| SpecializeError::IndexOutOfBounds {
                function: f.name.clone(),
                op: print_op(f, op),
                loc: op.loc.clone().map(Box::new),
                operand: if t > 1 {
                    format!("the offset in dim {d} plus the tile extent {t}")
                } else {
                    format!("the offset in dim {d}")
                },
                dim: d as u32,
                lo,
                hi,
                extent: e,
            };
            if t > e {
                return Err(bad(
                    r.map_or(0, |r| r.lo),
                    r.map_or(t as i128 - 1, |r| r.hi + t as i128 - 1),
                ));
            }
            if let Some(r) = r {
                if r.lo < 0 || r.hi + t as i128 > e as i128 {
                    return Err(bad(r.lo, r.hi + t as i128 - 1));
                }
            }
        }
        Ok(())
    }

    /// Records the argument ranges of a call or dispatch that can run.
    fn record_call(&mut self, callee: &str, args: &[Value]) {
        if self.dead > 0 {
            return;
        }
        let sites: Vec<Option<Range>> = args.iter().map(|a| self.ranges.get(*a).copied()).collect();
        let merged = match self.calls.get(callee) {
            Some(old) => hull_sites(old, &sites),
            None => sites,
        };
        self.calls.insert(callee.to_string(), merged);
    }

    /// Runs the analysis over a branch body with the ranges its condition implies (`None`: the
    /// condition never holds, so the body never runs and nothing in it is checked).
    fn branch(
        &mut self,
        f: &Function,
        body: &mut Block,
        narrowed: Option<Vec<(Value, Range)>>,
    ) -> Result<(), SpecializeError> {
        let Some(narrowed) = narrowed else {
            self.dead += 1;
            let r = self.block(f, body);
            self.dead -= 1;
            return r;
        };
        let saved: Vec<(Value, Option<Range>)> = narrowed
            .iter()
            .map(|(v, _)| (*v, self.ranges.get(*v).copied()))
            .collect();
        for (v, r) in narrowed {
            self.ranges.insert(v, r);
        }
        let r = self.block(f, body);
        for (v, old) in saved.into_iter().rev() {
            match old {
                Some(o) => self.ranges.insert(v, o),
                None => self.ranges.remove(v),
            };
        }
        r
    }

    /// The narrower ranges that hold where `cond` is `truth` (`me > 0` gives `me` in 1..P-1,
    /// and through `me + 1 < n` also `me` in 0..P-2), or None when that never happens. Only
    /// comparisons whose operand ranges fit their dtype narrow (no wrap-around).
    fn narrowings(
        &self,
        f: &Function,
        cond: Value,
        truth: bool,
        depth: usize,
    ) -> Option<Vec<(Value, Range)>> {
        let mut out: Vec<(Value, Range)> = vec![];
        if let Some(Const::Bool(k)) = self.consts.get(cond) {
            return (*k == truth).then_some(out);
        }
        if depth > 8 {
            return Some(out);
        }
        let merge = |out: &mut Vec<(Value, Range)>, more: Vec<(Value, Range)>| -> Option<()> {
            for (v, r) in more {
                match out.iter_mut().find(|(w, _)| *w == v) {
                    Some((_, old)) => *old = old.meet(r)?,
                    None => out.push((v, r)),
                }
            }
            Some(())
        };
        match self.defs.get(cond) {
            Some(OpKind::Cmp(c, a, b)) => {
                let d = f.ty(*a).dtype()?;
                let (Some(&ra), Some(&rb)) = (self.ranges.get(*a), self.ranges.get(*b)) else {
                    return Some(out);
                };
                if !(ra.fits(d) && rb.fits(d)) {
                    return Some(out);
                }
                let c = if truth { *c } else { c.negated() };
                let (na, nb) = narrow_cmp(c, ra, rb)?;
                merge(&mut out, vec![(*a, na), (*b, nb)])?;
                let derived = self.back(f, *a, na, 0)?;
                merge(&mut out, derived)?;
                let derived = self.back(f, *b, nb, 0)?;
                merge(&mut out, derived)?;
            }
            // Both halves of `x && y` hold in the then-branch, of `x || y` neither in the else.
            Some(OpKind::Binary(BinOp::And, x, y)) if truth => {
                merge(&mut out, self.narrowings(f, *x, true, depth + 1)?)?;
                merge(&mut out, self.narrowings(f, *y, true, depth + 1)?)?;
            }
            Some(OpKind::Binary(BinOp::Or, x, y)) if !truth => {
                merge(&mut out, self.narrowings(f, *x, false, depth + 1)?)?;
                merge(&mut out, self.narrowings(f, *y, false, depth + 1)?)?;
            }
            Some(OpKind::Unary(UnOp::Not, x)) => {
                merge(&mut out, self.narrowings(f, *x, !truth, depth + 1)?)?;
            }
            _ => {}
        }
        Some(out)
    }

    /// What `v` in `r` implies for the values `v` was computed from: `x + k`, `x - k` (`k` a
    /// constant) and integer casts, where the ranges fit their dtypes.
    fn back(&self, f: &Function, v: Value, r: Range, depth: usize) -> Option<Vec<(Value, Range)>> {
        let int = |x: &Value| match self.consts.get(*x) {
            Some(Const::Int(k)) => Some(*k),
            _ => None,
        };
        let (x, lo, hi) = match self.defs.get(v) {
            Some(OpKind::Binary(BinOp::Add, x, k)) if int(k).is_some() && int(x).is_none() => {
                let k = int(k)?;
                (*x, r.lo - k, r.hi - k)
            }
            Some(OpKind::Binary(BinOp::Add, k, x)) if int(k).is_some() && int(x).is_none() => {
                let k = int(k)?;
                (*x, r.lo - k, r.hi - k)
            }
            Some(OpKind::Binary(BinOp::Sub, x, k)) if int(k).is_some() && int(x).is_none() => {
                let k = int(k)?;
                (*x, r.lo + k, r.hi + k)
            }
            Some(OpKind::Cast(x)) => (*x, r.lo, r.hi),
            _ => return Some(vec![]),
        };
        let (Some(&rx), Some(dx), Some(dv)) =
            (self.ranges.get(x), f.ty(x).dtype(), f.ty(v).dtype())
        else {
            return Some(vec![]);
        };
        if depth > 4 || !rx.fits(dx) || !self.ranges.get(v).is_some_and(|rv| rv.fits(dv)) {
            return Some(vec![]);
        }
        let nx = rx.meet(Range {
            lo,
            hi,
            world: rx.world,
            loose: rx.loose,
            wrapped: rx.wrapped,
        })?;
        let mut out = vec![(x, nx)];
        out.extend(self.back(f, x, nx, depth + 1)?);
        Some(out)
    }

    /// The constant an elementwise op folds to when every operand is a known constant: the
    /// reference evaluator's result (`eagle_ir::eval`). `None` when an operand is unknown or
    /// the evaluation fails (a division by zero is left to the run-time check).
    fn fold(&self, f: &Function, kind: &OpKind, to: Option<DType>) -> Option<Const> {
        if self.widened && to.is_some_and(DType::is_narrow) {
            return None;
        }
        let args = kind
            .operands()
            .into_iter()
            .map(|v| Scalar::from_const(*self.consts.get(v)?, f.ty(v).dtype()?))
            .collect::<Option<Vec<_>>>()?;
        eval::elementwise(kind, &args, to?)
            .ok()
            .map(Scalar::to_const)
    }

    fn block(&mut self, f: &Function, b: &mut Block) -> Result<(), SpecializeError> {
        for &id in &b.ops {
            let mut op = std::mem::replace(&mut self.ops[id], Op::placeholder());
            let r = self.op(f, &mut op);
            self.ops[id] = op;
            r?;
        }
        Ok(())
    }

    /// Checks a slice's index against its extent (and, on the host, a rank loop against a
    /// pinned world dimension), and records which argument the result is a slice of.
    fn slice(
        &mut self,
        f: &Function,
        op: &Op,
        src: Value,
        index: Value,
        res: Option<Value>,
    ) -> Result<(), SpecializeError> {
        let extent = f
            .ty(src)
            .shape()
            .and_then(|s| s.0.first()?.as_const())
            .unwrap_or(0);
        let origin = self.origin.get(src).cloned();
        // A host tensor sliced by the rank loop has one row per rank: an extent other
        // than P is a pinned (or wrongly bound) world dimension at every P, not only
        // when it is too small. (An index that is a function of the rank spanning less,
        // such as `r % TP` or `r / TP` of a rank grid, is only bounds checked.)
        if let (Some(r), Some((arg, dim)), Level::Host) = (self.known(index), &origin, f.level) {
            let p = self.p();
            if r.world && r.lo == 0 && r.hi == p as i128 - 1 && extent != p {
                let written = self.generic[src.0 as usize]
                    .shape()
                    .and_then(|s| s.0.first().cloned());
                return Err(match written {
                    Some(Dim::Sym(name)) => SpecializeError::WorldDimBound {
                        function: f.name.clone(),
                        argument: arg.clone(),
                        dim: *dim,
                        name: name.to_string(),
                        extent,
                        bound_by: format!("the bindings (`{}`)", self.b.key_text()),
                        world_size: p,
                    },
                    _ => SpecializeError::WorldDimPinned {
                        function: f.name.clone(),
                        argument: arg.clone(),
                        dim: *dim,
                        extent,
                        world_size: p,
                        loc: op.loc.clone().map(Box::new),
                    },
                });
            }
        }
        if let Some(r) = self.known(index) {
            if r.lo < 0 || r.hi >= extent as i128 {
                if let (true, Some((arg, dim)), Level::Host) = (r.world, &origin, f.level) {
                    return Err(SpecializeError::WorldDimPinned {
                        function: f.name.clone(),
                        argument: arg.clone(),
                        dim: *dim,
                        extent,
                        world_size: self.p(),
                        loc: op.loc.clone().map(Box::new),
                    });
                }
                return Err(SpecializeError::IndexOutOfBounds {
                    function: f.name.clone(),
                    op: print_op(f, op),
                    loc: op.loc.clone().map(Box::new),
                    operand: "the index".into(),
                    dim: 0,
                    lo: r.lo,
                    hi: r.hi,
                    extent,
                });
            }
        }
        if let (Some((arg, dim)), Some(r)) = (origin, res) {
            self.origin.insert(r, (arg, dim + 1));
        }
        Ok(())
    }

    /// Checks a subview's offset plus its length against the extent.
    fn subview(
        &self,
        f: &Function,
        op: &Op,
        src: Value,
        offset: Value,
        res: Option<Value>,
    ) -> Result<(), SpecializeError> {
        let first = |v: Value| f.ty(v).shape().and_then(|s| s.0.first()?.as_const());
        let (extent, len) = (first(src).unwrap_or(0), res.and_then(first).unwrap_or(0));
        let what = || format!("the subview offset plus its length {len}");
        self.block_fits(f, op, 0, self.known(offset), len, extent, what)
    }

    /// Checks each offset of a block view plus the view's extent along its dim against the
    /// viewed buffer's extent (the first pass; the second sees the accesses `lower_views`
    /// rewrote onto the viewed buffer). An extent larger than the buffer's (known once the
    /// dims are bound) fits at no offset.
    fn view(
        &self,
        f: &Function,
        op: &Op,
        src: Value,
        offsets: &[Value],
        res: Option<Value>,
    ) -> Result<(), SpecializeError> {
        if self.dead > 0 {
            return Ok(());
        }
        let consts = |v: Value| f.ty(v).shape().and_then(|s| s.consts()).unwrap_or_default();
        let (s, e) = (consts(src), res.map(consts).unwrap_or_default());
        for (d, (&o, (&s, &e))) in offsets.iter().zip(s.iter().zip(&e)).enumerate() {
            let r = match self.known(o) {
                None if e > s => Some(Range::point(0)),
                r => r,
            };
            let what = || format!("the block view's offset in dim {d} plus its extent {e}");
            self.block_fits(f, op, d as u32, r, e, s, what)?;
        }
        Ok(())
    }

    /// [`SpecializeError::IndexOutOfBounds`] unless a block of `len` elements at every offset
    /// in `r` (when known) fits in `extent` along dim `dim`; `what` names the operand.
    #[allow(clippy::too_many_arguments)]
    fn block_fits(
        &self,
        f: &Function,
        op: &Op,
        dim: u32,
        r: Option<Range>,
        len: u64,
        extent: u64,
        what: impl FnOnce() -> String,
    ) -> Result<(), SpecializeError> {
        match r {
            Some(r) if r.lo < 0 || r.hi + len as i128 > extent as i128 => {
                Err(SpecializeError::IndexOutOfBounds {
                    function: f.name.clone(),
                    op: print_op(f, op),
                    loc: op.loc.clone().map(Box::new),
                    operand: what(),
                    dim,
                    lo: r.lo,
                    hi: r.hi + len as i128 - 1,
                    extent,
                })
            }
            _ => Ok(()),
        }
    }

    /// The blocks nested in `op`: a `for` body (dead when empty), an `if`'s branches with what
    /// they know, a `while` body (guarded, as it runs only while its flag holds).
    fn nested(&mut self, f: &Function, op: &mut Op) -> Result<(), SpecializeError> {
        if let OpKind::For { lo, hi, body, .. } = &mut op.kind {
            let empty = matches!(
                (self.consts.get(*lo), self.consts.get(*hi)),
                (Some(Const::Int(l)), Some(Const::Int(h))) if h <= l
            );
            self.dead += usize::from(empty);
            let r = self.block(f, body);
            self.dead -= usize::from(empty);
            r?;
        } else if let OpKind::If {
            cond,
            then_body,
            else_body,
        } = &mut op.kind
        {
            let cond = *cond;
            let taken = self.narrowings(f, cond, true, 0);
            let not_taken = self.narrowings(f, cond, false, 0);
            self.guarded += 1;
            let r = self
                .branch(f, then_body, taken)
                .and_then(|()| self.branch(f, else_body, not_taken));
            self.guarded -= 1;
            r?;
        } else if let OpKind::While { body, .. } = &mut op.kind {
            self.guarded += 1;
            let r = self.block(f, body);
            self.guarded -= 1;
            r?;
        } else {
            for b in op.kind.blocks_mut() {
                self.block(f, b)?;
            }
        }
        Ok(())
    }

    /// The element, tile, remote and signal accesses: their peer is a rank of the world and
    /// their offsets lie inside the buffer, where the bounds are known (else checked at run
    /// time).
    fn check_access(
        &mut self,
        f: &Function,
        op: &Op,
        res: Option<Value>,
    ) -> Result<(), SpecializeError> {
        match &op.kind {
            OpKind::Elem { src, indices } => {
                let (src, indices) = (*src, indices.clone());
                self.check_offsets(f, op, src, &indices, None)?;
            }
            OpKind::SetElem { dst, indices, .. } => {
                let (dst, indices) = (*dst, indices.clone());
                self.check_offsets(f, op, dst, &indices, None)?;
            }
            OpKind::Load { src, offsets } => {
                let (src, offsets) = (*src, offsets.clone());
                self.check_offsets(f, op, src, &offsets, res)?;
            }
            OpKind::Store {
                value,
                dst,
                offsets,
            } => {
                let (v, dst, offsets) = (*value, *dst, offsets.clone());
                self.check_offsets(f, op, dst, &offsets, Some(v))?;
            }
            OpKind::RemoteLoad { src, peer, offsets } => {
                let (src, peer, offsets) = (*src, *peer, offsets.clone());
                self.check_rank(f, op, peer, "peer")?;
                self.check_offsets(f, op, src, &offsets, res)?;
            }
            OpKind::RemoteStore {
                value,
                dst,
                peer,
                offsets,
            } => {
                let (v, dst, peer, offsets) = (*value, *dst, *peer, offsets.clone());
                self.check_rank(f, op, peer, "peer")?;
                self.check_offsets(f, op, dst, &offsets, Some(v))?;
            }
            OpKind::Put { peer, .. } | OpKind::Get { peer, .. } => {
                let peer = *peer;
                self.check_rank(f, op, peer, "peer")?;
            }
            OpKind::Notify {
                signal,
                peer,
                offsets,
                ..
            } => {
                let (s, peer, offsets) = (*signal, *peer, offsets.clone());
                self.check_rank(f, op, peer, "peer")?;
                self.check_offsets(f, op, s, &offsets, None)?;
            }
            OpKind::Wait {
                signal, offsets, ..
            } => {
                let (s, offsets) = (*signal, offsets.clone());
                self.check_offsets(f, op, s, &offsets, None)?;
            }
            // `op` sends only the accesses here.
            k => unreachable!("`{}` is not an access", k.info().name),
        }
        Ok(())
    }

    fn op(&mut self, f: &Function, op: &mut Op) -> Result<(), SpecializeError> {
        let res = op.result;
        let rdt = res.and_then(|r| f.ty(r).dtype());
        let scalar_res = res.is_some_and(|r| matches!(f.ty(r), Type::Scalar(_)));
        let mut fold_to: Option<Const> = None;
        let mut recurse = false;
        // The definitions `narrowings` reads back (the conditions of `if`s).
        let condition_part = matches!(
            op.kind,
            OpKind::Binary(..) | OpKind::Cmp(..) | OpKind::Cast(_) | OpKind::Unary(UnOp::Not, _)
        );
        if let (true, true, Some(r)) = (scalar_res, condition_part, res) {
            self.defs.insert(r, op.kind.clone());
        }
        match &op.kind {
            OpKind::Const(c) => {
                let c = *c;
                if let Some(r) = res {
                    self.set_const(r, c);
                }
            }
            OpKind::Dim(d) => {
                let v = d.eval(&|s| self.b.dims.get(s).copied()).map_err(|e| {
                    derived_dim_error(
                        &f.name,
                        format!("op `{}`{}", print_op(f, op), eagle_ir::at(op.loc.as_ref())),
                        d.to_string(),
                        e,
                    )
                })?;
                fold_to = Some(Const::Int(v as i128));
            }
            // A group's size is its grid's extent, folded when the group is lowered.
            OpKind::NRanks(c) if !f.params.iter().any(|p| p.value == *c) => {}
            OpKind::WorldSize | OpKind::NRanks(_) => {
                let p = self.p() as i128;
                fold_to = Some(Const::Int(p));
                if let Some(r) = res {
                    self.ranges.insert(r, Range::of_world(p, p));
                }
            }
            OpKind::Rank(_) => {
                if let Some(r) = res {
                    self.ranges.insert(r, Range::of_world(0, self.p() as i128 - 1));
                }
            }
            OpKind::Binary(bop, a, b) if scalar_res => {
                fold_to = self.fold(f, &op.kind, rdt);
                if let (None, Some(r), Some(d)) = (fold_to, res, rdt) {
                    // min and max bound a value even when the other operand has no range.
                    let full = Range::full(d).filter(|_| matches!(bop, BinOp::Min | BinOp::Max));
                    let x = self.ranges.get(*a).copied().or(full);
                    let y = self.ranges.get(*b).copied().or(full);
                    if let Some(z) = x.zip(y).and_then(|(x, y)| range_bin(*bop, x, y)) {
                        let wrapped = z.wrapped || !z.representable(d);
                        self.ranges.insert(r, Range { wrapped, ..z });
                    }
                }
            }
            OpKind::Unary(..) | OpKind::Cmp(..) | OpKind::Fma(..) if scalar_res => {
                fold_to = self.fold(f, &op.kind, rdt);
            }
            OpKind::Select(c, a, b) => {
                if let (true, Some(Const::Bool(k))) = (scalar_res, self.consts.get(*c)) {
                    let pick = if *k { *a } else { *b };
                    if let Some(&x) = self.consts.get(pick) {
                        fold_to = Some(x);
                    }
                }
            }
            OpKind::Bitcast(_) => {
                if let (true, Some(c)) = (scalar_res, self.fold(f, &op.kind, rdt)) {
                    fold_to = Some(c);
                }
            }
            OpKind::Cast(a) => {
                if let (true, Some(c)) = (scalar_res, self.fold(f, &op.kind, rdt)) {
                    fold_to = Some(c);
                } else if let (Some(&x), Some(r), Some(d)) = (self.ranges.get(*a), res, rdt) {
                    if d.is_int() && f.ty(*a).dtype().is_some_and(DType::is_int) {
                        let wrapped = x.wrapped || !x.representable(d);
                        self.ranges.insert(r, Range { wrapped, ..x });
                    }
                }
            }
            OpKind::Slice { src, index } => self.slice(f, op, *src, *index, res)?,
            OpKind::Subview { src, offset } => self.subview(f, op, *src, *offset, res)?,
            OpKind::View { src, offsets } => self.view(f, op, *src, offsets, res)?,
            OpKind::Broadcast { root, ctx, .. } => self.check_root(f, op, *root, *ctx)?,
            OpKind::Elem { .. }
            | OpKind::SetElem { .. }
            | OpKind::Load { .. }
            | OpKind::Store { .. }
            | OpKind::RemoteLoad { .. }
            | OpKind::RemoteStore { .. }
            | OpKind::Put { .. }
            | OpKind::Get { .. }
            | OpKind::Notify { .. }
            | OpKind::Wait { .. } => self.check_access(f, op, res)?,
            OpKind::Dispatch { device, callee, args } => {
                self.check_rank(f, op, *device, "device")?;
                self.record_call(callee, args);
            }
            OpKind::Call { callee, args } => self.record_call(callee, args),
            OpKind::For { var, lo, hi, .. } => {
                if let (Some(&l), Some(&h)) = (self.ranges.get(*lo), self.ranges.get(*hi)) {
                    self.ranges.insert(*var, Range::loop_var(l, h));
                }
                recurse = true;
            }
            OpKind::If { .. } | OpKind::While { .. } => recurse = true,
            // Nothing to fold, bound or check: tile arithmetic (the arms above take scalars),
            // collectives (lowered into checked primitives before the second pass), variables,
            // local arrays, window allocation, barriers, tile ops (the verifier checks shapes).
            OpKind::Binary(..)
            | OpKind::Unary(..)
            | OpKind::Cmp(..)
            | OpKind::Fma(..)
            | OpKind::AllGather { .. }
            | OpKind::ReduceScatter { .. }
            | OpKind::AllReduce { .. }
            | OpKind::AllToAll { .. }
            | OpKind::AllToAllV { .. }
            | OpKind::AllGatherV { .. }
            | OpKind::Var(_)
            | OpKind::Read(_)
            | OpKind::Write(..)
            | OpKind::LocalArray
            | OpKind::AllocWindowBuffer
            | OpKind::Window(_)
            | OpKind::Barrier(_)
            | OpKind::Group { .. }
            | OpKind::Split { .. }
            | OpKind::WorldRank { .. }
            | OpKind::TrapIf { .. }
            | OpKind::Tile(..)
            // Expanded into primitive ops after the first pass, but on f32/f64 tiles
            // (`eagle_ir::expand::expand_function_but_packed`).
            | OpKind::Math(..) => {}
        }
        if recurse {
            self.nested(f, op)?;
        }
        if let (Some(c), Some(r)) = (fold_to, res) {
            op.kind = OpKind::Const(c);
            self.set_const(r, c);
        }
        Ok(())
    }
}

fn uses(ops: &Ops, b: &Block, out: &mut EntitySet<Value>) {
    b.walk(ops, &mut |op| out.extend(op.kind.operands()));
}

/// Removes pure ops whose result is unused, in every block; whether anything was removed.
fn dce(ops: &mut Ops, b: &mut Block, used: &EntitySet<Value>) -> bool {
    let mut changed = false;
    b.rewrite(ops, &mut |ops, b| {
        let before = b.ops.len();
        b.ops.retain(|&id| {
            let op = &ops[id];
            !(op.kind.is_pure() && op.result.is_some_and(|r| !used.contains(r)))
        });
        changed |= b.ops.len() != before;
    });
    changed
}

/// Specializes `m` for `b`: every symbolic dim is replaced by its binding, `world_size()` and
/// `nranks(ctx)` become the constant P, constants are folded and dead pure ops removed. A range
/// analysis over index arithmetic then checks slices, tile offsets, peers and dispatch devices.
/// The result is verified again, now with every shape constant.
///
/// # Errors
/// [`SpecializeError::UnboundDim`], [`SpecializeError::WorldDimPinned`] (tutorial seed: a
/// constant where the world size belongs), [`SpecializeError::IndexOutOfBounds`],
/// [`SpecializeError::NegativePeer`] (seed: use `(me + n - 1) % n`),
/// [`SpecializeError::RankOutOfRange`], [`SpecializeError::BadWorldSize`] for P = 0, and
/// [`SpecializeError::Verify`] when argument and parameter shapes differ once bound.
pub fn specialize(m: &Module, b: &Bindings) -> Result<Module, SpecializeError> {
    specialize_for(m, b, &Limits::CPU).map(|s| s.module)
}

/// A specialized module and what its range analysis proved about it.
#[derive(Debug, Clone)]
pub struct Specialized {
    /// The module, every shape constant.
    pub module: Module,
    /// The proven ranges of integer values, per function: the backends skip the run-time
    /// bounds checks these prove unneeded.
    pub facts: Facts,
    /// How the module's rank groups split the world (process grids and splits; each once,
    /// sorted).
    pub grids: Vec<crate::lower::RankLayout>,
}

/// The sizes a target can hold, checked at specialization ([`SpecializeError::TooLarge`]).
/// `Target::limits` (in the artifact module) gives each target's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of the largest tile (tiles live in registers, stack or on-chip memory).
    pub max_tile_bytes: u64,
    /// Bytes of the largest tensor or window.
    pub max_buffer_bytes: u64,
}

impl Limits {
    /// The CPU backend's limits (also a `cuda` artifact's: it carries CPU code too).
    pub const CPU: Limits = Limits {
        max_tile_bytes: CPU_MAX_TILE_BYTES,
        max_buffer_bytes: MAX_BUFFER_BYTES,
    };
}

/// [`specialize`] for a target with the given [`Limits`], with the facts its range analysis
/// proved.
///
/// # Errors
/// As [`specialize`].
pub fn specialize_for(
    m: &Module,
    b: &Bindings,
    limits: &Limits,
) -> Result<Specialized, SpecializeError> {
    if b.world_size == 0 || b.world_size > crate::MAX_WORLD_SIZE {
        return Err(SpecializeError::BadWorldSize(b.world_size));
    }
    let mut out = m.clone();
    let signals = crate::lower::add_signal_windows(&mut out, b.world_size);
    let mut facts = Facts::default();
    let mut grids: Vec<crate::lower::RankLayout> = vec![];
    // Callers before callees (the module lists callees first), so that a callee's scalar
    // parameters can take the ranges of the arguments its callers pass.
    let mut seeds: HashMap<String, (Vec<Option<Range>>, String)> = HashMap::new();
    for f in out.functions.iter_mut().rev() {
        // Math-library ops become their primitive ops (one definition for every backend), but
        // those on f32/f64 tiles (the CPU backend's kernels run the same definition); the host
        // interpreter evaluates them directly with the same definition.

        let generic = f.values.clone();
        super::bind::bind_types(f, b, limits)?;
        crate::lower::check_bound_buffers(f, &generic, b.world_size)?;
        let mut body = std::mem::take(&mut f.body);
        for pass in 0..2 {
            if pass == 1 {
                f.body = std::mem::take(&mut body);
                let _lower = tracing::debug_span!(target: "eagle", "lower", function = %f.name, world_size = b.world_size).entered();
                for g in
                    crate::lower::lower_collectives(f, b.world_size, signals.get(&f.name).copied())?
                {
                    if !grids.contains(&g) {
                        grids.push(g);
                    }
                }
                // Accesses through block views become accesses of the buffers they view (the
                // first pass checked the views' offsets against what it knows).
                eagle_ir::views::lower_views(f, b.world_size)?;
                if f.level != Level::Host {
                    // Storage dtypes (`i8`, `f16`, ...) are computed in their compute dtypes
                    // (the lowered collectives' arithmetic too); then math-library ops become
                    // their primitive ops, but those on f32/f64 tiles, which the CPU backend
                    // runs as compiled kernels (and the CUDA backend expands). The host interpreter evaluates both directly with
                    // the same definitions (`eagle_ir::eval`).
                    eagle_ir::narrow::widen_function(f);
                    eagle_ir::expand::expand_function_but_packed(f);
                }
                body = std::mem::take(&mut f.body);
                drop(_lower);
            }
            let mut s = Spec {
                b,
                widened: pass == 1 && f.level != Level::Host,
                consts: SecondaryMap::with_capacity(f.values.len()),
                ranges: SecondaryMap::with_capacity(f.values.len()),
                origin: f
                    .params
                    .iter()
                    .map(|p| (p.value, (p.name.clone(), 0)))
                    .collect(),
                guarded: 0,
                dead: 0,
                defs: SecondaryMap::new(),
                generic: &generic,
                calls: HashMap::new(),
                seeded: SecondaryMap::new(),
                ops: Ops::new(),
            };
            // Scalar parameters take the ranges their callers pass (a broadcast root computed
            // on the host from `world_size()`), when every call site's argument has one.
            if let Some((sites, caller)) = seeds.get(&f.name) {
                let params = f
                    .params
                    .iter()
                    .filter(|p| !(f.level == Level::Device && *f.ty(p.value) == Type::Ctx));
                for (prm, r) in params.zip(sites) {
                    if let (Some(r), Type::Scalar(d)) = (r, f.ty(prm.value)) {
                        if d.is_int() {
                            s.ranges.insert(prm.value, *r);
                            s.seeded
                                .insert(prm.value, (prm.name.clone(), caller.clone()));
                        }
                    }
                }
            }
            let mut snapshot = f.clone();
            snapshot.body = body.clone();
            s.ops = std::mem::take(&mut f.ops);
            let r = s.block(&snapshot, &mut body);
            f.ops = std::mem::take(&mut s.ops);
            r?;
            if pass == 1 {
                facts.set_function(&f.name, s.proven(f));
            }
            for (callee, sites) in s.calls {
                let e = seeds
                    .entry(callee)
                    .or_insert_with(|| (sites.clone(), f.name.clone()));
                e.0 = hull_sites(&e.0, &sites);
            }
        }
        loop {
            let mut used = EntitySet::new();
            uses(&f.ops, &body, &mut used);
            if !dce(&mut f.ops, &mut body, &used) {
                break;
            }
        }
        f.body = body;
        // The ops the passes replaced or removed leave the arena: the artifact keeps only
        // what the body lists.
        f.compact();
    }
    verify_module(&out)?;
    grids.sort();
    Ok(Specialized {
        module: out,
        facts,
        grids,
    })
}
