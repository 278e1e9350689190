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

use crate::cursor::Cursor;
use crate::entity::SecondaryMap;
use crate::expand::{emit_decode, emit_encode, emit_round};
use crate::ir::{BinOp, Block, CmpOp, Const, Function, Op, OpKind, UnOp, Value};
use crate::math::narrow::{Format, BF16};
use crate::tile::TileOp;
use crate::types::{DType, Type};

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
        cur: Cursor::on(f, None),
        raw: SecondaryMap::new(),
    };
    // The parameters' widening, at the entry (the cursor's outer block, without a location).
    for p in &mut f.params {
        if let Type::Scalar(d) = *w.cur.ty(p.value) {
            if d.is_narrow() {
                let raw = w.fresh(Type::Scalar(d), true);
                w.widen_loaded(raw, p.value, d);
                p.value = raw;
            }
        }
    }
    let mut body = std::mem::take(&mut f.body);
    w.block(&mut body);
    let raw = w.raw;
    let (mut entry, mut values, ops) = w.cur.finish();
    entry.ops.append(&mut body.ops);
    f.body = entry;
    f.ops = ops;
    for (v, t) in values.entries_mut() {
        if !raw.contains_key(v) {
            *t = t.widened();
        }
    }
    f.values = values;
}

struct Widen {
    /// Where the rewritten ops go, with the location of the op being rewritten.
    cur: Cursor,
    /// Values that keep their storage dtype: loaded and to-be-stored patterns, parameters.
    raw: SecondaryMap<Value, ()>,
}

impl Widen {
    fn fresh(&mut self, t: Type, raw: bool) -> Value {
        let v = self.cur.value(t);
        if raw {
            self.raw.insert(v, ());
        }
        v
    }

    /// A value shaped like `like` (scalar or tile) of dtype `d`.
    fn like(&mut self, like: Value, d: DType, raw: bool) -> Value {
        let t = match self.cur.ty(like) {
            Type::Tile(s, _) => Type::Tile(s.clone(), d),
            _ => Type::Scalar(d),
        };
        self.fresh(t, raw)
    }

    /// Appends `kind` defining `result`, at the location of the op being rewritten.
    fn push(&mut self, result: Value, kind: OpKind) {
        self.cur.append(kind, Some(result));
    }

    /// A scalar constant of dtype `d`.
    fn constant(&mut self, c: Const, d: DType) -> Value {
        let v = self.fresh(Type::Scalar(d), false);
        self.push(v, OpKind::Const(c));
        v
    }

    fn dtype(&self, v: Value) -> DType {
        self.cur.ty(v).dtype().unwrap_or(DType::Bool)
    }

    fn block(&mut self, b: &mut Block) {
        self.cur.open();
        for id in std::mem::take(&mut b.ops) {
            let mut op = self.cur.take(id);
            for nested in op.kind.blocks_mut() {
                self.block(nested);
            }
            self.cur.set_loc(op.loc.clone());
            self.op(op);
        }
        *b = self.cur.close();
    }

    fn op(&mut self, mut op: Op) {
        // Stores and calls: narrow the stored value or scalar argument first (a call passes
        // tensors and windows as they are).
        let call = matches!(op.kind, OpKind::Call { .. });
        for v in op.kind.handed_on_mut() {
            let d = match self.cur.ty(*v) {
                Type::Scalar(d) => *d,
                _ if call => continue,
                t => match t.dtype() {
                    Some(d) => d,
                    None => continue,
                },
            };
            if d.is_narrow() {
                *v = self.narrow_to_store(*v, d);
            }
        }
        let Some(r) = op.result else {
            self.cur.emit(op);
            return;
        };
        if !narrow_value(self.cur.ty(r)) {
            self.cur.emit(op);
            return;
        }
        let d = self.dtype(r);
        match narrowing(&op.kind, d) {
            Narrowing::Loaded => {
                let raw = self.like(r, d, true);
                op.result = Some(raw);
                self.cur.emit(op);
                self.widen_loaded(raw, r, d);
            }
            Narrowing::Const => {
                if let OpKind::Const(c) = &mut op.kind {
                    if let (Const::F32(v), true) = (*c, d.is_float()) {
                        *c = Const::F32(crate::eval::narrow_float(v as f64, d).widen_float());
                    }
                }
                self.cur.emit(op);
            }
            Narrowing::Cast => {
                let OpKind::Cast(x) = op.kind else {
                    unreachable!("`narrowing` says cast")
                };
                self.cast(x, r, d);
            }
            Narrowing::Bitcast => {
                let OpKind::Bitcast(x) = op.kind else {
                    unreachable!("`narrowing` says bitcast")
                };
                self.bitcast(x, r, d);
            }
            Narrowing::Shift => {
                let OpKind::Binary(_, _, amount) = &mut op.kind else {
                    unreachable!("`narrowing` says shift")
                };
                // Rust's `wrapping_shl` on `i8` takes the amount modulo 8, not 32.
                let a = *amount;
                let bits = self.constant(Const::Int(8 * d.size() as i128 - 1), d);
                let m = self.like(a, d.compute(), false);
                self.push(m, OpKind::Binary(BinOp::And, a, bits));
                *amount = m;
                self.then_narrow(op, r, d);
            }
            Narrowing::Recompute => self.then_narrow(op, r, d),
            Narrowing::Keep => {
                self.cur.emit(op);
            }
        }
    }

