use eagle::prelude::*;

const SIZE: usize = 8;

#[eagle::kernel]
pub fn k(x: Tensor<f32, SIZE, SIZE>) {
    let t = load(x, [0, 0], [SIZE, SIZE]);
    let s = row_sum(t, 1);
}

fn main() {}
