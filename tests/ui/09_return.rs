use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

#[eagle::kernel(device)]
pub fn k(ctx: Ctx, y: Out<Tensor<f32, SIZE>>) {
    if rank(ctx) == 0 {
        return;
    }
}

fn main() {}
