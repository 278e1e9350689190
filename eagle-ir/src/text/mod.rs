//! The text form of the IR: [`print`] writes it, [`parse`] (with its lexer, [`lex`]) reads it
//! back; the two round-trip.

pub(crate) mod lex;
pub(crate) mod parse;
pub(crate) mod print;
