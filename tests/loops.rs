//! `continue` and `break` in `for` loops (issue 38, item 3), in compute code, in per-device
//! programs (the peer loop that skips its own rank) and on the host, against plain-Rust
//! goldens on `sim` and in the CUDA emulation; and the forms that stay refused.
use eagle::prelude::*;

#[cfg(feature = "cuda")]
mod emulation;

const N: usize = 20;
const NR: Dim = dynamic!("NR");

/// Sums the even-indexed elements until one exceeds 0.8 (`continue` skips the odd ones,
/// `break` ends the loop there); an inner loop breaks after two of its four turns, which must
/// not end the outer one. `y = [sum, count, index of the break]`.
#[eagle::kernel(device)]
pub fn scan(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, 3>>) {
    let mut sum = 0.0f32;
    let mut count = 0.0f32;
    let mut last = -1.0f32;
    for i in 0..N {
        if i % 2 == 1 {
            continue;
        }
        let v = x[i];
        if v > 0.8 {
            last = i as f32;
            break;
        }
        sum += v;
        count += 1.0;
        for j in 0..4 {
            if j == 2 {
                break;
            }
            count += 0.5;
        }
    }
    y[0] = sum;
    y[1] = count;
    y[2] = last;
}

#[eagle::host]
pub fn scan_host(x: Tensor<f32, N>, y: Out<Tensor<f32, 3>>) {
    scan(x, y, device = 0);
}

/// The same loop in plain Rust.
fn scan_golden(x: &[f32]) -> Vec<f32> {
    let (mut sum, mut count, mut last) = (0.0f32, 0.0f32, -1.0f32);
    for (i, &v) in x.iter().enumerate() {
        if i % 2 == 1 {
            continue;
        }
        if v > 0.8 {
            last = i as f32;
            break;
        }
        sum += v;
        count += 1.0;
        for j in 0..4 {
            if j == 2 {
                break;
            }
            count += 0.5;
        }
    }
    vec![sum, count, last]
}

fn check_scan(s: &Session) {
    let data: Vec<f32> = (0..N).map(|i| i as f32 * 0.05 + 0.013).collect();
    let x = Tensor::from_vec(&[N], data.clone()).unwrap();
    let mut y = Tensor::<f32>::zeros(&[3]);
    scan_host.launch(s, &x, &mut y).unwrap();
    let want = scan_golden(&data);
    // The break happens (at 16: 0.813), so both exits are exercised.
    assert_eq!(want[2], 16.0);
    assert_eq!(
        y.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        "got {:?}, want {want:?}",
        y.data()
    );
}

#[test]
fn continue_and_break_match_plain_rust() {
    check_scan(&Session::sim(1).unwrap());
}

#[cfg(feature = "cuda")]
#[test]
fn continue_and_break_match_plain_rust_in_the_cuda_emulation() {
    emulation::cxx();
    check_scan(&Session::cuda_emulated(vec![0]).unwrap());
}

/// The loop the issue names: every rank writes `rank + 1` into its slot of every other
/// rank's window, skipping itself with `continue`; then each copies its window out.
#[eagle::kernel(device)]
pub fn others(ctx: Ctx, w: Window<i32, NR>, y: Out<Tensor<i32, NR>>) {
    let me = rank(ctx);
    for peer in 0..nranks(ctx) {
        if peer == me {
            continue;
        }
        remote_store(w, peer, [me], full([1], me as i32 + 1));
    }
    barrier(ctx);
    for q in 0..nranks(ctx) {
        y[q] = w[q];
    }
}

#[eagle::host]
pub fn others_host(y: Out<Tensor<i32, NR, NR>>) {
    let b = alloc_window_buffer([NR], i32);
    for r in 0..world_size() {
        others(window(b, [NR], i32), y[r], device = r);
    }
}

