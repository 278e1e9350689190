//! The passes that turn a generic module into the concrete one backends take:
//! [`specialize`] (bind dims and the world size, fold with `eagle_ir::eval`, range analysis,
//! dead-code elimination, re-verify), which runs [`lower_collectives`] once P is known.

pub(crate) mod bind;
pub mod fusion;
pub mod lower_collectives;
pub(crate) mod specialize;
pub(crate) mod value_numbering;
