//! Expanding the math library into primitive ops (a transform): the IR instance of
//! [`Real`], where each primitive appends one IR op. [`expand_function`] replaces every
//! `OpKind::Math` op by the ops of its one definition (`crate::math`), and `crate::narrow`
//! emits the 16-bit float formats' conversions through [`emit_round`], [`emit_decode`] and
//! [`emit_encode`].

use crate::ir::{
    Axis, BinOp, Block, CmpOp, Const, Function, Loc, MathFn, Op, OpKind, ReduceOp, TileOp, UnOp,
    Value,
};
use crate::math::lanes::{Bits, Mask, Real};
use crate::types::{DType, Type};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::{Add, BitAnd, BitOr, BitXor, Div, Mul, Neg, Not, Shl, Shr, Sub};

/// A function's value table.
type Values = crate::entity::PrimaryMap<Value, Type>;

/// The function being expanded into: its value table, the ops emitted so far, the source
/// location they inherit, and the constants already defined.
struct Emitter {
    values: Values,
    ops: Vec<Op>,
    loc: Option<Loc>,
    consts: HashMap<(DType, u64), Value>,
}

thread_local! {
    static EMIT: RefCell<Option<Emitter>> = const { RefCell::new(None) };
}

fn with<T>(f: impl FnOnce(&mut Emitter) -> T) -> T {
    EMIT.with(|e| {
        let mut e = e.borrow_mut();
        let e = e
            .as_mut()
            .expect("math IR lanes are used only inside `expand_function`");
        f(e)
    })
}

impl Emitter {
    /// Appends `kind` with a result of dtype `d`, a tile of its tile operand's shape if it has
    /// one (scalars broadcast).
    fn push(&mut self, kind: OpKind, d: DType) -> Value {
        let shape = kind.operands().iter().find_map(|v| match &self.values[*v] {
            Type::Tile(s, _) => Some(s.clone()),
            _ => None,
        });
        let ty = match shape {
            Some(s) => Type::Tile(s, d),
            None => Type::Scalar(d),
        };
        let v = self.values.push(ty);
        self.ops.push(Op {
            result: Some(v),
            kind,
            loc: self.loc.clone(),
        });
        v
    }

    fn constant(&mut self, c: Const, d: DType, bits: u64) -> Value {
        if let Some(v) = self.consts.get(&(d, bits)) {
            return *v;
        }
        let v = self.push(OpKind::Const(c), d);
        self.consts.insert((d, bits), v);
        v
    }
}

fn push(kind: OpKind, d: DType) -> Value {
    with(|e| e.push(kind, d))
}

/// Appends `kind` with a result of type `ty` (or none).
fn push_typed(kind: OpKind, ty: Option<Type>) -> Option<Value> {
    with(|e| {
        let v = ty.map(|t| e.values.push(t));
        e.ops.push(Op {
            result: v,
            kind,
            loc: e.loc.clone(),
        });
        v
    })
}

/// `select(m, a, b)`; where the mask is a tile and both branches are scalars, `a` is first
/// filled into a tile of the mask's shape (a select takes its shape from its branches).
fn select(m: Value, a: Value, b: Value, d: DType) -> Value {
    with(|e| {
        let scalar = |v: Value| matches!(e.values[v], Type::Scalar(_));
        let a = match &e.values[m] {
            Type::Tile(s, _) if scalar(a) && scalar(b) => {
                let s = s.clone();
                let v = e.values.push(Type::Tile(s, d));
                e.ops.push(Op {
                    result: Some(v),
                    kind: OpKind::Tile(TileOp::Full, vec![a]),
                    loc: e.loc.clone(),
                });
                v
            }
            _ => a,
        };
        e.push(OpKind::Select(m, a, b), d)
    })
}

/// An `f64` lane in the IR.
#[derive(Debug, Clone, Copy)]
pub struct F(Value);
/// A `u64` lane in the IR.
#[derive(Debug, Clone, Copy)]
pub struct U(Value);
/// A `bool` lane in the IR.
#[derive(Debug, Clone, Copy)]
pub struct M(Value);

