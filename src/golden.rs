//! Host-side goldens for the collective steps, computed in the combine orders that
//! `docs/collectives.md` documents (so results compare bit for bit).

use crate::Tensor;
use std::ops::Range;

/// Elements of chunk `c` when `n` elements are cut into `p` contiguous chunks, the first
/// `n % p` one element longer (the rank-partition rule of the multi-GPU seed).
pub fn chunk(n: usize, p: usize, c: usize) -> Range<usize> {
    let (off, len) = eagle_codegen::lower::chunk(n as u64, p as u64, c as u64);
    off as usize..(off + len) as usize
}

/// The chunk that holds element `j`.
pub fn owner(n: usize, p: usize, j: usize) -> usize {
    (0..p).find(|&c| chunk(n, p, c).contains(&j)).unwrap_or(0)
}

/// Allreduce of the rows of `x` (`[p, n]`) with `op`: element `j` folds the rows left to right
/// in rank order `0, 1, ..., p-1` (mesh, two-phase), or for `ring`, in ring order starting at
/// the owner `c` of `j`: `c, c+1, ..., c-1`.
pub fn allreduce(x: &Tensor<f32>, op: fn(f32, f32) -> f32, ring: bool) -> Vec<f32> {
    let (p, n) = (x.shape()[0], x.shape()[1]);
    (0..n)
        .map(|j| {
            let start = if ring { owner(n, p, j) } else { 0 };
            (1..p).fold(x.row(start)[j], |acc, k| op(acc, x.row((start + k) % p)[j]))
        })
        .collect()
}