#[test]
fn a_peer_loop_skips_its_own_rank_at_every_p() {
    for p in 1..=5usize {
        let s = Session::sim(p).unwrap();
        let mut y = Tensor::<i32>::zeros(&[p, p]);
        others_host.launch(&s, &mut y).unwrap();
        for r in 0..p {
            let want: Vec<i32> = (0..p)
                .map(|q| if q == r { 0 } else { q as i32 + 1 })
                .collect();
            assert_eq!(y.row(r), &want[..], "P={p}, rank {r}");
        }
    }
}

/// A host loop with `continue`: rank 1 is not dispatched, so its output stays zero.
#[eagle::kernel(device)]
pub fn mark(ctx: Ctx, y: Out<Tensor<i32, 1>>) {
    y[0] = rank(ctx) as i32 + 1;
}

#[eagle::host]
pub fn mark_but_one(y: Out<Tensor<i32, NR, 1>>) {
    for r in 0..world_size() {
        if r == 1 {
            continue;
        }
        mark(y[r], device = r);
    }
}

#[test]
fn a_host_loop_continues_past_one_rank() {
    let s = Session::sim(4).unwrap();
    let mut y = Tensor::<i32>::zeros(&[4, 1]);
    mark_but_one.launch(&s, &mut y).unwrap();
    assert_eq!(y.data(), &[1, 0, 3, 4]);
}

/// The generic IR of a loop with exits is the flags and guards the docs describe (one `var`
/// per flag, the rest of an iteration under `if` on `not skip`), not a new op.
#[test]
fn exits_are_variables_and_guards_in_the_ir() {
    let ir = scan.ir().unwrap();
    assert!(ir.contains("= var "), "{ir}");
    assert!(ir.contains("= not "), "{ir}");
    assert!(!ir.contains("continue") && !ir.contains("break"), "{ir}");
}

/// `while` loops (issue 38, item 3): Collatz steps of `n` (a plain `while`), the first index
/// past a running total with `continue` (skipping odd indices) and `break` (at a zero), and a
/// loop that never runs. `y = [steps, index, total, never]`.
#[eagle::kernel(device)]
pub fn whiles(ctx: Ctx, n: i64, x: Tensor<f32, N>, y: Out<Tensor<i64, 4>>) {
    let mut v = n;
    let mut steps = 0i64;
    while v != 1 {
        if v % 2 == 0 {
            v = v / 2;
        } else {
            v = 3 * v + 1;
        }
        steps += 1;
    }
    y[0] = steps;
    let mut i = 0usize;
    let mut total = 0.0f32;
    while total < 3.0 && i < N {
        i += 1;
        if i % 2 == 1 {
            continue;
        }
        if x[i] == 0.0 {
            break;
        }
        total += x[i];
    }
    y[1] = i as i64;
    y[2] = (total * 100.0) as i64;
    let mut never = 0i64;
    while never > 5 {
        never += 1;
    }
    y[3] = never;
}

#[eagle::host]
pub fn whiles_host(n: i64, x: Tensor<f32, N>, y: Out<Tensor<i64, 4>>) {
    whiles(n, x, y, device = 0);
}

/// The same loops in plain Rust.
fn whiles_golden(n: i64, x: &[f32]) -> Vec<i64> {
    let (mut v, mut steps) = (n, 0i64);
    while v != 1 {
        v = if v % 2 == 0 { v / 2 } else { 3 * v + 1 };
        steps += 1;
    }
    let (mut i, mut total) = (0usize, 0.0f32);
    while total < 3.0 && i < N {
        i += 1;
        if i % 2 == 1 {
            continue;
        }
        if x[i] == 0.0 {
            break;
        }
        total += x[i];
    }
    vec![steps, i as i64, (total * 100.0) as i64, 0]
}

