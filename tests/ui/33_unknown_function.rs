use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

#[eagle::kernel]
pub fn k(x: Tensor<f32, SIZE>, y: Out<Tensor<f32, SIZE>>) {
    store(y, [0], softplus(load(x, [0], [SIZE])));
}

fn main() {}
