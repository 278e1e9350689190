use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

#[eagle::kernel(device)]
pub fn k(ctx: Ctx, x: Tensor<f32, SIZE>) {
    let n = rank(ctx);
    let t = load(x, [0], [n]);
}

fn main() {}
