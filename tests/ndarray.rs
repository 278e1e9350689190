//! `ndarray` interop (feature `ndarray`, default): `Tensor` <-> `Array` without copying,
//! arrays and views as launch arguments and plan planes (standard layouts borrowed, observed
//! by pointer identity; other input layouts copied; other output layouts refused by name
//! before anything runs).
#![cfg(feature = "ndarray")]

use eagle::ndarray::{s, Array1, Array2, Array3, ArrayD, IxDyn};
use eagle::plan::{plan, Planes, Structure};
use eagle::prelude::*;
use eagle::{AsInput, AsOutput};

const R: usize = 4;
const C: usize = 8;
const N: Dim = dynamic!("N");
const NR: Dim = dynamic!("NR");

#[eagle::kernel(device)]
fn affine_rows(_ctx: Ctx, x: Tensor<f32, R, C>, y: Out<Tensor<f32, R, C>>) {
    let t = load(x, [0, 0], [R, C]);
    store(y, [0, 0], t * 2.0 + 0.5);
}

#[eagle::host]
fn affine(x: Tensor<f32, R, C>, y: Out<Tensor<f32, R, C>>) {
    affine_rows(x, y, device = 0);
}

#[eagle::kernel(device)]
fn add_rank(ctx: Ctx, x: Tensor<f32, 1, C>, y: Out<Tensor<f32, 1, C>>) {
    store(y, [0, 0], load(x, [0, 0], [1, C]) + rank(ctx) as f32);
}

#[eagle::host]
fn per_rank(x: Tensor<f32, NR, 1, C>, y: Out<Tensor<f32, NR, 1, C>>) {
    for r in 0..world_size() {
        add_rank(x[r], y[r], device = r);
    }
}

#[eagle::kernel(sample, category = "sample_local")]
fn cube(s: usize, x: Tensor<f64, N>, out: Out<Tensor<f64, N>>) {
    out[s] = x[s] * x[s] * x[s];
}

fn want(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| (v * 2.0 + 0.5).to_bits()).collect()
}

fn bits(x: impl IntoIterator<Item = f32>) -> Vec<u32> {
    x.into_iter().map(f32::to_bits).collect()
}

