use eagle::prelude::*;

const NR: Dim = dynamic!("NR");

#[eagle::kernel(device)]
pub fn k(ctx: Ctx, w: Window<f32, NR, 16>) {
    let i = rank(ctx);
    w[i] = 1.0;
}

fn main() {}
