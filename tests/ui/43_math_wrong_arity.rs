use eagle::prelude::*;

const SIZE: usize = 8;

#[eagle::kernel]
pub fn k(x: Tensor<f32, SIZE>) {
    let t = load(x, [0], [SIZE]);
    let a = t.ln(2.0);
}

fn main() {}