    /// Pushes `op` with a fresh result, then narrows that into `r`.
    fn then_narrow(&mut self, mut op: Op, r: Value, d: DType) {
        let t = self.like(r, d.compute(), false);
        op.result = Some(t);
        self.cur.emit(op);
        self.narrow_in_place(t, r, d);
    }

    /// `r` = the compute-dtype value `t` narrowed to `d`'s values, in the compute dtype.
    fn narrow_in_place(&mut self, t: Value, r: Value, d: DType) {
        if d.is_float() {
            let v = emit_round(&mut self.cur, t, format(d));
            rename_last(&mut self.cur, v, r);
        } else if d.is_signed() {
            let k = self.constant(Const::Int(32 - 8 * d.size() as i128), DType::I32);
            let s = self.like(t, DType::I32, false);
            self.push(s, OpKind::Binary(BinOp::Shl, t, k));
            self.push(r, OpKind::Binary(BinOp::Shr, s, k));
        } else {
            let mask = (1i128 << (8 * d.size())) - 1;
            let k = self.constant(Const::Int(mask), DType::U32);
            self.push(r, OpKind::Binary(BinOp::And, t, k));
        }
    }

    /// `r` = the compute-dtype value of `raw`, a loaded value of the storage dtype `d`.
    fn widen_loaded(&mut self, raw: Value, r: Value, d: DType) {
        if !d.is_float() {
            self.push(r, OpKind::Cast(raw));
            return;
        }
        let pat = self.like(raw, d.bits_dtype().unwrap_or(DType::U16), true);
        self.push(pat, OpKind::Bitcast(raw));
        self.decode(pat, r, d);
    }

    /// `r` = the compute-dtype (`f32`) value of the float storage dtype `d`'s patterns `h`
    /// (an unsigned integer scalar or tile, the bits above `d`'s width zero): for `bf16` by a
    /// shift ([`Self::decode_bf16`]), for the others by [`emit_decode`] on `u64` patterns.
    fn decode(&mut self, h: Value, r: Value, d: DType) {
        if d == DType::BF16 {
            return self.decode_bf16(h, r);
        }
        let h64 = if self.dtype(h) == DType::U64 {
            h
        } else {
            let w = self.like(h, DType::U64, false);
            self.push(w, OpKind::Cast(h));
            w
        };
        let v = emit_decode(&mut self.cur, h64, format(d));
        rename_last(&mut self.cur, v, r);
    }

