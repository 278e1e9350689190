//! Widening of the storage dtypes (`i8 u8 i16 u16 f16 bf16 f8e4m3 f8e5m2 e8m0`) to their
//! compute dtypes.
//!
//! A storage dtype lives in memory (tensors, windows) at its own width; every value of it in
//! a device or compute function is computed in its compute dtype ([`DType::compute`]):
//! `i8`/`i16` in `i32`, `u8`/`u16` in `u32`, the float storage dtypes in `f32`. [`widen_function`]
//! rewrites a function so that no op computes on a storage dtype:
//! - every scalar, tile and variable of a storage dtype takes its compute dtype;
//! - a load of a storage dtype (`Elem`, `Load`, `RemoteLoad`) is followed by its widening (an
//!   integer `as` cast; for a float storage dtype, the bit pattern decoded by
//!   [`crate::math::narrow::decode`]), a store (`SetElem`, `Store`, `RemoteStore`) and a scalar
//!   argument of a call are preceded by its narrowing, and a scalar parameter is widened on
//!   entry;
//! - after every op whose result could leave the storage dtype's values (`+ - * / %`, shifts,
//!   `!`, `fma`, casts, math functions, sum and product reductions, matmul, `iota`), the
//!   result is narrowed again in the compute dtype: an integer wraps to its width (`(x << 24)
//!   >> 24` for `i8`, `x & 0xff` for `u8`), a float rounds to nearest even
//!   ([`crate::math::narrow::round_to`]). Ops that cannot leave the values (`min`, `max`,
//!   `neg` and `abs` of a float, and/or/xor, select, moves and layout ops) are unchanged.
//!
//! So a storage-dtype op computes what Rust computes on `i8` (wrapping) and what `half`
//! computes on `f16` (`f16::from_f32(a.to_f32() + b.to_f32())`), and a sum, product or matmul
//! accumulates in `f32` (in its fixed order) and rounds once. For `+ - * /` and `sqrt` the
//! `f32` result rounded to `f16` or `bf16` is the correctly rounded one (`f32` holds more than
//! twice their significand bits plus two). [`crate::eval`] defines the same results on scalars.
//!
//! Specialization runs this before the math-library expansion; the backends see storage
//! dtypes only in memory, in loads and stores, in `as` casts to and from the compute dtype and
//! in bitcasts of a float storage dtype to the unsigned integer of its width (`u16`, `u8`)
//! and back.

use crate::expand::{emit_decode, emit_encode, emit_round};
use crate::ir::{BinOp, Block, Const, Function, Loc, Op, OpKind, UnOp, Value};
use crate::math::narrow::{Format, BF16};
use crate::tile::TileOp;
use crate::types::{DType, Type};
use std::collections::HashSet;

/// Whether `t` is a scalar, tile or variable of a storage dtype (not memory).
fn narrow_value(t: &Type) -> bool {
    match t {
        Type::Scalar(d) | Type::Tile(_, d) => d.is_narrow(),
        Type::Ref(t) => narrow_value(t),
        _ => false,
    }
}

/// The format of `d` (a float storage dtype).
fn format(d: DType) -> Format {
    Format::of(d).unwrap_or(BF16)
}

/// Rewrites `f` so that every value of a storage dtype is computed in its compute dtype (see
/// the module docs). A function without storage-dtype values is left as it is.
///
/// Expects a verified function; the result verifies.
pub fn widen_function(f: &mut Function) {
    if !f.values.iter().any(narrow_value) {
        return;
    }
    let mut w = Widen {
        values: std::mem::take(&mut f.values),
        raw: HashSet::new(),
    };
    let mut entry = vec![];
    for p in &mut f.params {
        if let Type::Scalar(d) = w.values[p.value] {
            if d.is_narrow() {
                let raw = w.fresh(Type::Scalar(d), true);
                w.widen_loaded(&mut entry, &None, raw, p.value, d);
                p.value = raw;
            }
        }
    }
    let mut body = std::mem::take(&mut f.body);
    w.block(&mut body);
    entry.append(&mut body.ops);
    f.body = Block { ops: entry };
    for (v, t) in w.values.entries_mut() {
        if !w.raw.contains(&v) {
            *t = t.widened();
        }
    }
    f.values = w.values;
}

struct Widen {
    values: crate::entity::PrimaryMap<Value, Type>,
    /// Values that keep their storage dtype: loaded and to-be-stored patterns, parameters.
    raw: HashSet<Value>,
}

impl Widen {
    fn fresh(&mut self, t: Type, raw: bool) -> Value {
        let v = self.values.push(t);
        if raw {
            self.raw.insert(v);
        }
        v
    }

    /// A value shaped like `like` (scalar or tile) of dtype `d`.
    fn like(&mut self, like: Value, d: DType, raw: bool) -> Value {
        let t = match &self.values[like] {
            Type::Tile(s, _) => Type::Tile(s.clone(), d),
            _ => Type::Scalar(d),
        };
        self.fresh(t, raw)
    }