fn check_whiles(s: &Session) {
    for (n, zero_at) in [(27i64, None), (6, Some(6usize))] {
        let mut data: Vec<f32> = (0..N).map(|i| 0.25 + i as f32 * 0.125).collect();
        if let Some(z) = zero_at {
            data[z] = 0.0;
        }
        let x = Tensor::from_vec(&[N], data.clone()).unwrap();
        let mut y = Tensor::<i64>::zeros(&[4]);
        whiles_host.launch(s, n, &x, &mut y).unwrap();
        let want = whiles_golden(n, &data);
        assert_eq!(y.data(), &want[..], "n = {n}");
    }
    // Collatz from 27 takes 111 steps; the second case breaks at the planted zero.
    assert_eq!(whiles_golden(27, &[1.0; N])[0], 111);
}

#[test]
fn while_loops_match_plain_rust() {
    check_whiles(&Session::sim(1).unwrap());
}

#[cfg(feature = "cuda")]
#[test]
fn while_loops_match_plain_rust_in_the_cuda_emulation() {
    emulation::cxx();
    check_whiles(&Session::cuda_emulated(vec![0]).unwrap());
}

/// A loop past its cap (`while_cap = 10`; Collatz from 27 needs 111 turns) fails at run time,
/// naming the loop and its source line; within the cap it runs.
#[eagle::kernel(device, while_cap = 10)]
pub fn capped(ctx: Ctx, n: i64, y: Out<Tensor<i64, 1>>) {
    let mut v = n;
    let mut steps = 0i64;
    while v != 1 {
        if v % 2 == 0 {
            v = v / 2;
        } else {
            v = 3 * v + 1;
        }
        steps += 1;
    }
    y[0] = steps;
}

#[eagle::host]
pub fn capped_host(n: i64, y: Out<Tensor<i64, 1>>) {
    capped(n, y, device = 0);
}

#[test]
fn a_while_loop_past_its_cap_is_an_error_naming_the_loop() {
    let s = Session::sim(1).unwrap();
    let mut y = Tensor::<i64>::zeros(&[1]);
    // 8 -> 4 -> 2 -> 1: three turns, within the cap.
    capped_host.launch(&s, 8, &mut y).unwrap();
    assert_eq!(y.data(), &[3]);
    let e = capped_host.launch(&s, 27, &mut y).unwrap_err().to_string();
    assert!(
        e.contains("the `while` loop would run more than 10 turns, its cap; if it is meant to run longer, raise the cap of the function that holds the loop: `while_cap = N` in its attribute (`#[eagle::kernel(device, while_cap = N)]` for a per-device program"),
        "{e}"
    );
    assert!(e.contains("while %"), "{e}");
    assert!(e.contains("(at tests/loops.rs:"), "{e}");
}

/// A `while` loop in a host function (the host interpreter runs it): dispatch to every rank
/// with an odd index, walking down from the top; and its cap, set with
/// `#[eagle::host(while_cap = N)]`.
#[eagle::kernel(device)]
pub fn mark_odd(ctx: Ctx, y: Out<Tensor<i64, 1>>) {
    y[0] = rank(ctx) as i64 + 1;
}

#[eagle::host(while_cap = 3)]
pub fn odd_ranks(y: Out<Tensor<i64, NR, 1>>) {
    let mut r = world_size();
    while r > 0 {
        r -= 1;
        if r % 2 == 1 {
            mark_odd(y[r], device = r);
        }
    }
}

#[test]
fn a_host_while_loop_dispatches_and_stops_at_its_cap() {
    let s = Session::sim(3).unwrap();
    let mut y = Tensor::<i64>::zeros(&[3, 1]);
    odd_ranks.launch(&s, &mut y).unwrap();
    assert_eq!(y.data(), &[0, 2, 0]);
    // Four ranks need four turns: past the cap of 3.
    let s = Session::sim(4).unwrap();
    let mut y = Tensor::<i64>::zeros(&[4, 1]);
    let e = odd_ranks.launch(&s, &mut y).unwrap_err().to_string();
    assert!(
        e.contains("host function `odd_ranks`: function `odd_ranks`, op `while %"),
        "{e}"
    );
    assert!(
        e.contains("the `while` loop would run more than 3 turns"),
        "{e}"
    );
    assert!(e.contains("(at tests/loops.rs:"), "{e}");
}
