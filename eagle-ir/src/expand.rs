//! Expanding the math library into primitive ops (a transform): the IR instance of the lanes
//! ([`Float`]: [`Real`] for `f64`, [`Single`] for `f32`), where each primitive appends one IR
//! op. [`expand_function`] replaces every
//! `OpKind::Math` op by the ops of its one definition (`crate::math`), and `crate::narrow`
//! emits the 16-bit float formats' conversions through [`emit_round`], [`emit_decode`] and
//! [`emit_encode`].

use crate::ir::{
    Axis, BinOp, Block, CmpOp, Const, Function, MathFn, Op, OpId, OpKind, ReduceOp, TileOp, UnOp,
    Value,
};
use crate::math::lanes::{Bits, Float, Mask, Real, Single};
use crate::types::{DType, Type};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ops::{Add, BitAnd, BitOr, BitXor, Div, Mul, Neg, Not, Shl, Shr, Sub};

use crate::cursor::Cursor;

/// The function being expanded into ([`Cursor`]) and the constants already defined in the
/// block being written. Opaque: only an expansion of this module makes one, and the lanes it
/// hands out borrow it.
#[derive(Debug)]
pub struct Emitter {
    cur: Cursor,
    consts: HashMap<(DType, u64), Value>,
}

/// The context every IR lane carries ([`Float::Cx`]): the emitter it appends to. One exists
/// per expansion ([`run`]); lanes borrow it, so no state outlives an expansion.
pub type Cx<'e> = &'e RefCell<Emitter>;

impl Emitter {
    /// Appends `kind` with a result of dtype `d`, a tile of its tile operand's shape if it has
    /// one (scalars broadcast).
    fn push(&mut self, kind: OpKind, d: DType) -> Value {
        let shape = kind.operands().iter().find_map(|v| match self.cur.ty(*v) {
            Type::Tile(s, _) => Some(s.clone()),
            _ => None,
        });
        let ty = match shape {
            Some(s) => Type::Tile(s, d),
            None => Type::Scalar(d),
        };
        self.cur.push(kind, ty)
    }

    fn constant(&mut self, c: Const, d: DType, bits: u64) -> Value {
        if let Some(v) = self.consts.get(&(d, bits)) {
            return *v;
        }
        let v = self.push(OpKind::Const(c), d);
        self.consts.insert((d, bits), v);
        v
    }

    /// `select(m, a, b)`; where the mask is a tile and both branches are scalars, `a` is first
    /// filled into a tile of the mask's shape (a select takes its shape from its branches).
    fn select(&mut self, m: Value, a: Value, b: Value, d: DType) -> Value {
        let scalar = |v: Value| matches!(self.cur.ty(v), Type::Scalar(_));
        let a = match self.cur.ty(m) {
            Type::Tile(s, _) if scalar(a) && scalar(b) => {
                let full = OpKind::Tile(TileOp::Full, vec![a]);
                let ty = Type::Tile(s.clone(), d);
                self.cur.push(full, ty)
            }
            _ => a,
        };
        self.push(OpKind::Select(m, a, b), d)
    }
}

/// Runs `build` with a fresh emitter on `cur` (its ops go to a new block of `cur`) and returns
/// what it built and the cursor.
fn run<T>(cur: Cursor, build: impl FnOnce(Cx<'_>) -> T) -> (T, Cursor) {
    let cell = RefCell::new(Emitter {
        cur,
        consts: HashMap::new(),
    });
    let r = build(&cell);
    (r, cell.into_inner().cur)
}

/// A float lane in the IR: `f64` (`W = 64`, the default) or `f32` (`W = 32`).
#[derive(Debug, Clone, Copy)]
pub struct F<'e, const W: u32 = 64>(Value, Cx<'e>);
/// The bits of a float lane in the IR: `u64` (`W = 64`) or `u32` (`W = 32`).
#[derive(Debug, Clone, Copy)]
pub struct U<'e, const W: u32 = 64>(Value, Cx<'e>);
/// A `bool` lane in the IR.
#[derive(Debug, Clone, Copy)]
pub struct M<'e>(Value, Cx<'e>);

