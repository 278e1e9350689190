use eagle::prelude::*;

const NR: Dim = dynamic!("NR");
const TP: Dim = dynamic!("TP");

#[eagle::kernel(device)]
pub fn axis_d(ctx: Ctx, out: Out<Tensor<u64, 1>>) {
    let g = group(ctx, [{ NR / TP }, TP], 2);
    out[0] = rank(g) as u64;
}

fn main() {}
