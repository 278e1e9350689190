//! A file with only kernels needs no `use eagle::prelude::*;` and compiles without a warning
//! (issue 12, item 26): the attributes are written by path and the parameter types are
//! eagle's syntax, read by the macro.
#![deny(warnings)]

const SIZE: usize = 8;

/// Doubles a tile.
#[eagle::kernel]
pub fn scale(x: Tensor<f32, 1, SIZE>, y: Out<Tensor<f32, 1, SIZE>>) {
    store(y, [0, 0], load(x, [0, 0], [1, SIZE]) * 2.0);
}

fn main() {
    assert!(scale.ir().expect("builds").contains("compute @scale"));
}
