//! eagle-ir: the target-independent intermediate representation of eagle programs.
//!
//! A [`Module`] holds [`Function`]s at three [`Level`]s (host orchestrator, per-device program,
//! compute kernel). Function bodies are structured: a [`Block`] is a list of [`Op`]s, and `for`
//! and `if` ops own nested blocks. Values are SSA handles ([`Value`]) into a per-function type
//! table. Shapes are lists of [`Dim`]s, each a constant or a symbol (`dynamic!("NR")`) that
//! specialization binds.
//!
//! The IR has a text form: [`print_module`] writes it and [`parse_module`] reads it back, and the
//! two round-trip exactly (print, parse, print gives identical text). [`verify_module`] checks
//! the structural and typing rules and names the function, the op and the operand of each
//! violation.
//!
//! Invariant: this crate knows no backend, platform or transport.

mod analysis;
mod builder;
mod builtin;
pub mod cursor;
pub mod entity;
mod error;
pub mod eval;
pub mod expand;
mod facts;
mod ir;
pub mod math;
pub mod narrow;
mod op;
pub mod prim;
pub mod spec;
mod text;
pub mod tile;
mod types;
pub mod typing;
mod valid;
pub mod views;

pub use analysis::{access_category, AccessCategory, AccessInfo, ReduceKind};
pub use builder::{FunctionBuilder, Indexed, IntoDim, ModuleBuilder, Operand, Returns, TileArg};
pub use builtin::{Builtin, Method, FROM_BITS, MATMUL_MX, MX_BLOCK, TOPK};
pub use cursor::Cursor;
pub use error::{IrError, Result};
pub use facts::{Defs, Facts, FunctionFacts, IndexRange};
pub use ir::MathFn;
pub use ir::TileOp;
pub use ir::{
    at, AllreduceMode, BinOp, Block, CmpOp, Const, Elementwise, Function, Level, Loc, Module,
    NotifyOp, Op, OpId, OpKind, Ops, Param, ReduceOp, Trap, UnOp, Value, Want,
};
pub use ir::{Levels, OpInfo};
pub use text::parse::parse_module;
pub use text::print::{
    print_function, print_module, print_module_with_locs, print_op, value_numbers,
};
pub use types::{DType, Dim, DimError, DimExpr, DimOp, Shape, Type};
pub use valid::verify_module;

/// Implemented (by `#[eagle::kernel]` and `#[eagle::host]`) for every eagle function.
///
/// `build` adds the function, and every function it calls or dispatches, to a module.
pub trait EagleFn {
    /// The function's name in the IR (the Rust function's name).
    const NAME: &'static str;
    /// The level the function was declared at.
    const LEVEL: Level;
    /// The access category a sample kernel declares (`#[eagle::kernel(sample, category =
    /// "...")]`, text form), which plans use in place of the inferred one; `None` when not
    /// declared.
    const CATEGORY: Option<&'static str> = None;
    /// Adds this function (and its callees) to `m`. Building a function twice is a no-op.
    ///
    /// # Errors
    /// [`IrError::Build`] for a body that does not type-check (for example `f32 + index`), and
    /// [`IrError::Recursion`] when the function calls itself directly or indirectly.
    fn build(m: &mut ModuleBuilder) -> Result<()>;

    /// The generic module rooted at this function: it and everything it calls.
    ///
    /// # Errors
    /// As [`EagleFn::build`], plus the verifier's [`IrError::Verify`].
    fn module() -> Result<Module> {
        let mut m = ModuleBuilder::new();
        Self::build(&mut m)?;
        let module = m.finish();
        verify_module(&module)?;
        Ok(module)
    }

    /// The generic IR text of the module rooted at this function (symbolic dims unbound).
    ///
    /// # Errors
    /// As [`EagleFn::module`].
    fn ir() -> Result<String> {
        Ok(print_module(&Self::module()?))
    }
}