    fn push(out: &mut Vec<Op>, loc: &Option<Loc>, result: Value, kind: OpKind) {
        out.push(Op {
            result: Some(result),
            kind,
            loc: loc.clone(),
        });
    }

    /// A scalar constant of dtype `d`.
    fn constant(&mut self, out: &mut Vec<Op>, loc: &Option<Loc>, c: Const, d: DType) -> Value {
        let v = self.fresh(Type::Scalar(d), false);
        Self::push(out, loc, v, OpKind::Const(c));
        v
    }

    fn dtype(&self, v: Value) -> DType {
        self.values[v].dtype().unwrap_or(DType::Bool)
    }

    fn block(&mut self, b: &mut Block) {
        let mut out = Vec::with_capacity(b.ops.len());
        for mut op in std::mem::take(&mut b.ops) {
            for nested in op.kind.blocks_mut() {
                self.block(nested);
            }
            self.op(op, &mut out);
        }
        b.ops = out;
    }

    fn op(&mut self, mut op: Op, out: &mut Vec<Op>) {
        let loc = op.loc.clone();
        // Stores and calls: narrow the stored value or scalar argument first (a call passes
        // tensors and windows as they are).
        let call = matches!(op.kind, OpKind::Call { .. });
        for v in op.kind.handed_on_mut() {
            let d = match &self.values[*v] {
                Type::Scalar(d) => *d,
                _ if call => continue,
                t => match t.dtype() {
                    Some(d) => d,
                    None => continue,
                },
            };
            if d.is_narrow() {
                *v = self.narrow_to_store(out, &loc, *v, d);
            }
        }
        let Some(r) = op.result else {
            out.push(op);
            return;
        };
        if !narrow_value(&self.values[r]) {
            out.push(op);
            return;
        }
        let d = self.dtype(r);
        match narrowing(&op.kind, d) {
            Narrowing::Loaded => {
                let raw = self.like(r, d, true);
                op.result = Some(raw);
                out.push(op);
                self.widen_loaded(out, &loc, raw, r, d);
            }
            Narrowing::Const => {
                if let OpKind::Const(c) = &mut op.kind {
                    if let (Const::F32(v), true) = (*c, d.is_float()) {
                        *c = Const::F32(crate::eval::narrow_float(v as f64, d).widen_float());
                    }
                }
                out.push(op);
            }
            Narrowing::Cast => {
                let OpKind::Cast(x) = op.kind else {
                    unreachable!("`narrowing` says cast")
                };
                self.cast(out, &loc, x, r, d);
            }
            Narrowing::Bitcast => {
                let OpKind::Bitcast(x) = op.kind else {
                    unreachable!("`narrowing` says bitcast")
                };
                self.bitcast(out, &loc, x, r, d);
            }
            Narrowing::Shift => {
                let OpKind::Binary(_, _, amount) = &mut op.kind else {
                    unreachable!("`narrowing` says shift")
                };
                // Rust's `wrapping_shl` on `i8` takes the amount modulo 8, not 32.
                let a = *amount;
                let bits = self.constant(out, &loc, Const::Int(8 * d.size() as i128 - 1), d);
                let m = self.like(a, d.compute(), false);
                Self::push(out, &loc, m, OpKind::Binary(BinOp::And, a, bits));
                *amount = m;
                self.then_narrow(out, op, r, d);
            }
            Narrowing::Recompute => self.then_narrow(out, op, r, d),
            Narrowing::Keep => out.push(op),
        }
    }

    /// Pushes `op` with a fresh result, then narrows that into `r`.
    fn then_narrow(&mut self, out: &mut Vec<Op>, mut op: Op, r: Value, d: DType) {
        let loc = op.loc.clone();
        let t = self.like(r, d.compute(), false);
        op.result = Some(t);
        out.push(op);
        self.narrow_in_place(out, &loc, t, r, d);
    }

    /// `r` = the compute-dtype value `t` narrowed to `d`'s values, in the compute dtype.
    fn narrow_in_place(
        &mut self,
        out: &mut Vec<Op>,
        loc: &Option<Loc>,
        t: Value,
        r: Value,
        d: DType,
    ) {
        if d.is_float() {
            let v = emit_round(&mut self.values, out, loc.clone(), t, format(d));
            rename_last(out, v, r);
        } else if d.is_signed() {
            let k = self.constant(out, loc, Const::Int(32 - 8 * d.size() as i128), DType::I32);
            let s = self.like(t, DType::I32, false);
            Self::push(out, loc, s, OpKind::Binary(BinOp::Shl, t, k));
            Self::push(out, loc, r, OpKind::Binary(BinOp::Shr, s, k));
        } else {
            let mask = (1i128 << (8 * d.size())) - 1;
            let k = self.constant(out, loc, Const::Int(mask), DType::U32);
            Self::push(out, loc, r, OpKind::Binary(BinOp::And, t, k));
        }
    }

