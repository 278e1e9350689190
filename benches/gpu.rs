//! GPU bandwidth: a streaming sample kernel (`y[s] = a * x[s] + b` over f64, 16 bytes moved per
//! sample) next to a device-to-device copy of the same bytes, on GPU 0. Prints a markdown table;
//! on a machine without a CUDA driver it prints why it skipped and exits 0.
//!
//! `cargo bench --bench gpu` (run by `scripts/gpu-check.sh`)

use eagle::codegen::{self, Target};
use eagle::ir::EagleFn;
use eagle::prelude::*;
use eagle::runtime::cuda::{self, KernelArg};

const N: Dim = dynamic!("N");

/// Streams x into y: one read and one write of 8 bytes per sample.
#[eagle::kernel(sample)]
pub fn axpb(s: usize, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    y[s] = 2.0 * x[s] + 1.0;
}

fn main() {
    if !cuda::driver_available() {
        println!("skipped: no CUDA driver on this machine (the GPU benchmark needs one)");
        return;
    }
    let (name, arch) = match cuda::device_info(0) {
        Ok(i) => i,
        Err(e) => {
            println!("skipped: {e}");
            return;
        }
    };
    println!("GPU 0: {name} ({arch})\n");
    println!("| samples | bytes moved | sample kernel GB/s | device copy GB/s | ratio |");
    println!("|---|---|---|---|---|");
    let module = axpb::module().expect("module");
    for n in [1usize << 20, 1 << 24, 1 << 26] {
        let mut b = codegen::Bindings::world(1);
        b.dims.insert("N".into(), n as u64);
        let (art, _) = codegen::compile(&module, "axpb", &b, Target::Cuda).expect("compile");
        let x: Vec<u8> = (0..n).flat_map(|i| (i as f64).to_le_bytes()).collect();
        let mut y = vec![0u8; n * 8];
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let mut args = [
                KernelArg::Scalar(0),
                KernelArg::Scalar(n as u64),
                KernelArg::In(&x),
                KernelArg::Out(&mut y),
            ];
            let t = cuda::launch_samples(&art, "axpb__samples", 0, 0, n as u64, false, &mut args)
                .expect("launch");
            best = best.min(t.as_secs_f64());
        }
        let check = f64::from_le_bytes(y[8 * (n - 1)..].try_into().expect("8 bytes"));
        assert_eq!(check, 2.0 * (n - 1) as f64 + 1.0, "y[n-1]");
        let bytes = 16.0 * n as f64;
        let kernel = bytes / best / 1e9;
        let copy = cuda::copy_bandwidth(0, n * 8, 5).expect("copy");
        println!(
            "| {n} | {:.0} MiB | {kernel:.0} | {copy:.0} | {:.2} |",
            bytes / (1 << 20) as f64,
            kernel / copy
        );
    }
}
