use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

#[eagle::host]
pub fn h(ctx: Ctx) {}

fn main() {}