    /// `r` = the compute-dtype value of `raw`, a loaded value of the storage dtype `d`.
    fn widen_loaded(
        &mut self,
        out: &mut Vec<Op>,
        loc: &Option<Loc>,
        raw: Value,
        r: Value,
        d: DType,
    ) {
        if !d.is_float() {
            Self::push(out, loc, r, OpKind::Cast(raw));
            return;
        }
        let pat = self.like(raw, d.bits_dtype().unwrap_or(DType::U16), true);
        Self::push(out, loc, pat, OpKind::Bitcast(raw));
        let u64v = self.like(raw, DType::U64, false);
        Self::push(out, loc, u64v, OpKind::Cast(pat));
        let v = emit_decode(&mut self.values, out, loc.clone(), u64v, format(d));
        rename_last(out, v, r);
    }

    /// The storage-dtype value of `v` (holding a value of `d` in the compute dtype).
    fn narrow_to_store(
        &mut self,
        out: &mut Vec<Op>,
        loc: &Option<Loc>,
        v: Value,
        d: DType,
    ) -> Value {
        let raw = self.like(v, d, true);
        if !d.is_float() {
            Self::push(out, loc, raw, OpKind::Cast(v));
            return raw;
        }
        let bits = emit_encode(&mut self.values, out, loc.clone(), v, format(d));
        let pat = self.like(v, d.bits_dtype().unwrap_or(DType::U16), true);
        Self::push(out, loc, pat, OpKind::Cast(bits));
        Self::push(out, loc, raw, OpKind::Bitcast(pat));
        raw
    }

    /// `r = x as d`, `d` a storage dtype; `x` already holds its compute-dtype value.
    fn cast(&mut self, out: &mut Vec<Op>, loc: &Option<Loc>, x: Value, r: Value, d: DType) {
        let from = self.dtype(x);
        let wide = d.compute();
        if d.is_float() {
            // A float rounds once (an `f64` directly); an integer or bool goes through `f32`.
            let src = if from.is_float() {
                x
            } else {
                let t = self.like(x, DType::F32, false);
                Self::push(out, loc, t, OpKind::Cast(x));
                t
            };
            let v = emit_round(&mut self.values, out, loc.clone(), src, format(d));
            rename_last(out, v, r);
            return;
        }
        let t = self.like(x, wide, false);
        Self::push(out, loc, t, OpKind::Cast(x));
        if from.is_float() {
            // Saturating, as Rust's `as`: the compute-dtype cast saturates to its range (NaN to
            // 0), then the value is clamped to the storage dtype's.
            let bits = 8 * d.size() as u32;
            let (lo, hi) = if d.is_signed() {
                (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
            } else {
                (0, (1i128 << bits) - 1)
            };
            let kh = self.constant(out, loc, Const::Int(hi), wide);
            if d.is_signed() {
                let kl = self.constant(out, loc, Const::Int(lo), wide);
                let m = self.like(x, wide, false);
                Self::push(out, loc, m, OpKind::Binary(BinOp::Max, t, kl));
                Self::push(out, loc, r, OpKind::Binary(BinOp::Min, m, kh));
            } else {
                Self::push(out, loc, r, OpKind::Binary(BinOp::Min, t, kh));
            }
        } else {
            self.narrow_in_place(out, loc, t, r, d);
        }
    }

    /// `r` = the bits of `x` as `d`, one of `x`, `d` a float storage dtype and the other an
    /// integer of its width (the only bitcasts of storage dtypes).
    fn bitcast(&mut self, out: &mut Vec<Op>, loc: &Option<Loc>, x: Value, r: Value, d: DType) {
        let from = self.dtype(x);
        if from.is_float() {
            // `x.to_bits()`: the pattern of the `f16` (`f8e4m3`, ...) held in `x`.
            let bits = emit_encode(&mut self.values, out, loc.clone(), x, format(from));
            let t = self.like(x, d.compute(), false);
            Self::push(out, loc, t, OpKind::Cast(bits));
            self.narrow_in_place(out, loc, t, r, d);
        } else {
            // `f16::from_bits(u)`: the low 16 (8) bits of the compute-dtype integer.
            let u = self.like(x, DType::U64, false);
            Self::push(out, loc, u, OpKind::Cast(x));
            let mask = (1i128 << (8 * d.size())) - 1;
            let k = self.constant(out, loc, Const::Int(mask), DType::U64);
            let h = self.like(x, DType::U64, false);
            Self::push(out, loc, h, OpKind::Binary(BinOp::And, u, k));
            let v = emit_decode(&mut self.values, out, loc.clone(), h, format(d));
            rename_last(out, v, r);
        }
    }
}

/// Renames the definition of `v` (the last op of `out`) to `r`.
fn rename_last(out: &mut [Op], v: Value, r: Value) {
    if let Some(last) = out.last_mut() {
        debug_assert_eq!(last.result, Some(v));
        last.result = Some(r);
    }
}

/// What narrowing does after (or around) an op whose result has the narrow storage dtype `d`.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Narrowing {
    /// A read of narrow storage: the raw value, then widened.
    Loaded,
    /// A constant: an `f32` constant rounded to `d`'s values.
    Const,
    /// A conversion to `d`, through its compute dtype.
    Cast,
    /// A bitcast to `d`.
    Bitcast,
    /// A shift: the amount masked to `d`'s width, then narrowed.
    Shift,
    /// The op can produce a value outside `d`'s values (computed in the compute dtype):
    /// narrowed after it.
    Recompute,
    /// The op leaves `d`'s values: kept as it is.
    Keep,
}

