use eagle::prelude::*;

const SIZE: usize = 8;

// `from_bits` makes a float from its bits; there is no `i16::from_bits`.
#[eagle::kernel]
pub fn k(x: Tensor<u16, SIZE>) {
    let t = load(x, [0], [SIZE]);
    let h = i16::from_bits(t);
}

fn main() {}
