use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

// A kernel with a return type ends with its value, without `;`.
#[eagle::kernel]
pub fn twice(x: Tensor<f32, SIZE>) -> Tile<f32, SIZE> {
    load(x, [0], [SIZE]) * 2.0;
}

fn main() {}
