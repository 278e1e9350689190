use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

#[eagle::kernel]
pub fn fill(y: Out<Tensor<f32, SIZE>>) {
    store(y, [0], full([SIZE], 1.0));
}

// `fill` has no return type: its call has no value.
#[eagle::kernel]
pub fn k(y: Out<Tensor<f32, SIZE>>) {
    let v = fill(y);
}

fn main() {}
