use eagle::prelude::*;

const SIZE: usize = 8;

#[eagle::kernel]
pub fn k(x: Tensor<f32, SIZE, SIZE>) {
    let n = 4;
    let z = zeros([n, SIZE], f32);
}

fn main() {}
