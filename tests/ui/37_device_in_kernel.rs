use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

#[eagle::kernel]
pub fn inner(x: Tensor<f32, SIZE>) {}

#[eagle::kernel(device)]
pub fn k(ctx: Ctx, x: Tensor<f32, SIZE>) {
    inner(x, device = 0);
}

fn main() {}
