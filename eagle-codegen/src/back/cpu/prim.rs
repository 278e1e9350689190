//! The Cranelift instances of [`prim::Emitter`], [`prim::IntEmitter`] and
//! [`prim::ShiftEmitter`]: the rules written once in `eagle_ir::prim` (float `min`/`max`,
//! argmax/argmin, the sort order, integer `/` and `%`, shifts) emitted as SSA values.

use super::Lower;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Value as ClValue};
use eagle_ir::{prim, DType};

/// The Cranelift instance of [`prim::Emitter`]: SSA values of dtype `d`, truth values as `i8`.
pub(super) struct ClPrim<'l, 'a, 'b> {
    pub(super) lw: &'l mut Lower<'a, 'b>,
    pub(super) d: DType,
}

impl prim::Emitter for ClPrim<'_, '_, '_> {
    type V = ClValue;
    type M = ClValue;
    fn is_nan(&mut self, x: &ClValue) -> ClValue {
        if self.d.is_float() {
            self.lw.b.ins().fcmp(FloatCC::Unordered, *x, *x)
        } else {
            self.lw.b.ins().iconst(types::I8, 0)
        }
    }
    fn lt(&mut self, a: &ClValue, b: &ClValue) -> ClValue {
        let ins = self.lw.b.ins();
        if self.d.is_float() {
            ins.fcmp(FloatCC::LessThan, *a, *b)
        } else if self.d.is_signed() {
            ins.icmp(IntCC::SignedLessThan, *a, *b)
        } else {
            ins.icmp(IntCC::UnsignedLessThan, *a, *b)
        }
    }
    fn eq(&mut self, a: &ClValue, b: &ClValue) -> ClValue {
        if self.d.is_float() {
            self.lw.b.ins().fcmp(FloatCC::Equal, *a, *b)
        } else {
            self.lw.b.ins().icmp(IntCC::Equal, *a, *b)
        }
    }
    fn sign_bit(&mut self, x: &ClValue) -> ClValue {
        let it = if self.d == DType::F64 {
            types::I64
        } else {
            types::I32
        };
        let bits = self.lw.b.ins().bitcast(it, MemFlagsData::new(), *x);
        self.lw.b.ins().icmp_imm_s(IntCC::SignedLessThan, bits, 0)
    }
    fn and(&mut self, a: ClValue, b: ClValue) -> ClValue {
        self.lw.b.ins().band(a, b)
    }
    fn or(&mut self, a: ClValue, b: ClValue) -> ClValue {
        self.lw.b.ins().bor(a, b)
    }
    fn not(&mut self, a: ClValue) -> ClValue {
        self.lw.b.ins().bxor_imm_s(a, 1)
    }
    fn select(&mut self, m: ClValue, a: ClValue, b: ClValue) -> ClValue {
        self.lw.b.ins().select(m, a, b)
    }
    fn canonical_nan(&mut self) -> ClValue {
        if self.d == DType::F64 {
            let nan = f64::from_bits(prim::CANONICAL_NAN_F64);
            self.lw.b.ins().f64const(nan)
        } else {
            let nan = f32::from_bits(prim::CANONICAL_NAN_F32);
            self.lw.b.ins().f32const(nan)
        }
    }
}

impl prim::IntEmitter for ClPrim<'_, '_, '_> {
    fn signed(&self) -> bool {
        self.d.is_signed()
    }
    fn int(&mut self, k: i64) -> ClValue {
        let ty = super::cl_type(self.d);
        self.lw.b.ins().iconst(ty, k)
    }
    fn neg(&mut self, x: &ClValue) -> ClValue {
        self.lw.b.ins().ineg(*x)
    }
    fn div(&mut self, a: &ClValue, b: &ClValue) -> ClValue {
        if self.d.is_signed() {
            self.lw.b.ins().sdiv(*a, *b)
        } else {
            self.lw.b.ins().udiv(*a, *b)
        }
    }
    fn rem(&mut self, a: &ClValue, b: &ClValue) -> ClValue {
        if self.d.is_signed() {
            self.lw.b.ins().srem(*a, *b)
        } else {
            self.lw.b.ins().urem(*a, *b)
        }
    }
}

/// The shifts: `x` a scalar or a vector of dtype `d`, the amount a scalar of `d`.
impl prim::ShiftEmitter for ClPrim<'_, '_, '_> {
    fn width(&self) -> u32 {
        8 * self.d.size() as u32
    }
    fn bit_and(&mut self, a: &ClValue, b: &ClValue) -> ClValue {
        self.lw.b.ins().band(*a, *b)
    }
    fn shl_in_range(&mut self, x: &ClValue, n: &ClValue) -> ClValue {
        self.lw.b.ins().ishl(*x, *n)
    }
    fn shr_in_range(&mut self, x: &ClValue, n: &ClValue) -> ClValue {
        if self.d.is_signed() {
            self.lw.b.ins().sshr(*x, *n)
        } else {
            self.lw.b.ins().ushr(*x, *n)
        }
    }
}