/// How the op `kind` with a result of the narrow storage dtype `d` is narrowed.
fn narrowing(kind: &OpKind, d: DType) -> Narrowing {
    use Narrowing::{Keep, Recompute};
    let recompute = |b: bool| if b { Recompute } else { Keep };
    // Exhaustive on purpose: a new op must say whether it leaves the dtype's values.
    match kind {
        OpKind::Binary(op, ..) => match op {
            BinOp::Min | BinOp::Max | BinOp::And | BinOp::Or | BinOp::Xor => Keep,
            BinOp::Shl | BinOp::Shr => Narrowing::Shift,
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem => Recompute,
        },
        OpKind::Unary(op, _) => match op {
            // `e8m0` has no sign, so its negation leaves its values.
            UnOp::Neg | UnOp::Abs => recompute(!d.is_float() || d == DType::E8M0),
            UnOp::Not => recompute(!d.is_signed()),
            UnOp::Sqrt => Recompute,
        },
        OpKind::Fma(..) | OpKind::Math(..) => Recompute,
        OpKind::Tile(t, _) => match t {
            // A sum or product makes new numbers; max and min pick a member (the reduction's
            // own declaration says which).
            TileOp::Reduce(op, _) | TileOp::Scan(op, _) => recompute(!op.selects()),
            // Sums make new numbers; an overwrite places members.
            TileOp::Scatter { add, .. } => recompute(*add),
            TileOp::Matmul | TileOp::MatmulAcc | TileOp::Iota(_) => Recompute,
            // A member of the tile, or a rearrangement of its elements (arg ops give indices).
            TileOp::Arg(..)
            | TileOp::Sort(_)
            | TileOp::ArgSort(_)
            | TileOp::Gather(_)
            | TileOp::Expand
            | TileOp::Transpose
            | TileOp::Reshape
            | TileOp::Concat(_)
            | TileOp::Extract(_)
            | TileOp::Full => Keep,
        },
        // Values of the dtype copied, selected or read (loads widen by themselves), results of
        // other dtypes, and ops without a result.
        OpKind::Elem { .. } | OpKind::Load { .. } | OpKind::RemoteLoad { .. } => Narrowing::Loaded,
        OpKind::Const(_) => Narrowing::Const,
        OpKind::Cast(_) => Narrowing::Cast,
        OpKind::Bitcast(_) => Narrowing::Bitcast,
        OpKind::Dim(_)
        | OpKind::Cmp(..)
        | OpKind::Select(..)
        | OpKind::Slice { .. }
        | OpKind::Subview { .. }
        | OpKind::View { .. }
        | OpKind::Var(_)
        | OpKind::Read(_)
        | OpKind::LocalArray
        | OpKind::Rank(_)
        | OpKind::NRanks(_)
        | OpKind::Group { .. }
        | OpKind::WorldRank { .. }
        | OpKind::WorldSize
        | OpKind::AllocWindowBuffer
        | OpKind::Window(_)
        | OpKind::Call { .. }
        | OpKind::SetElem { .. }
        | OpKind::Store { .. }
        | OpKind::RemoteStore { .. }
        | OpKind::Write(..)
        | OpKind::For { .. }
        | OpKind::While { .. }
        | OpKind::If { .. }
        | OpKind::Dispatch { .. }
        | OpKind::Put { .. }
        | OpKind::Get { .. }
        | OpKind::Notify { .. }
        | OpKind::Wait { .. }
        | OpKind::Barrier(_)
        | OpKind::TrapIf { .. }
        | OpKind::Broadcast { .. }
        | OpKind::AllGather { .. }
        | OpKind::ReduceScatter { .. }
        | OpKind::AllReduce { .. }
        | OpKind::AllToAll { .. }
        | OpKind::AllToAllV { .. }
        | OpKind::AllGatherV { .. } => Keep,
    }
}
