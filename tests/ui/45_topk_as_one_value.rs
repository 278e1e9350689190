use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

// `topk` returns (values, indices): it is bound by a tuple pattern.
#[eagle::kernel]
pub fn k(x: Tensor<f32, 1, SIZE>, y: Out<Tensor<f32, 1, 2>>) {
    store(y, [0, 0], topk(load(x, [0, 0], [1, SIZE]), 2));
}

fn main() {}
