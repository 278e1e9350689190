use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

#[eagle::kernel(device)]
pub fn k(ctx: Ctx, s: Window<i32, 1>) {
    notify(s, 0, [0], 1, Add);
}

fn main() {}
