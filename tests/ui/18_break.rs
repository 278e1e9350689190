use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

#[eagle::kernel]
pub fn k(x: Tensor<f32, SIZE>) {
    if SIZE > 4 {
        break;
    }
}

fn main() {}
