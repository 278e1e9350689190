use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

#[eagle::kernel]
pub fn k(x: Out<Tensor<f32, SIZE>>) {
    let f = |a: f32| a * 2.0;
}

fn main() {}
