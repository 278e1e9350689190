use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

#[eagle::kernel(device)]
pub fn k(ctx: Ctx) {
    match rank(ctx) {
        _ => {}
    };
}

fn main() {}