    /// `r` = the `f32` value of the `bf16` patterns `pat` (a `u16` or `u64` scalar or tile,
    /// the bits above 16 zero): the pattern
    /// is the top half of the `f32`, a NaN made quiet (`f32::from_bits((h as u32) << 16)`, the
    /// bit `0x0040_0000` set on a NaN), which is [`crate::math::narrow::decode`]'s value for
    /// every pattern, in 32-bit lane-wise ops instead of the general decode through `f64`.
    /// Test: `narrow::bf16_loads_widen_to_the_half_value_on_every_pattern`.
    fn decode_bf16(&mut self, pat: Value, r: Value) {
        let u32_like = |n: &mut Self| n.like(pat, DType::U32, false);
        let w = u32_like(self);
        self.push(w, OpKind::Cast(pat));
        let k16 = self.constant(Const::Int(16), DType::U32);
        let u = u32_like(self);
        self.push(u, OpKind::Binary(BinOp::Shl, w, k16));
        let kmag = self.constant(Const::Int(0x7fff_ffff), DType::U32);
        let mag = u32_like(self);
        self.push(mag, OpKind::Binary(BinOp::And, u, kmag));
        let kinf = self.constant(Const::Int(0x7f80_0000), DType::U32);
        let nan = self.like(pat, DType::Bool, false);
        self.push(nan, OpKind::Cmp(CmpOp::Gt, mag, kinf));
        let kquiet = self.constant(Const::Int(0x0040_0000), DType::U32);
        let quiet = u32_like(self);
        self.push(quiet, OpKind::Binary(BinOp::Or, u, kquiet));
        let bits = u32_like(self);
        self.push(bits, OpKind::Select(nan, quiet, u));
        self.push(r, OpKind::Bitcast(bits));
    }

    /// The storage-dtype value of `v` (holding a value of `d` in the compute dtype).
    fn narrow_to_store(&mut self, v: Value, d: DType) -> Value {
        let raw = self.like(v, d, true);
        if !d.is_float() {
            self.push(raw, OpKind::Cast(v));
            return raw;
        }
        let bits = emit_encode(&mut self.cur, v, format(d));
        let pat = self.like(v, d.bits_dtype().unwrap_or(DType::U16), true);
        self.push(pat, OpKind::Cast(bits));
        self.push(raw, OpKind::Bitcast(pat));
        raw
    }

    /// `r = x as d`, `d` a storage dtype; `x` already holds its compute-dtype value.
    fn cast(&mut self, x: Value, r: Value, d: DType) {
        let from = self.dtype(x);
        let wide = d.compute();
        if d.is_float() {
            // A float rounds once (an `f64` directly); an integer or bool goes through `f32`.
            let src = if from.is_float() {
                x
            } else {
                let t = self.like(x, DType::F32, false);
                self.push(t, OpKind::Cast(x));
                t
            };
            let v = emit_round(&mut self.cur, src, format(d));
            rename_last(&mut self.cur, v, r);
            return;
        }
        let t = self.like(x, wide, false);
        self.push(t, OpKind::Cast(x));
        if from.is_float() {
            // Saturating, as Rust's `as`: the compute-dtype cast saturates to its range (NaN to
            // 0), then the value is clamped to the storage dtype's.
            let (lo, hi) = d.int_range().unwrap_or((0, 0));
            let kh = self.constant(Const::Int(hi), wide);
            if d.is_signed() {
                let kl = self.constant(Const::Int(lo), wide);
                let m = self.like(x, wide, false);
                self.push(m, OpKind::Binary(BinOp::Max, t, kl));
                self.push(r, OpKind::Binary(BinOp::Min, m, kh));
            } else {
                self.push(r, OpKind::Binary(BinOp::Min, t, kh));
            }
        } else {
            self.narrow_in_place(t, r, d);
        }
    }

    /// `r` = the bits of `x` as `d`, one of `x`, `d` a float storage dtype and the other an
    /// integer of its width (the only bitcasts of storage dtypes).
    fn bitcast(&mut self, x: Value, r: Value, d: DType) {
        let from = self.dtype(x);
        if from.is_float() {
            // `x.to_bits()`: the pattern of the `f16` (`f8e4m3`, ...) held in `x`.
            let bits = emit_encode(&mut self.cur, x, format(from));
            let t = self.like(x, d.compute(), false);
            self.push(t, OpKind::Cast(bits));
            self.narrow_in_place(t, r, d);
        } else {
            // `f16::from_bits(u)`: the low 16 (8) bits of the compute-dtype integer.
            let u = self.like(x, DType::U64, false);
            self.push(u, OpKind::Cast(x));
            let mask = (1i128 << (8 * d.size())) - 1;
            let k = self.constant(Const::Int(mask), DType::U64);
            let h = self.like(x, DType::U64, false);
            self.push(h, OpKind::Binary(BinOp::And, u, k));
            self.decode(h, r, d);
        }
    }
}

/// Renames the definition of `v` (the last op of `out`) to `r`.
fn rename_last(cur: &mut Cursor, v: Value, r: Value) {
    if let Some(last) = cur.last_mut() {
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
        | OpKind::Split { .. }
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
