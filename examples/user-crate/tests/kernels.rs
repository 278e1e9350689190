//! The generic IR as a snapshot (review changes with `cargo insta review`), and the results
//! as exact values.
use eagle::plan::Planes;
use eagle::prelude::*;
use my_kernels::{shift_all, softplus_plan, LEN};

#[test]
fn the_generic_ir_is_the_snapshot() {
    insta::assert_snapshot!(shift_all.ir().unwrap());
}

#[test]
fn every_rank_gets_twice_its_row_plus_its_rank() {
    for p in 1..=4 {
        let s = Session::sim(p).unwrap();
        let x = Tensor::from_vec(&[p, 1, LEN], (0..p * LEN).map(|i| i as f32).collect()).unwrap();
        let mut y = Tensor::<f32>::zeros(&[p, 1, LEN]);
        shift_all.launch(&s, &x, &mut y).unwrap();
        for r in 0..p {
            for (j, v) in y.row(r).iter().enumerate() {
                assert_eq!(*v, 2.0 * (r * LEN + j) as f32 + r as f32);
            }
        }
    }
}

#[test]
fn the_plan_gives_the_same_bits_at_every_thread_count() {
    let xs =
        Tensor::from_vec(&[1000], (0..1000).map(|i| i as f64 / 100.0 - 5.0).collect()).unwrap();
    let mut first: Option<Vec<u64>> = None;
    for threads in 1..=3 {
        let mut out = Tensor::<f64>::zeros(&[1000]);
        softplus_plan(threads)
            .unwrap()
            .run(
                0,
                &mut Planes::new().input("x", &xs).output("out", &mut out),
            )
            .unwrap();
        let bits: Vec<u64> = out.data().iter().map(|v| v.to_bits()).collect();
        // eagle's exp and ln are its own (the same bits on every backend), within 1 ulp of std.
        let std = (1.0 + xs.data()[700].exp()).ln();
        assert!(
            (out.data()[700] - std).abs() <= std * 4e-16,
            "{} vs {std}",
            out.data()[700]
        );
        match &first {
            None => first = Some(bits),
            Some(f) => assert_eq!(&bits, f, "threads = {threads}"),
        }
    }
}
