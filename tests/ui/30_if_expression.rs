use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

#[eagle::kernel(device)]
pub fn k(ctx: Ctx) {
    let a = if rank(ctx) == 0 { 1 } else { 2 };
}

fn main() {}
