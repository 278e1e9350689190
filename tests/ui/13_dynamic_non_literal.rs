use eagle::prelude::*;

const SIZE: usize = 8;
#[allow(dead_code)]
const NR: Dim = dynamic!("NR");

const NAME: &str = "NR";
const D: Dim = dynamic!(NAME);

fn main() {}
