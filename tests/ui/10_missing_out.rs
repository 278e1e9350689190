use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

#[eagle::kernel]
pub fn k(x: Tensor<f32, SIZE>) {
    let t = load(x, [0], [SIZE]);
    store(x, [0], t * 2.0);
}

fn main() {}
