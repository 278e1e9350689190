//! Expanding the math library into primitive ops (a transform): the IR instance of
//! [`Real`], where each primitive appends one IR op. [`expand_function`] replaces every
//! `OpKind::Math` op by the ops of its one definition (`crate::math`), and `crate::narrow`
//! emits the 16-bit float formats' conversions through [`emit_round`], [`emit_decode`] and
//! [`emit_encode`].

use crate::ir::{
    Axis, BinOp, Block, CmpOp, Const, Function, MathFn, Op, OpKind, ReduceOp, TileOp, UnOp, Value,
};
use crate::math::lanes::{Bits, Mask, Real};
use crate::types::{DType, Type};
use std::cell::RefCell;
use std::collections::HashMap;
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

/// The context every IR lane carries ([`Real::Cx`]): the emitter it appends to. One exists
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

/// An `f64` lane in the IR.
#[derive(Debug, Clone, Copy)]
pub struct F<'e>(Value, Cx<'e>);
/// A `u64` lane in the IR.
#[derive(Debug, Clone, Copy)]
pub struct U<'e>(Value, Cx<'e>);
/// A `bool` lane in the IR.
#[derive(Debug, Clone, Copy)]
pub struct M<'e>(Value, Cx<'e>);

macro_rules! bin {
    ($t:ident, $tr:ident, $m:ident, $op:expr, $d:expr) => {
        impl<'e> $tr for $t<'e> {
            type Output = $t<'e>;
            fn $m(self, o: $t<'e>) -> $t<'e> {
                let v = self
                    .1
                    .borrow_mut()
                    .push(OpKind::Binary($op, self.0, o.0), $d);
                $t(v, self.1)
            }
        }
    };
}
bin!(F, Add, add, BinOp::Add, DType::F64);
bin!(F, Sub, sub, BinOp::Sub, DType::F64);
bin!(F, Mul, mul, BinOp::Mul, DType::F64);
bin!(F, Div, div, BinOp::Div, DType::F64);
bin!(U, Add, add, BinOp::Add, DType::U64);
bin!(U, Sub, sub, BinOp::Sub, DType::U64);
bin!(U, BitAnd, bitand, BinOp::And, DType::U64);
bin!(U, BitOr, bitor, BinOp::Or, DType::U64);
bin!(U, BitXor, bitxor, BinOp::Xor, DType::U64);
bin!(M, BitAnd, bitand, BinOp::And, DType::Bool);
bin!(M, BitOr, bitor, BinOp::Or, DType::Bool);

impl<'e> F<'e> {
    /// Appends `kind` (an op on this lane's function) with a result of dtype `d`.
    fn push(self, kind: OpKind, d: DType) -> Value {
        self.1.borrow_mut().push(kind, d)
    }
}

impl<'e> Neg for F<'e> {
    type Output = F<'e>;
    fn neg(self) -> F<'e> {
        F(
            self.push(OpKind::Unary(UnOp::Neg, self.0), DType::F64),
            self.1,
        )
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

impl<'e> U<'e> {
    /// `self op k` for a constant shift `k`.
    fn shift(self, op: BinOp, n: u32) -> U<'e> {
        let k = U::lit(self.1, n as u64);
        let v = self
            .1
            .borrow_mut()
            .push(OpKind::Binary(op, self.0, k.0), DType::U64);
        U(v, self.1)
    }
}

impl<'e> Shl<u32> for U<'e> {
    type Output = U<'e>;
    fn shl(self, n: u32) -> U<'e> {
        self.shift(BinOp::Shl, n)
    }
}

impl<'e> Shr<u32> for U<'e> {
    type Output = U<'e>;
    fn shr(self, n: u32) -> U<'e> {
        self.shift(BinOp::Shr, n)
    }
}