#[test]
fn tensors_and_arrays_convert_by_moving_their_storage() {
    let t = Tensor::<f32>::from_vec(&[2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    let p = t.data().as_ptr();
    assert_eq!(t.view().as_ptr(), p);
    assert_eq!(t.view()[[1, 2]], 5.0);
    let a: ArrayD<f32> = t.into_array();
    assert_eq!(a.as_ptr(), p, "into_array moves the storage");
    assert_eq!(a.shape(), &[2, 3]);
    let back = Tensor::from(a);
    assert_eq!(back.data().as_ptr(), p, "From<Array> moves the storage");
    // A transposed owned array: copied into row-major order of its logical shape.
    let a = Array2::from_shape_vec((2, 3), vec![0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    let tt = Tensor::from(a.reversed_axes());
    assert_eq!(tt.shape(), &[3, 2]);
    assert_eq!(tt.data(), &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    // A standard-layout array that does not start at its allocation (sliced in place).
    let mut a = Array1::from_vec(vec![1.0f32, 2.0, 3.0, 4.0]);
    a.slice_collapse(s![1..3]);
    assert_eq!(Tensor::from(a).data(), &[2.0, 3.0]);
    let mut t = Tensor::<f32>::zeros(&[2, 2]);
    t.view_mut()[[1, 0]] = 7.0;
    assert_eq!(t.data(), &[0.0, 0.0, 7.0, 0.0]);
    let d: ArrayD<f32> = t.into();
    assert_eq!(d[IxDyn(&[1, 0])], 7.0);
}

#[test]
fn standard_layout_arrays_are_launch_arguments_without_a_copy() {
    let s = Session::sim(1).unwrap();
    let x = Array2::from_shape_fn((R, C), |(i, j)| (i * C + j) as f32 * 0.25 - 3.0);
    let mut y = Array2::<f32>::zeros((R, C));
    // What the launch reads and writes is the arrays' own storage.
    assert_eq!(
        (&x).input_arg("affine", "x").unwrap().data_ptr(),
        Some(x.as_ptr().cast())
    );
    assert_eq!(
        (&mut y).output_arg("affine", "y").unwrap().data_ptr(),
        Some(y.as_ptr().cast())
    );
    affine.launch(&s, &x, &mut y).unwrap();
    assert_eq!(bits(y.iter().copied()), want(x.as_slice().unwrap()));
    // Views too, and the same bits as with tensors.
    let mut yv = Array2::<f32>::zeros((R, C));
    affine.launch(&s, x.view(), yv.view_mut()).unwrap();
    let xt = Tensor::from(x.clone());
    let mut yt = Tensor::<f32>::zeros(&[R, C]);
    affine.launch(&s, &xt, &mut yt).unwrap();
    assert_eq!(bits(yv.iter().copied()), bits(yt.data().iter().copied()));
    assert_eq!(bits(y.iter().copied()), bits(yt.data().iter().copied()));
    // A 3-D array at P = 3, per rank.
    let s3 = Session::sim(3).unwrap();
    let x3 = Array3::from_shape_fn((3, 1, C), |(r, _, j)| (r * 10 + j) as f32);
    let mut y3 = Array3::<f32>::zeros((3, 1, C));
    per_rank.launch(&s3, &x3, &mut y3).unwrap();
    assert_eq!(y3[[2, 0, 5]], 25.0 + 2.0);
    assert_eq!(y3[[0, 0, 1]], 1.0);
}

#[test]
fn a_transposed_input_is_copied_and_a_strided_output_is_refused_by_name() {
    let s = Session::sim(1).unwrap();
    // x is the transpose of a [C, R] array: not standard layout, so it is copied once in
    // row-major order of its logical shape [R, C].
    let base = Array2::from_shape_fn((C, R), |(i, j)| (i * R + j) as f32 - 7.5);
    let xt = base.t();
    assert!(!xt.is_standard_layout());
    let arg = xt.input_arg("affine", "x").unwrap();
    assert_ne!(arg.data_ptr(), Some(base.as_ptr().cast()));
    let mut y = Array2::<f32>::zeros((R, C));
    affine.launch(&s, xt, &mut y).unwrap();
    let logical: Vec<f32> = xt.iter().copied().collect();
    assert_eq!(bits(y.iter().copied()), want(&logical));
    // An output that is a transposed view is refused before anything runs.
    let mut big = Array2::<f32>::from_elem((C, R), -1.0);
    let e = affine
        .launch(&s, xt, big.view_mut().reversed_axes())
        .unwrap_err();
    assert!(
        matches!(&e, eagle::Error::Runtime(eagle::runtime::RuntimeError::Argument { function, argument, .. }) if function == "affine" && argument == "y"),
        "{e:#?}"
    );
    assert_eq!(
        e.to_string(),
        "host function `affine`, argument `y`: expected an output in standard layout (row-major, C-contiguous), which eagle writes in place; pass a standard-layout array (`Array::zeros(shape)`) and copy it into the view afterwards (`view.assign(&out)`), found an array of shape [4, 8] with strides [1, 4] (elements)"
    );
    assert!(big.iter().all(|&v| v == -1.0), "nothing ran");
    // A column slice of a wider array, as well.
    let mut wide = Array2::<f32>::zeros((R, 2 * C));
    let e = affine
        .launch(&s, &base.t().to_owned(), wide.slice_mut(s![.., 0..C]))
        .unwrap_err()
        .to_string();
    assert!(
        e.ends_with("found an array of shape [4, 8] with strides [16, 1] (elements)"),
        "{e}"
    );
}

#[test]
fn plan_planes_take_arrays_and_refuse_a_strided_output_plane_by_name() {
    let n = 100;
    let p = plan(cube, Structure::HostTeam, Structure::HostTeam)
        .unwrap()
        .with_threads(2);
    let x = Array1::from_shape_fn(n, |i| i as f64 * 0.5 - 10.0);
    let mut out = Array1::<f64>::zeros(n);
    let mut planes = Planes::new().input("x", &x).output("out", &mut out);
    assert_eq!(planes.data_ptr("x"), Some(x.as_ptr().cast()));
    p.run(0, &mut planes).unwrap();
    drop(planes);
    for i in 0..n {
        assert_eq!(out[i].to_bits(), (x[i] * x[i] * x[i]).to_bits());
    }
    // Every other element of a longer array: a strided output plane.
    let mut long = Array1::<f64>::zeros(2 * n);
    let mut planes = Planes::new()
        .input("x", x.view())
        .output("out", long.slice_mut(s![..;2]));
    let e = p.run(0, &mut planes).unwrap_err();
    assert!(matches!(e, eagle::Error::Plan(_)), "{e:#?}");
    assert_eq!(
        e.to_string(),
        "plan of `cube`: plane `out`: expected an output in standard layout (row-major, C-contiguous), which eagle writes in place; pass a standard-layout array (`Array::zeros(shape)`) and copy it into the view afterwards (`view.assign(&out)`), found an array of shape [100] with strides [2] (elements)"
    );
    drop(planes);
    assert!(long.iter().all(|&v| v == 0.0));
    // A strided input plane is copied: same bits as the contiguous run.
    let wide = Array1::from_shape_fn(2 * n, |i| (i / 2) as f64 * 0.5 - 10.0);
    let mut out2 = Array1::<f64>::zeros(n);
    p.run(
        0,
        &mut Planes::new()
            .input("x", wide.slice(s![..;2]))
            .output("out", &mut out2),
    )
    .unwrap();
    assert_eq!(out2, out);
}
