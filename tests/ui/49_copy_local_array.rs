use eagle::prelude::*;

#[eagle::kernel(device)]
pub fn k(ctx: Ctx, y: Out<Tensor<f32, 4>>) {
    let mut a = [1.0f32; 4];
    a[rank(ctx)] = 2.0;
    let b = a;
    y[0] = b[0];
}

fn main() {}
