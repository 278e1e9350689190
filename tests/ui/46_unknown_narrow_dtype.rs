use eagle::prelude::*;

const SIZE: usize = 8;

// eagle's narrow floats are `f16` and `bf16`; an 8-bit float is not a dtype.
#[eagle::kernel]
pub fn k(x: Tensor<f8, SIZE>) {}

fn main() {}
