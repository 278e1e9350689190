use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

// A trailing value in a kernel without a return type.
#[eagle::kernel]
pub fn k(x: Tensor<f32, SIZE>) {
    x[0] * 2.0
}

fn main() {}
