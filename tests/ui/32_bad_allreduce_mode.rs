use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

#[eagle::kernel(device)]
pub fn k(ctx: Ctx, s: Window<f32, SIZE>, d: Window<f32, SIZE>) {
    allreduce(ctx, s, d, Sum, Tree);
}

fn main() {}
