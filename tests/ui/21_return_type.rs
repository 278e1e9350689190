use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

// Only compute kernels return values; a per-device program writes its results.
#[eagle::kernel(device)]
pub fn k(ctx: Ctx, x: Tensor<f32, SIZE>) -> f32 {
    1.0
}

fn main() {}