macro_rules! bin {
    ($t:ident, $tr:ident, $m:ident, $op:expr, $d:expr) => {
        impl $tr for $t {
            type Output = $t;
            fn $m(self, o: $t) -> $t {
                $t(push(OpKind::Binary($op, self.0, o.0), $d))
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

impl Neg for F {
    type Output = F;
    fn neg(self) -> F {
        F(push(OpKind::Unary(UnOp::Neg, self.0), DType::F64))
    }
}

impl Not for M {
    type Output = M;
    fn not(self) -> M {
        M(push(OpKind::Unary(UnOp::Not, self.0), DType::Bool))
    }
}

impl Mask for M {}

impl Shl<u32> for U {
    type Output = U;
    fn shl(self, n: u32) -> U {
        let k = U::lit(n as u64);
        U(push(OpKind::Binary(BinOp::Shl, self.0, k.0), DType::U64))
    }
}

impl Shr<u32> for U {
    type Output = U;
    fn shr(self, n: u32) -> U {
        let k = U::lit(n as u64);
        U(push(OpKind::Binary(BinOp::Shr, self.0, k.0), DType::U64))
    }
}

impl Bits for U {
    type Mask = M;
    fn lit(v: u64) -> U {
        U(with(|e| e.constant(Const::Int(v as i128), DType::U64, v)))
    }
    fn eq(self, o: U) -> M {
        M(push(OpKind::Cmp(CmpOp::Eq, self.0, o.0), DType::Bool))
    }
    fn ult(self, o: U) -> M {
        M(push(OpKind::Cmp(CmpOp::Lt, self.0, o.0), DType::Bool))
    }
    fn select(m: M, a: U, b: U) -> U {
        U(select(m.0, a.0, b.0, DType::U64))
    }
}

impl Real for F {
    type Mask = M;
    type Bits = U;
    fn lit(v: f64) -> F {
        F(with(|e| e.constant(Const::F64(v), DType::F64, v.to_bits())))
    }
    fn sqrt(self) -> F {
        F(push(OpKind::Unary(UnOp::Sqrt, self.0), DType::F64))
    }
    fn abs(self) -> F {
        F(push(OpKind::Unary(UnOp::Abs, self.0), DType::F64))
    }
    fn lt(self, o: F) -> M {
        M(push(OpKind::Cmp(CmpOp::Lt, self.0, o.0), DType::Bool))
    }
    fn le(self, o: F) -> M {
        M(push(OpKind::Cmp(CmpOp::Le, self.0, o.0), DType::Bool))
    }
    fn eq(self, o: F) -> M {
        M(push(OpKind::Cmp(CmpOp::Eq, self.0, o.0), DType::Bool))
    }
    fn select(m: M, a: F, b: F) -> F {
        F(select(m.0, a.0, b.0, DType::F64))
    }
    fn to_bits(self) -> U {
        U(push(OpKind::Bitcast(self.0), DType::U64))
    }
    fn from_bits(b: U) -> F {
        F(push(OpKind::Bitcast(b.0), DType::F64))
    }
    /// `if any(m) { v = f() }`: `f`'s ops in the then-block of one `if` on a scalar, with a
    /// variable carrying the result out (initialised to `otherwise`). `f` builds one value, so
    /// the block is one fused tree.
    fn if_any(m: M, f: impl FnOnce() -> F, otherwise: F) -> F {
        let ty = |v: Value| with(|e| e.values[v].clone());
        let any = match ty(m.0) {
            Type::Tile(..) => {
                // Whether some lane holds: the maximum of select(m, 1, 0) over the tile.
                let s = select(m.0, F::lit(1.0).0, F::lit(0.0).0, DType::F64);
                let all = Axis::All;
                let top = OpKind::Tile(TileOp::Reduce(ReduceOp::Max, all), vec![s]);
                let top = push_typed(top, Some(Type::Scalar(DType::F64))).expect("typed");
                let half = F::lit(0.5).0;
                push_typed(
                    OpKind::Cmp(CmpOp::Lt, half, top),
                    Some(Type::Scalar(DType::Bool)),
                )
                .expect("typed")
            }
            _ => m.0,
        };
        let var = push_typed(
            OpKind::Var(otherwise.0),
            Some(Type::Ref(Box::new(ty(otherwise.0)))),
        )
        .expect("typed");
        // The then-block: its own ops, and constants that do not leak out of it.
        let outer = with(|e| (std::mem::take(&mut e.ops), e.consts.clone()));
        let v = f();
        push_typed(OpKind::Write(var, v.0), None);
        let then_ops = with(|e| {
            e.consts = outer.1;
            std::mem::replace(&mut e.ops, outer.0)
        });
        push_typed(
            OpKind::If {
                cond: any,
                then_body: Block { ops: then_ops },
                else_body: Block::default(),
            },
            None,
        );
        F(push_typed(OpKind::Read(var), Some(ty(otherwise.0))).expect("typed"))
    }
}

/// Replaces every math op of `f` (nested blocks included) by the IR ops of its definition
/// ([`MathFn::apply`]): `f32` operands are cast to `f64` first and the result cast back,
/// `powi`'s `i32` exponent is cast to `f64`. The ops keep the math op's source location; the
/// last one defines the math op's result value, so its uses are unchanged.
///
/// Expects a verified function (operand dtypes as [`MathFn::operand_dtype`] says).
pub fn expand_function(f: &mut Function) {
    let mut values = std::mem::take(&mut f.values);
    expand_block(&mut f.body, &mut values);
    f.values = values;
}

fn expand_block(b: &mut Block, values: &mut Values) {
    if !b.ops.iter().any(has_math) {
        return;
    }
    let mut out = Vec::with_capacity(b.ops.len());
    for mut op in std::mem::take(&mut b.ops) {
        for nested in op.kind.blocks_mut() {
            expand_block(nested, values);
        }
        match (&op.kind, op.result) {
            (OpKind::Math(m, args), Some(res)) => {
                let (m, args) = (*m, args.clone());
                let taken = std::mem::take(values);
                let (ops, back) = expand_one(m, &args, res, taken, op.loc.clone());
                *values = back;
                out.extend(ops);
            }
            _ => out.push(op),
        }
    }
    b.ops = out;
}

fn has_math(op: &Op) -> bool {
    matches!(op.kind, OpKind::Math(..))
        || op.kind.blocks().iter().any(|b| b.ops.iter().any(has_math))
}

fn expand_one(
    m: MathFn,
    args: &[Value],
    res: Value,
    values: Values,
    loc: Option<Loc>,
) -> (Vec<Op>, Values) {
    let d = values[res].dtype().unwrap_or(DType::F64);
    EMIT.with(|e| {
        *e.borrow_mut() = Some(Emitter {
            values,
            ops: vec![],
            loc,
            consts: HashMap::new(),
        })
    });
    let wide: Vec<F> = args
        .iter()
        .map(|&a| {
            let ad = with(|e| e.values[a].dtype().unwrap_or(DType::F64));
            if ad == DType::F64 {
                F(a)
            } else {
                F(push(OpKind::Cast(a), DType::F64))
            }
        })
        .collect();
    let r = m.apply::<F>(&wide);
    let mut em = EMIT
        .with(|e| e.borrow_mut().take())
        .expect("the emitter was set above");
    let last_defines_r = em.ops.last().and_then(|o| o.result) == Some(r.0);
    if d == DType::F64 && last_defines_r {
        // Rename the last op's result to the math op's: its type is the same.
        if let Some(last) = em.ops.last_mut() {
            last.result = Some(res);
        }
    } else {
        em.ops.push(Op {
            result: Some(res),
            kind: OpKind::Cast(r.0),
            loc: em.loc.clone(),
        });
    }
    (em.ops, em.values)
}

/// Appends to `out` the ops of `build`, run with the IR instance of the lanes on `values`
/// (the ops take `loc`); returns the value `build` returns. Used by [`crate::narrow`] for the
/// 16-bit float conversions of [`super::narrow`].
fn emit_into(
    values: &mut Values,
    out: &mut Vec<Op>,
    loc: Option<Loc>,
    build: impl FnOnce() -> Value,
) -> Value {
    let taken = std::mem::take(values);
    EMIT.with(|e| {
        *e.borrow_mut() = Some(Emitter {
            values: taken,
            ops: vec![],
            loc,
            consts: HashMap::new(),
        })
    });
    let r = build();
    let em = EMIT
        .with(|e| e.borrow_mut().take())
        .expect("the emitter was set above");
    *values = em.values;
    out.extend(em.ops);
    r
}

/// `x` (an `f32` or `f64` scalar or tile) rounded to `fmt`, as an `f32` holding the value
/// exactly ([`crate::math::narrow::round_to`]).
pub(crate) fn emit_round(
    values: &mut Values,
    out: &mut Vec<Op>,
    loc: Option<Loc>,
    x: Value,
    fmt: crate::math::narrow::Format,
) -> Value {
    emit_into(values, out, loc, || {
        let wide = match with(|e| e.values[x].dtype()) {
            Some(DType::F64) => F(x),
            _ => F(push(OpKind::Cast(x), DType::F64)),
        };
        let r = crate::math::narrow::round_to(wide, fmt);
        push(OpKind::Cast(r.0), DType::F32)
    })
}

/// The `f32` value of the 16-bit patterns `h` (a `u64` scalar or tile, the bits above 16
/// zero) of `fmt` ([`crate::math::narrow::decode`]).
pub(crate) fn emit_decode(
    values: &mut Values,
    out: &mut Vec<Op>,
    loc: Option<Loc>,
    h: Value,
    fmt: crate::math::narrow::Format,
) -> Value {
    emit_into(values, out, loc, || {
        let r: F = crate::math::narrow::decode(U(h), fmt);
        push(OpKind::Cast(r.0), DType::F32)
    })
}

/// The 16-bit patterns of `fmt` (a `u64` scalar or tile) of `x`, an `f32` scalar or tile of
/// values of `fmt` ([`crate::math::narrow::encode`]).
pub(crate) fn emit_encode(
    values: &mut Values,
    out: &mut Vec<Op>,
    loc: Option<Loc>,
    x: Value,
    fmt: crate::math::narrow::Format,
) -> Value {
    emit_into(values, out, loc, || {
        let wide = F(push(OpKind::Cast(x), DType::F64));
        crate::math::narrow::encode(wide, fmt).0
    })
}
