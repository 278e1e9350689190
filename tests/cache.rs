//! The persistent artifact cache (`eagle::codegen::disk`) as a launch uses it: the CUDA
//! emulation's libraries are written once, found again by a later process (the runner's
//! tests: `eagle-runner/tests/cli.rs`), and a kernel whose constant changed is a miss.
//! NVRTC's images: `tests/cuda.rs`, `nvrtc_images_are_kept_on_disk...` (needs NVRTC).
//! Platform `cuda` (the emulation included) needs feature `cuda`.
#![cfg(feature = "cuda")]

mod emulation;

use eagle::codegen::disk;
use eagle::prelude::*;

const SIZE: usize = 16;

#[eagle::kernel(device)]
fn add_one(_ctx: Ctx, x: Tensor<f32, 1, SIZE>, y: Out<Tensor<f32, 1, SIZE>>) {
    store(y, [0, 0], load(x, [0, 0], [1, SIZE]) + 1.0);
}

#[eagle::host]
fn plus_one(x: Tensor<f32, 1, SIZE>, y: Out<Tensor<f32, 1, SIZE>>) {
    add_one(x, y, device = 0);
}

/// `add_one` with its constant changed.
#[eagle::kernel(device)]
fn add_two(_ctx: Ctx, x: Tensor<f32, 1, SIZE>, y: Out<Tensor<f32, 1, SIZE>>) {
    store(y, [0, 0], load(x, [0, 0], [1, SIZE]) + 2.0);
}

#[eagle::host]
fn plus_two(x: Tensor<f32, 1, SIZE>, y: Out<Tensor<f32, 1, SIZE>>) {
    add_two(x, y, device = 0);
}

fn entries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir.join("cuda-emu"))
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// The one test of this binary: it points `EAGLE_CACHE_DIR` at its own folder before the
/// first launch reads it.
#[test]
fn emulated_launches_write_verified_entries_and_a_changed_constant_is_a_miss() {
    emulation::cxx();
    let dir = std::env::temp_dir().join(format!("eagle-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // SAFETY: the only test of this binary sets it before any thread reads the environment.
    unsafe { std::env::set_var("EAGLE_CACHE_DIR", &dir) };
    assert_eq!(
        disk::global().map(|c| c.dir().to_path_buf()),
        Some(dir.clone())
    );

    let s = Session::cuda_emulated(vec![0]).unwrap();
    let x = Tensor::<f32>::from_vec(&[1, SIZE], (0..SIZE).map(|i| i as f32).collect()).unwrap();
    let mut y = Tensor::<f32>::zeros(&[1, SIZE]);

    let s0 = disk::stats();
    plus_one.launch(&s, &x, &mut y).unwrap();
    assert_eq!(y.data()[3], 4.0);
    let s1 = disk::stats();
    assert_eq!((s1.misses - s0.misses, s1.writes - s0.writes), (1, 1));
    let one = entries(&dir);
    assert_eq!(one.len(), 1, "{one:?}");
    // The entry is the library and its trailer: SHA-256, length, magic.
    let bytes = std::fs::read(&one[0]).unwrap();
    assert_eq!(&bytes[bytes.len() - 8..], disk::MAGIC);
    assert_eq!(&bytes[..4], b"\x7fELF");

    // The same program again in this process: loaded already, no lookup.
    plus_one.launch(&s, &x, &mut y).unwrap();
    assert_eq!(disk::stats(), s1);

    // A constant changed: another source, another key, a miss and a second entry.
    plus_two.launch(&s, &x, &mut y).unwrap();
    assert_eq!(y.data()[3], 5.0);
    let s2 = disk::stats();
    assert_eq!((s2.misses - s1.misses, s2.writes - s1.writes), (1, 1));
    let two = entries(&dir);
    assert_eq!(two.len(), 2);
    assert!(two.contains(&one[0]));

    // What the runner's `eagle cache clear` does.
    let c = disk::global().unwrap();
    assert_eq!(c.usage().entries, 2);
    assert_eq!(c.clear().unwrap().entries, 2);
    assert!(entries(&dir).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
