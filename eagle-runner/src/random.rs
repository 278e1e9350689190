use eagle::Tensor;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A tensor of seeded random `f32` values in [-1, 1) \ {0}: the inputs of every tutorial step
/// (never zeros, so a step that moves nothing cannot pass).
pub fn random_tensor(shape: &[usize], seed: u64) -> Tensor<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n: usize = shape.iter().product();
    let data = (0..n)
        .map(|_| loop {
            let v: f32 = rng.gen_range(-1.0..1.0);
            if v != 0.0 {
                break v;
            }
        })
        .collect();
    Tensor::from_vec(shape, data).unwrap_or_else(|_| Tensor::zeros(shape))
}
