use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

const D: Dim = dynamic!("1st");

fn main() {}