/// The float dtype of lanes of width `w`.
const fn float_dtype(w: u32) -> DType {
    if w == 64 {
        DType::F64
    } else {
        DType::F32
    }
}

/// The bits dtype of lanes of width `w`.
const fn bits_dtype(w: u32) -> DType {
    if w == 64 {
        DType::U64
    } else {
        DType::U32
    }
}

macro_rules! bin {
    ($t:ident, $tr:ident, $m:ident, $op:expr, $d:ident) => {
        impl<'e, const W: u32> $tr for $t<'e, W> {
            type Output = $t<'e, W>;
            fn $m(self, o: $t<'e, W>) -> $t<'e, W> {
                let v = self
                    .1
                    .borrow_mut()
                    .push(OpKind::Binary($op, self.0, o.0), $d(W));
                $t(v, self.1)
            }
        }
    };
}
bin!(F, Add, add, BinOp::Add, float_dtype);
bin!(F, Sub, sub, BinOp::Sub, float_dtype);
bin!(F, Mul, mul, BinOp::Mul, float_dtype);
bin!(F, Div, div, BinOp::Div, float_dtype);
bin!(U, Add, add, BinOp::Add, bits_dtype);
bin!(U, Sub, sub, BinOp::Sub, bits_dtype);
bin!(U, BitAnd, bitand, BinOp::And, bits_dtype);
bin!(U, BitOr, bitor, BinOp::Or, bits_dtype);
bin!(U, BitXor, bitxor, BinOp::Xor, bits_dtype);

/// A mask op of the IR lanes (`bool` results).
macro_rules! mask_bin {
    ($tr:ident, $m:ident, $op:expr) => {
        impl<'e> $tr for M<'e> {
            type Output = M<'e>;
            fn $m(self, o: M<'e>) -> M<'e> {
                let v = self
                    .1
                    .borrow_mut()
                    .push(OpKind::Binary($op, self.0, o.0), DType::Bool);
                M(v, self.1)
            }
        }
    };
}
mask_bin!(BitAnd, bitand, BinOp::And);
mask_bin!(BitOr, bitor, BinOp::Or);

impl<'e, const W: u32> F<'e, W> {
    /// Appends `kind` (an op on this lane's function) with a result of dtype `d`.
    fn push(self, kind: OpKind, d: DType) -> Value {
        self.1.borrow_mut().push(kind, d)
    }

    /// Appends `kind`, a float of this lane's width.
    fn float(self, kind: OpKind) -> F<'e, W> {
        F(self.push(kind, float_dtype(W)), self.1)
    }

    /// Appends `kind`, a mask.
    fn mask(self, kind: OpKind) -> M<'e> {
        M(self.push(kind, DType::Bool), self.1)
    }
}

impl<'e, const W: u32> Neg for F<'e, W> {
    type Output = F<'e, W>;
    fn neg(self) -> F<'e, W> {
        self.float(OpKind::Unary(UnOp::Neg, self.0))
    }
}

impl<'e> Not for M<'e> {
    type Output = M<'e>;
    fn not(self) -> M<'e> {
        let v = self
            .1
            .borrow_mut()
            .push(OpKind::Unary(UnOp::Not, self.0), DType::Bool);
        M(v, self.1)
    }
}

impl<'e> Mask for M<'e> {
    type Cx = Cx<'e>;
    fn cx(self) -> Cx<'e> {
        self.1
    }
}

impl<'e, const W: u32> U<'e, W> {
    /// `self op k` for a constant shift `k`.
    fn shift(self, op: BinOp, n: u32) -> U<'e, W> {
        let k = U::<W>::lit(self.1, n as u64);
        let v = self
            .1
            .borrow_mut()
            .push(OpKind::Binary(op, self.0, k.0), bits_dtype(W));
        U(v, self.1)
    }
}

impl<'e, const W: u32> Shl<u32> for U<'e, W> {
    type Output = U<'e, W>;
    fn shl(self, n: u32) -> U<'e, W> {
        self.shift(BinOp::Shl, n)
    }
}

