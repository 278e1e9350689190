//! `<<` on a rank compiles (a shift of an `index` by an integer literal).
#![deny(warnings)]
use eagle::prelude::*;

#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

#[eagle::kernel(device)]
pub fn k(ctx: Ctx) {
    let a = rank(ctx) << 1;
}

fn main() {}
