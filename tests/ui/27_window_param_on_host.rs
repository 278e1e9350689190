use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

#[eagle::host]
pub fn h(w: Window<f32, SIZE>) {}

fn main() {}