impl<'e, const W: u32> Shr<u32> for U<'e, W> {
    type Output = U<'e, W>;
    fn shr(self, n: u32) -> U<'e, W> {
        self.shift(BinOp::Shr, n)
    }
}

impl<'e, const W: u32> Bits for U<'e, W> {
    type Mask = M<'e>;
    type Cx = Cx<'e>;
    fn cx(self) -> Cx<'e> {
        self.1
    }
    fn lit(cx: Cx<'e>, v: u64) -> U<'e, W> {
        let v = if W == 64 { v } else { v as u32 as u64 };
        let c = cx
            .borrow_mut()
            .constant(Const::Int(v as i128), bits_dtype(W), v);
        U(c, cx)
    }
    fn eq(self, o: U<'e, W>) -> M<'e> {
        let v = self
            .1
            .borrow_mut()
            .push(OpKind::Cmp(CmpOp::Eq, self.0, o.0), DType::Bool);
        M(v, self.1)
    }
    fn ult(self, o: U<'e, W>) -> M<'e> {
        let v = self
            .1
            .borrow_mut()
            .push(OpKind::Cmp(CmpOp::Lt, self.0, o.0), DType::Bool);
        M(v, self.1)
    }
    fn select(m: M<'e>, a: U<'e, W>, b: U<'e, W>) -> U<'e, W> {
        U(m.1.borrow_mut().select(m.0, a.0, b.0, bits_dtype(W)), m.1)
    }
}

impl<'e, const W: u32> Float for F<'e, W> {
    const MANT: u32 = if W == 64 { 52 } else { 23 };
    const WIDTH: u32 = W;
    type Mask = M<'e>;
    type Bits = U<'e, W>;
    type Cx = Cx<'e>;
    fn cx(self) -> Cx<'e> {
        self.1
    }
    fn lit(cx: Cx<'e>, v: f64) -> F<'e, W> {
        let (c, bits) = if W == 64 {
            (Const::F64(v), v.to_bits())
        } else {
            (Const::F32(v as f32), (v as f32).to_bits() as u64)
        };
        let c = cx.borrow_mut().constant(c, float_dtype(W), bits);
        F(c, cx)
    }
    fn sqrt(self) -> F<'e, W> {
        self.float(OpKind::Unary(UnOp::Sqrt, self.0))
    }
    fn mul_add(self, b: F<'e, W>, c: F<'e, W>) -> F<'e, W> {
        self.float(OpKind::Fma(self.0, b.0, c.0))
    }
    fn abs(self) -> F<'e, W> {
        self.float(OpKind::Unary(UnOp::Abs, self.0))
    }
    fn lt(self, o: F<'e, W>) -> M<'e> {
        self.mask(OpKind::Cmp(CmpOp::Lt, self.0, o.0))
    }
    fn le(self, o: F<'e, W>) -> M<'e> {
        self.mask(OpKind::Cmp(CmpOp::Le, self.0, o.0))
    }
    fn eq(self, o: F<'e, W>) -> M<'e> {
        self.mask(OpKind::Cmp(CmpOp::Eq, self.0, o.0))
    }
    fn select(m: M<'e>, a: F<'e, W>, b: F<'e, W>) -> F<'e, W> {
        F(m.1.borrow_mut().select(m.0, a.0, b.0, float_dtype(W)), m.1)
    }
    fn to_bits(self) -> U<'e, W> {
        U(self.push(OpKind::Bitcast(self.0), bits_dtype(W)), self.1)
    }
    fn from_bits(b: U<'e, W>) -> F<'e, W> {
        F(
            b.1.borrow_mut().push(OpKind::Bitcast(b.0), float_dtype(W)),
            b.1,
        )
    }
    /// `if any(m) { v = f() }`: `f`'s ops in the then-block of one `if` on a scalar, with a
    /// variable carrying the result out (initialised to `otherwise`). `f` builds one value, so
    /// the block is one fused tree.
    fn if_any(m: M<'e>, f: impl FnOnce() -> F<'e, W>, otherwise: F<'e, W>) -> F<'e, W> {
        let cx = m.1;
        let ty = |v: Value| cx.borrow().cur.ty(v).clone();
        let any = match ty(m.0) {
            Type::Tile(..) => {
                // Whether some lane holds: the maximum of select(m, 1, 0) over the tile, in
                // the lanes' own dtype (so the select has the mask's lane width).
                let (one, zero) = (F::<W>::lit(cx, 1.0).0, F::<W>::lit(cx, 0.0).0);
                let mut e = cx.borrow_mut();
                let s = e.select(m.0, one, zero, float_dtype(W));
                let top = OpKind::Tile(TileOp::Reduce(ReduceOp::Max, Axis::All), vec![s]);
                let top = e.cur.push(top, Type::Scalar(float_dtype(W)));
                drop(e);
                let half = F::<W>::lit(cx, 0.5).0;
                let lt = OpKind::Cmp(CmpOp::Lt, half, top);
                cx.borrow_mut().cur.push(lt, Type::Scalar(DType::Bool))
            }
            _ => m.0,
        };
        let var_ty = Type::Ref(Box::new(ty(otherwise.0)));
        let var = cx.borrow_mut().cur.push(OpKind::Var(otherwise.0), var_ty);
        // The then-block: its own ops, and constants that do not leak out of it.
        let outer_consts = {
            let mut e = cx.borrow_mut();
            e.cur.open();
            e.consts.clone()
        };
        let v = f();
        let then_body = {
            let mut e = cx.borrow_mut();
            e.cur.push_void(OpKind::Write(var, v.0));
            e.consts = outer_consts;
            e.cur.close()
        };
        let then_block = OpKind::If {
            cond: any,
            then_body,
            else_body: Block::default(),
        };
        let read_ty = ty(otherwise.0);
        let mut e = cx.borrow_mut();
        e.cur.push_void(then_block);
        F(e.cur.push(OpKind::Read(var), read_ty), cx)
    }
}

impl<'e> Real for F<'e, 64> {}

impl<'e> Single for F<'e, 32> {
    type Wide = F<'e, 64>;
    fn widen(self) -> F<'e, 64> {
        F(self.push(OpKind::Cast(self.0), DType::F64), self.1)
    }
    fn narrow(w: F<'e, 64>) -> F<'e, 32> {
        F(w.push(OpKind::Cast(w.0), DType::F32), w.1)
    }
}

/// Replaces every math op of `f` (nested blocks included) by the IR ops of its definition
/// (`expand_one`: an `f32` op on `f32` lanes where the function has an `f32` definition,
/// else [`MathFn::apply`] on operands cast to `f64`, `powi`'s `i32` exponent too, the result
/// cast back); a `sin` and a `cos` of one `f32` value in one block share one expansion
/// (`expand_sin_cos`). The ops keep the math op's source location; the
/// last one defines the math op's result value, so its uses are unchanged.
///
/// Expects a verified function (operand dtypes as [`MathFn::operand_dtype`] says).
pub fn expand_function(f: &mut Function) {
    expand_math(f, false);
}

/// Whether `op` is a math op on `f32` or `f64` tiles whose operands are tiles of its result's
/// type (everything but `powi`'s `i32` exponent, scalar operands and scalar results): what
/// the CPU backend runs as one call of a compiled kernel over the tile, the same
/// definition on [`crate::math::packed`] lanes (`eagle-codegen`'s `back/cpu/math.rs`).
pub fn packed_kernel_op(op: &Op, ty: impl Fn(Value) -> Type) -> bool {
    let (OpKind::Math(_, args), Some(r)) = (&op.kind, op.result) else {
        return false;
    };
    let t = ty(r);
    matches!(&t, Type::Tile(_, DType::F32 | DType::F64)) && args.iter().all(|&a| ty(a) == t)
}

/// [`expand_function`], except the ops of [`packed_kernel_op`], which stay math ops: what
/// specialization does (the CPU backend calls its kernels for them; the CUDA backend expands
/// them with [`expand_function`]).
pub fn expand_function_but_packed(f: &mut Function) {
    expand_math(f, true);
}

fn expand_math(f: &mut Function, keep_packed: bool) {
    let is_math = |op: &Op| matches!(op.kind, OpKind::Math(..));
    if !f.body.any(&f.ops, &mut |op| is_math(op)) {
        return;
    }
    let mut body = std::mem::take(&mut f.body);
    let mut values = std::mem::take(&mut f.values);
    body.rewrite(&mut f.ops, &mut |ops, b| {
        if !b.iter(ops).any(is_math) {
            return;
        }
        let mut cur = Cursor::new(std::mem::take(&mut values), std::mem::take(ops), None);
        let ids = std::mem::take(&mut b.ops);
        let pairs = sin_cos_pairs(&cur, &ids);
        let mut later: HashSet<OpId> = HashSet::new();
        for id in ids {
            if later.remove(&id) {
                continue; // expanded with its pair
            }
            if keep_packed && packed_kernel_op(cur.op(id), |v| cur.ty(v).clone()) {
                cur.keep(id);
                continue;
            }
            match (&cur.op(id).kind, cur.op(id).result) {
                (OpKind::Math(m, args), Some(res)) => {
                    let (m, args) = (*m, args.clone());
                    cur.set_loc(cur.op(id).loc.clone());
                    cur = match pairs.get(&id) {
                        Some(&(other, other_res)) => {
                            later.insert(other);
                            let (sin, cos) = if m == MathFn::Sin {
                                (res, other_res)
                            } else {
                                (other_res, res)
                            };
                            expand_sin_cos(args[0], sin, cos, cur)
                        }
                        None => expand_one(m, &args, res, cur),
                    };
                }
                _ => cur.keep(id),
            }
        }
        let (out, v, o) = cur.finish();
        (b.ops, values, *ops) = (out.ops, v, o);
    });
    f.body = body;
    f.values = values;
}

/// The `sin` and `cos` ops of one `f32` operand among `ids` (a block's ops, in order), as the
/// earlier op of each pair mapped to the later one and its result (one pair per operand).
fn sin_cos_pairs(cur: &Cursor, ids: &[OpId]) -> HashMap<OpId, (OpId, Value)> {
    let mut first: HashMap<(Value, MathFn), OpId> = HashMap::new();
    let mut pairs = HashMap::new();
    for &id in ids {
        let op = cur.op(id);
        let (OpKind::Math(m @ (MathFn::Sin | MathFn::Cos), args), Some(r)) = (&op.kind, op.result)
        else {
            continue;
        };
        if cur.ty(r).dtype() != Some(DType::F32) || !m.has_f32() {
            continue;
        }
        let other = if *m == MathFn::Sin {
            MathFn::Cos
        } else {
            MathFn::Sin
        };
        match first.remove(&(args[0], other)) {
            Some(earlier) => {
                pairs.insert(earlier, (id, r));
            }
            None => {
                first.entry((args[0], *m)).or_insert(id);
            }
        }
    }
    pairs
}

/// Appends `sin = sin(x)` and `cos = cos(x)` (`f32`) to `cur`'s block as one expansion
/// ([`crate::math::single::sin_and_cos`]: one reduction, one pair of kernels; the same bits
/// as each function's own definition, which `tests/math.rs` holds the backends to).
fn expand_sin_cos(x: Value, sin: Value, cos: Value, cur: Cursor) -> Cursor {
    let ((s, c), mut cur) = run(cur, |cx| {
        let (s, c) = crate::math::single::sin_and_cos(lane::<32>(cx, x));
        (s.0, c.0)
    });
    cur.append(OpKind::Cast(s), Some(sin));
    cur.append(OpKind::Cast(c), Some(cos));
    cur
}

/// Appends the definition of `res = m(args)` to `cur`'s block, at `cur`'s location: for an
/// `f32` result, the function's `f32` definition on `f32` lanes where it has one
/// ([`MathFn::apply_f32`]); else the `f64` one on the operands cast to `f64`, the result cast
/// back.
fn expand_one(m: MathFn, args: &[Value], res: Value, cur: Cursor) -> Cursor {
    let d = cur.ty(res).dtype().unwrap_or(DType::F64);
    // `d` is `f32` or `f64`: the storage floats are widened to `f32` before this runs
    // (`crate::narrow::widen_function`). `MathFn::eval_wide` makes the same choice.
    let single = d != DType::F64 && m.has_f32();
    let before = cur.ops().len();
    // The result and its lanes' dtype (the branch that ran).
    let ((r, lane_dtype), mut cur) = run(cur, |cx| {
        if single {
            let xs: Vec<F<32>> = args.iter().map(|&a| lane::<32>(cx, a)).collect();
            if let Some(r) = m.apply_f32::<F<32>>(&xs) {
                return (r.0, DType::F32);
            }
        }
        let wide: Vec<F> = args.iter().map(|&a| lane::<64>(cx, a)).collect();
        (m.apply::<F>(&wide).0, DType::F64)
    });
    let defined = cur.ops().len() > before;
    match cur.last_mut() {
        // Rename the last op's result to the math op's: its type is the same.
        Some(last) if d == lane_dtype && defined && last.result == Some(r) => {
            last.result = Some(res);
        }
        _ => cur.append(OpKind::Cast(r), Some(res)),
    }
    cur
}

/// `x` (a float or `i32` scalar or tile) as a float lane of width `W`: itself, or cast.
fn lane<const W: u32>(cx: Cx<'_>, x: Value) -> F<'_, W> {
    let mut e = cx.borrow_mut();
    match e.cur.ty(x).dtype() {
        Some(d) if d == float_dtype(W) => F(x, cx),
        None => F(x, cx),
        _ => F(e.push(OpKind::Cast(x), float_dtype(W)), cx),
    }
}

/// `x` (an `f32` or `f64` scalar or tile) as an `f64` lane: itself, or cast.
fn widen(cx: Cx<'_>, x: Value) -> F<'_> {
    lane::<64>(cx, x)
}

/// Runs `build` with the IR instance of the lanes writing at `cur` (its innermost block, at
/// its location); returns the value `build` returns. Used by [`crate::narrow`] for the float
/// storage formats' conversions of [`crate::math::narrow`].
fn emit_into(cur: &mut Cursor, build: impl FnOnce(Cx<'_>) -> Value) -> Value {
    let cell = RefCell::new(Emitter {
        cur: std::mem::take(cur),
        consts: HashMap::new(),
    });
    let r = build(&cell);
    *cur = cell.into_inner().cur;
    r
}

/// `x` (an `f32` or `f64` scalar or tile) rounded to `fmt`, as an `f32` holding the value
/// exactly ([`crate::math::narrow::round_to`]).
pub(crate) fn emit_round(cur: &mut Cursor, x: Value, fmt: crate::math::narrow::Format) -> Value {
    emit_into(cur, |cx| {
        let r = crate::math::narrow::round_to(widen(cx, x), fmt);
        r.push(OpKind::Cast(r.0), DType::F32)
    })
}

/// The `f32` value of the 16-bit patterns `h` (a `u64` scalar or tile, the bits above 16
/// zero) of `fmt` ([`crate::math::narrow::decode`]).
pub(crate) fn emit_decode(cur: &mut Cursor, h: Value, fmt: crate::math::narrow::Format) -> Value {
    emit_into(cur, |cx| {
        let r: F = crate::math::narrow::decode(U(h, cx), fmt);
        r.push(OpKind::Cast(r.0), DType::F32)
    })
}

/// The 16-bit patterns of `fmt` (a `u64` scalar or tile) of `x`, an `f32` scalar or tile of
/// values of `fmt` ([`crate::math::narrow::encode`]).
pub(crate) fn emit_encode(cur: &mut Cursor, x: Value, fmt: crate::math::narrow::Format) -> Value {
    emit_into(cur, |cx| {
        let wide = F(cx.borrow_mut().push(OpKind::Cast(x), DType::F64), cx);
        crate::math::narrow::encode(wide, fmt).0
    })
}
