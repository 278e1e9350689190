use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

#[eagle::kernel(device)]
pub fn per_rank(ctx: Ctx, x: Tensor<f32, SIZE>) {}

#[eagle::host]
pub fn h(x: Tensor<f32, NR, SIZE>) {
    for r in 0..world_size() {
        per_rank(x[r]);
    }
}

fn main() {}
