use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

#[eagle::kernel]
pub fn k(x: Tensor<i128, SIZE>) {}

fn main() {}