impl<'e> Bits for U<'e> {
    type Mask = M<'e>;
    type Cx = Cx<'e>;
    fn cx(self) -> Cx<'e> {
        self.1
    }
    fn lit(cx: Cx<'e>, v: u64) -> U<'e> {
        let c = cx
            .borrow_mut()
            .constant(Const::Int(v as i128), DType::U64, v);
        U(c, cx)
    }
    fn eq(self, o: U<'e>) -> M<'e> {
        let v = self
            .1
            .borrow_mut()
            .push(OpKind::Cmp(CmpOp::Eq, self.0, o.0), DType::Bool);
        M(v, self.1)
    }
    fn ult(self, o: U<'e>) -> M<'e> {
        let v = self
            .1
            .borrow_mut()
            .push(OpKind::Cmp(CmpOp::Lt, self.0, o.0), DType::Bool);
        M(v, self.1)
    }
    fn select(m: M<'e>, a: U<'e>, b: U<'e>) -> U<'e> {
        U(m.1.borrow_mut().select(m.0, a.0, b.0, DType::U64), m.1)
    }
}

impl<'e> Real for F<'e> {
    type Mask = M<'e>;
    type Bits = U<'e>;
    type Cx = Cx<'e>;
    fn cx(self) -> Cx<'e> {
        self.1
    }
    fn lit(cx: Cx<'e>, v: f64) -> F<'e> {
        let c = cx
            .borrow_mut()
            .constant(Const::F64(v), DType::F64, v.to_bits());
        F(c, cx)
    }
    fn sqrt(self) -> F<'e> {
        F(
            self.push(OpKind::Unary(UnOp::Sqrt, self.0), DType::F64),
            self.1,
        )
    }
    fn abs(self) -> F<'e> {
        F(
            self.push(OpKind::Unary(UnOp::Abs, self.0), DType::F64),
            self.1,
        )
    }
    fn lt(self, o: F<'e>) -> M<'e> {
        M(
            self.push(OpKind::Cmp(CmpOp::Lt, self.0, o.0), DType::Bool),
            self.1,
        )
    }
    fn le(self, o: F<'e>) -> M<'e> {
        M(
            self.push(OpKind::Cmp(CmpOp::Le, self.0, o.0), DType::Bool),
            self.1,
        )
    }
    fn eq(self, o: F<'e>) -> M<'e> {
        M(
            self.push(OpKind::Cmp(CmpOp::Eq, self.0, o.0), DType::Bool),
            self.1,
        )
    }
    fn select(m: M<'e>, a: F<'e>, b: F<'e>) -> F<'e> {
        F(m.1.borrow_mut().select(m.0, a.0, b.0, DType::F64), m.1)
    }
    fn to_bits(self) -> U<'e> {
        U(self.push(OpKind::Bitcast(self.0), DType::U64), self.1)
    }
    fn from_bits(b: U<'e>) -> F<'e> {
        F(b.1.borrow_mut().push(OpKind::Bitcast(b.0), DType::F64), b.1)
    }
    /// `if any(m) { v = f() }`: `f`'s ops in the then-block of one `if` on a scalar, with a
    /// variable carrying the result out (initialised to `otherwise`). `f` builds one value, so
    /// the block is one fused tree.
    fn if_any(m: M<'e>, f: impl FnOnce() -> F<'e>, otherwise: F<'e>) -> F<'e> {
        let cx = m.1;
        let ty = |v: Value| cx.borrow().cur.ty(v).clone();
        let any = match ty(m.0) {
            Type::Tile(..) => {
                // Whether some lane holds: the maximum of select(m, 1, 0) over the tile.
                let (one, zero) = (F::lit(cx, 1.0).0, F::lit(cx, 0.0).0);
                let mut e = cx.borrow_mut();
                let s = e.select(m.0, one, zero, DType::F64);
                let top = OpKind::Tile(TileOp::Reduce(ReduceOp::Max, Axis::All), vec![s]);
                let top = e.cur.push(top, Type::Scalar(DType::F64));
                drop(e);
                let half = F::lit(cx, 0.5).0;
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

/// Replaces every math op of `f` (nested blocks included) by the IR ops of its definition
/// ([`MathFn::apply`]): `f32` operands are cast to `f64` first and the result cast back,
/// `powi`'s `i32` exponent is cast to `f64`. The ops keep the math op's source location; the
/// last one defines the math op's result value, so its uses are unchanged.
///
/// Expects a verified function (operand dtypes as [`MathFn::operand_dtype`] says).
pub fn expand_function(f: &mut Function) {
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
        for id in std::mem::take(&mut b.ops) {
            match (&cur.op(id).kind, cur.op(id).result) {
                (OpKind::Math(m, args), Some(res)) => {
                    let (m, args) = (*m, args.clone());
                    cur.set_loc(cur.op(id).loc.clone());
                    cur = expand_one(m, &args, res, cur);
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

/// Appends the definition of `res = m(args)` to `cur`'s block, at `cur`'s location.
fn expand_one(m: MathFn, args: &[Value], res: Value, cur: Cursor) -> Cursor {
    let d = cur.ty(res).dtype().unwrap_or(DType::F64);
    let before = cur.ops().len();
    let (r, mut cur) = run(cur, |cx| {
        let wide: Vec<F> = args.iter().map(|&a| widen(cx, a)).collect();
        m.apply_for::<F>(d, &wide).0
    });
    let defined = cur.ops().len() > before;
    match cur.last_mut() {
        // Rename the last op's result to the math op's: its type is the same.
        Some(last) if d == DType::F64 && defined && last.result == Some(r) => {
            last.result = Some(res);
        }
        _ => cur.append(OpKind::Cast(r), Some(res)),
    }
    cur
}

/// `x` (an `f32` or `f64` scalar or tile) as an `f64` lane: itself, or cast.
fn widen(cx: Cx<'_>, x: Value) -> F<'_> {
    let mut e = cx.borrow_mut();
    match e.cur.ty(x).dtype() {
        Some(DType::F64) | None => F(x, cx),
        _ => F(e.push(OpKind::Cast(x), DType::F64), cx),
    }
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
