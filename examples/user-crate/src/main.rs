//! `cargo run` (world size 4 on simulated devices) or `cargo run -- 2`.
use eagle::plan::Planes;
use eagle::prelude::*;
use my_kernels::{shift_all, softplus_plan, LEN};

fn main() -> eagle::Result<()> {
    let p: usize = match std::env::args().nth(1) {
        None => 4,
        Some(a) => a
            .parse()
            .map_err(|_| eagle::Error::Usage(format!("expected a world size, found `{a}`")))?,
    };
    let session = Session::sim(p)?;
    let x = Tensor::from_vec(&[p, 1, LEN], (0..p * LEN).map(|i| i as f32).collect())?;
    let mut y = Tensor::<f32>::zeros(&[p, 1, LEN]);
    let report = shift_all.launch(&session, &x, &mut y)?;
    println!(
        "shift_all at P = {p}: y[{}][0] = {} ({} dispatches)",
        p - 1,
        y.row(p - 1)[0],
        report.run.dispatches
    );

    let xs = Tensor::from_vec(&[1000], (0..1000).map(|i| i as f64 / 100.0 - 5.0).collect())?;
    let mut out = Tensor::<f64>::zeros(&[1000]);
    softplus_plan(2)?.run(
        0,
        &mut Planes::new().input("x", &xs).output("out", &mut out),
    )?;
    println!("softplus plan: out[500] = {}", out.data()[500]);
    Ok(())
}
