//! The math library from kernel code: every function on `f32` and `f64` tiles (and on
//! scalars, folded or interpreted on the host), run on `sim` and in the CUDA emulation,
//! equals the one definition
//! (`eagle::ir::MathFn::eval_f32` / `eval_f64`) bit for bit, over special values (NaN, ±inf,
//! ±0, subnormals, huge and tiny magnitudes) and seeded random inputs; and misuse (an
//! integer argument, a wrong exponent dtype) is an error at the source line.
use eagle::ir::{IrError, MathFn};
use eagle::prelude::*;
use eagle::Error;

#[cfg(feature = "cuda")]
mod emulation;

/// Inputs per row.
const N: usize = 96;
/// Unary functions, in the order of the kernels' output rows.
const UNARY: [MathFn; 25] = [
    MathFn::Ln,
    MathFn::Log2,
    MathFn::Log10,
    MathFn::Log1p,
    MathFn::Exp,
    MathFn::Exp2,
    MathFn::Expm1,
    MathFn::Sin,
    MathFn::Cos,
    MathFn::Tan,
    MathFn::Asin,
    MathFn::Acos,
    MathFn::Atan,
    MathFn::Sinh,
    MathFn::Cosh,
    MathFn::Tanh,
    MathFn::Sigmoid,
    MathFn::Erf,
    MathFn::Cbrt,
    MathFn::Rsqrt,
    MathFn::Recip,
    MathFn::Floor,
    MathFn::Ceil,
    MathFn::Round,
    MathFn::Trunc,
];
/// Binary functions (`atan2(t, u)`, `powf(t, u)`, `powi(t, n)`, `hypot(t, u)`).
const BINARY: [MathFn; 4] = [MathFn::Atan2, MathFn::Powf, MathFn::Powi, MathFn::Hypot];

/// Every unary function of an `f32` tile, one output row each.
#[eagle::kernel(device)]
pub fn unary_f32(ctx: Ctx, x: Tensor<f32, 1, N>, y: Out<Tensor<f32, 25, N>>) {
    let t = load(x, [0, 0], [1, N]);
    store(y, [0, 0], t.ln());
    store(y, [1, 0], t.log2());
    store(y, [2, 0], t.log10());
    store(y, [3, 0], t.ln_1p());
    store(y, [4, 0], t.exp());
    store(y, [5, 0], t.exp2());
    store(y, [6, 0], t.exp_m1());
    store(y, [7, 0], t.sin());
    store(y, [8, 0], t.cos());
    store(y, [9, 0], t.tan());
    store(y, [10, 0], t.asin());
    store(y, [11, 0], t.acos());
    store(y, [12, 0], t.atan());
    store(y, [13, 0], t.sinh());
    store(y, [14, 0], t.cosh());
    store(y, [15, 0], t.tanh());
    store(y, [16, 0], sigmoid(t));
    store(y, [17, 0], erf(t));
    store(y, [18, 0], t.cbrt());
    store(y, [19, 0], rsqrt(t));
    store(y, [20, 0], t.recip());
    store(y, [21, 0], t.floor());
    store(y, [22, 0], t.ceil());
    store(y, [23, 0], t.round());
    store(y, [24, 0], t.trunc());
}

/// The binary functions of `f32` tiles; `powi` takes the scalar `i32` exponent `n`.
#[eagle::kernel(device)]
pub fn binary_f32(
    ctx: Ctx,
    x: Tensor<f32, 1, N>,
    z: Tensor<f32, 1, N>,
    n: i32,
    y: Out<Tensor<f32, 4, N>>,
) {
    let t = load(x, [0, 0], [1, N]);
    let u = load(z, [0, 0], [1, N]);
    store(y, [0, 0], t.atan2(u));
    store(y, [1, 0], t.powf(u));
    store(y, [2, 0], t.powi(n));
    store(y, [3, 0], hypot(t, u));
}

#[eagle::host]
pub fn all_f32(
    x: Tensor<f32, 1, N>,
    z: Tensor<f32, 1, N>,
    n: i32,
    y: Out<Tensor<f32, 25, N>>,
    y2: Out<Tensor<f32, 4, N>>,
) {
    unary_f32(x, y, device = 0);
    binary_f32(x, z, n, y2, device = 0);
}

/// Every unary function of an `f64` tile, one output row each.
#[eagle::kernel(device)]
pub fn unary_f64(ctx: Ctx, x: Tensor<f64, 1, N>, y: Out<Tensor<f64, 25, N>>) {
    let t = load(x, [0, 0], [1, N]);
    store(y, [0, 0], t.ln());
    store(y, [1, 0], t.log2());
    store(y, [2, 0], t.log10());
    store(y, [3, 0], t.ln_1p());
    store(y, [4, 0], t.exp());
    store(y, [5, 0], t.exp2());
    store(y, [6, 0], t.exp_m1());
    store(y, [7, 0], t.sin());
    store(y, [8, 0], t.cos());
    store(y, [9, 0], t.tan());
    store(y, [10, 0], t.asin());
    store(y, [11, 0], t.acos());
    store(y, [12, 0], t.atan());
    store(y, [13, 0], t.sinh());
    store(y, [14, 0], t.cosh());
    store(y, [15, 0], t.tanh());
    store(y, [16, 0], sigmoid(t));
    store(y, [17, 0], erf(t));
    store(y, [18, 0], t.cbrt());
    store(y, [19, 0], rsqrt(t));
    store(y, [20, 0], t.recip());
    store(y, [21, 0], t.floor());
    store(y, [22, 0], t.ceil());
    store(y, [23, 0], t.round());
    store(y, [24, 0], t.trunc());
}

/// The binary functions of `f64` tiles; `powi` takes the scalar `i32` exponent `n`.
#[eagle::kernel(device)]
pub fn binary_f64(
    ctx: Ctx,
    x: Tensor<f64, 1, N>,
    z: Tensor<f64, 1, N>,
    n: i32,
    y: Out<Tensor<f64, 4, N>>,
) {
    let t = load(x, [0, 0], [1, N]);
    let u = load(z, [0, 0], [1, N]);
    store(y, [0, 0], t.atan2(u));
    store(y, [1, 0], t.powf(u));
    store(y, [2, 0], t.powi(n));
    store(y, [3, 0], hypot(t, u));
}

#[eagle::host]
pub fn all_f64(
    x: Tensor<f64, 1, N>,
    z: Tensor<f64, 1, N>,
    n: i32,
    y: Out<Tensor<f64, 25, N>>,
    y2: Out<Tensor<f64, 4, N>>,
) {
    unary_f64(x, y, device = 0);
    binary_f64(x, z, n, y2, device = 0);
}

/// Special values, edges and seeded random values over many magnitudes (both signs).
fn inputs(seed: u64) -> Vec<f64> {
    let mut v = vec![
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        -2.0,
        3.0,
        1.5,
        2.5,
        -2.5,
        1e-310,
        -1e-310,
        5e-324,
        1e-40,
        1e-20,
        1e300,
        -1e300,
        f64::MAX,
        std::f64::consts::PI,
        std::f64::consts::FRAC_PI_2,
        100.0,
        -100.0,
        709.8,
        -745.2,
        88.8,
        -103.9,
        1e22,
        0.999_999_999,
        1.000_000_001,
    ];
    let mut s = seed;
    while v.len() < N {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let mag = ((s >> 11) as f64 / (1u64 << 53) as f64) * 40.0 - 20.0;
        let sign = if s & 1 == 1 { -1.0 } else { 1.0 };
        v.push(sign * mag.exp2() * ((s >> 3) % 1000) as f64 / 700.0);
    }
    v
}

/// Bits equal, NaN equal to any NaN (eagle leaves a NaN's payload unspecified).
fn same(a: u64, b: u64, nan: fn(u64) -> bool) -> bool {
    a == b || (nan(a) && nan(b))
}

fn check_f64(s: &Session) {
    let xs = inputs(7);
    let zs: Vec<f64> = inputs(11).into_iter().rev().collect();
    let x = Tensor::from_vec(&[1, N], xs.clone()).unwrap();
    let z = Tensor::from_vec(&[1, N], zs.clone()).unwrap();
    let mut y = Tensor::<f64>::zeros(&[UNARY.len(), N]);
    let mut y2 = Tensor::<f64>::zeros(&[4, N]);
    all_f64.launch(s, &x, &z, -3, &mut y, &mut y2).unwrap();
    let nan = |b: u64| f64::from_bits(b).is_nan();
    for (r, f) in UNARY.iter().enumerate() {
        for (j, &a) in xs.iter().enumerate() {
            let want = f.eval_f64(&[a]);
            let got = y.data()[r * N + j];
            assert!(
                same(got.to_bits(), want.to_bits(), nan),
                "{}({a:e}) = {got:e}, the definition says {want:e}",
                f.name()
            );
        }
    }
    for (r, f) in BINARY.iter().enumerate() {
        for j in 0..N {
            let b = if *f == MathFn::Powi { -3.0 } else { zs[j] };
            let want = f.eval_f64(&[xs[j], b]);
            let got = y2.data()[r * N + j];
            assert!(
                same(got.to_bits(), want.to_bits(), nan),
                "{}({:e}, {b:e}) = {got:e}, the definition says {want:e}",
                f.name(),
                xs[j]
            );
        }
    }
}

fn check_f32(s: &Session) {
    let xs: Vec<f32> = inputs(3).into_iter().map(|v| v as f32).collect();
    let zs: Vec<f32> = inputs(5).into_iter().rev().map(|v| v as f32).collect();
    let x = Tensor::from_vec(&[1, N], xs.clone()).unwrap();
    let z = Tensor::from_vec(&[1, N], zs.clone()).unwrap();
    let mut y = Tensor::<f32>::zeros(&[UNARY.len(), N]);
    let mut y2 = Tensor::<f32>::zeros(&[4, N]);
    all_f32.launch(s, &x, &z, 5, &mut y, &mut y2).unwrap();
    let nan = |b: u64| f32::from_bits(b as u32).is_nan();
    for (r, f) in UNARY.iter().enumerate() {
        for (j, &a) in xs.iter().enumerate() {
            let want = f.eval_f32(&[a]);
            let got = y.data()[r * N + j];
            assert!(
                same(got.to_bits().into(), want.to_bits().into(), nan),
                "{}({a:e}) = {got:e}, the definition says {want:e}",
                f.name()
            );
        }
    }
    for (r, f) in BINARY.iter().enumerate() {
        for j in 0..N {
            let b = if *f == MathFn::Powi { 5.0 } else { zs[j] };
            let want = f.eval_f32(&[xs[j], b]);
            let got = y2.data()[r * N + j];
            assert!(
                same(got.to_bits().into(), want.to_bits().into(), nan),
                "{}({:e}, {b:e}) = {got:e}, the definition says {want:e}",
                f.name(),
                xs[j]
            );
        }
    }
}

#[test]
fn every_function_on_the_cpu_equals_the_definition_bit_for_bit() {
    let s = Session::sim(1).unwrap();
    check_f64(&s);
    check_f32(&s);
}

#[cfg(feature = "cuda")]
#[test]
fn every_function_in_the_cuda_emulation_equals_the_definition_bit_for_bit() {
    emulation::cxx();
    let s = Session::cuda_emulated(vec![0]).unwrap();
    check_f64(&s);
    check_f32(&s);
}

// Misuse, one mistake each (marked): an integer argument, an `f64` exponent for `powi`, `f32`
// mixed with `f64`.
#[eagle::kernel(device)]
pub fn int_ln(ctx: Ctx, x: Tensor<i32, 4>, y: Out<Tensor<f32, 4>>) {
    let t = load(x, [0], [4]);
    let l = t.ln(); // marker: int ln
}
#[eagle::host]
pub fn int_ln_host(x: Tensor<i32, 4>, y: Out<Tensor<f32, 4>>) {
    int_ln(x, y, device = 0);
}

#[eagle::kernel(device)]
pub fn powi_f64(ctx: Ctx, x: Tensor<f32, 4>, y: Out<Tensor<f32, 4>>, n: f64) {
    let t = load(x, [0], [4]);
    store(y, [0], t.powi(n)); // marker: powi f64
}
#[eagle::host]
pub fn powi_f64_host(x: Tensor<f32, 4>, y: Out<Tensor<f32, 4>>, n: f64) {
    powi_f64(x, y, n, device = 0);
}

#[eagle::kernel(device)]
pub fn mixed(ctx: Ctx, x: Tensor<f32, 4>, y: Out<Tensor<f32, 4>>, z: f64) {
    let t = load(x, [0], [4]);
    store(y, [0], t.atan2(z)); // marker: mixed
}
#[eagle::host]
pub fn mixed_host(x: Tensor<f32, 4>, y: Out<Tensor<f32, 4>>, z: f64) {
    mixed(x, y, z, device = 0);
}

/// The 1-based line of this file that holds `marker`.
fn line_of(marker: &str) -> u32 {
    let src = include_str!("math.rs");
    let hits: Vec<usize> = src
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(marker) && !l.contains("line_of(") && !l.contains("\"marker:"))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(
        hits.len(),
        1,
        "marker {marker:?} must be on exactly one line"
    );
    hits[0] as u32
}

#[test]
fn misuse_is_an_error_at_the_source_line_naming_the_fix() {
    let s = Session::sim(1).unwrap();
    let xf = Tensor::<f32>::zeros(&[4]);
    let xi = Tensor::<i32>::zeros(&[4]);
    let mut y = Tensor::<f32>::zeros(&[4]);
    let cases: Vec<(Error, &str, &[&str])> = vec![
        (
            int_ln_host.launch(&s, &xi, &mut y).unwrap_err(),
            "marker: int ln",
            &[
                "operand 0 of `ln(x)`",
                "expected `f32`, found `i32`",
                "`as f64`",
            ],
        ),
        (
            powi_f64_host.launch(&s, &xf, &mut y, 2.0).unwrap_err(),
            "marker: powi f64",
            &[
                "operand 1 of `powi(x, n: i32)`",
                "expected `i32`, found `f64`",
                "`as i32`",
            ],
        ),
        (
            mixed_host.launch(&s, &xf, &mut y, 2.0).unwrap_err(),
            "marker: mixed",
            &[
                "operand 1 of `atan2(y, x)`",
                "expected `f32`, found `f64`",
                "`as f32`",
            ],
        ),
    ];
    for (e, marker, wants) in cases {
        let Error::Ir(IrError::Build { message, .. }) = &e else {
            panic!("{marker}: expected a build error, got {e:?}");
        };
        let at = format!("(at tests/math.rs:{}:", line_of(marker));
        assert!(message.contains(&at), "{message} lacks {at}");
        for w in wants {
            assert!(message.contains(w), "{marker}: {message} lacks {w:?}");
        }
    }
}

/// The host interpreter and the constant folder use the same definition: a host-level
/// `ln` of a scalar, and a device kernel's `sin` of a constant (folded at specialization).
#[eagle::kernel(device)]
pub fn folded(ctx: Ctx, y: Out<Tensor<f64, 2>>, a: f64) {
    y[0] = (0.5f64).sin();
    y[1] = a;
}
#[eagle::host]
pub fn folded_host(y: Out<Tensor<f64, 2>>, a: f64) {
    let l = a.ln();
    folded(y, l, device = 0);
}

#[test]
fn the_folder_and_the_host_interpreter_compute_the_same_bits() {
    let mut y = Tensor::<f64>::zeros(&[2]);
    folded_host
        .launch(&Session::sim(1).unwrap(), &mut y, 3.0)
        .unwrap();
    assert_eq!(
        y.data()[0].to_bits(),
        MathFn::Sin.eval_f64(&[0.5]).to_bits()
    );
    assert_eq!(y.data()[1].to_bits(), MathFn::Ln.eval_f64(&[3.0]).to_bits());
    assert!((y.data()[0] - 0.5f64.sin()).abs() <= f64::EPSILON * 0.5);
}

/// Arithmetic on unsuffixed float literals takes the dtype of the other operand and is
/// computed in it, as in Rust: `1.0 / 3.0` next to an `f64` is the `f64` third, next to an
/// `f32` the `f32` third.
#[eagle::kernel(device)]
pub fn literal_thirds(ctx: Ctx, x: Tensor<f64, 4>, y: Out<Tensor<f64, 4>>, z: Out<Tensor<f32, 4>>) {
    let t = load(x, [0], [4]);
    store(y, [0], t * (1.0 / 3.0));
    store(z, [0], t.powf(1.0 / 3.0 - 0.1) as f32 * (2.0 / 3.0));
}
#[eagle::host]
pub fn literal_thirds_host(x: Tensor<f64, 4>, y: Out<Tensor<f64, 4>>, z: Out<Tensor<f32, 4>>) {
    literal_thirds(x, y, z, device = 0);
}

/// `ln(2)`: an integer literal where a float is expected (a Rust error too).
#[eagle::kernel(device)]
pub fn int_literal_ln(ctx: Ctx, y: Out<Tensor<f32, 1>>) {
    y[0] = ln(2); // marker: int literal
}

#[test]
fn float_literal_arithmetic_is_computed_in_the_dtype_it_takes() {
    let x = Tensor::from_vec(&[4], vec![1.0, 3.0, 0.1, 7.0]).unwrap();
    let mut y = Tensor::<f64>::zeros(&[4]);
    let mut z = Tensor::<f32>::zeros(&[4]);
    literal_thirds_host
        .launch(&Session::sim(1).unwrap(), &x, &mut y, &mut z)
        .unwrap();
    for (i, &v) in x.data().iter().enumerate() {
        assert_eq!(y.data()[i].to_bits(), (v * (1.0f64 / 3.0)).to_bits());
        let p = MathFn::Powf.eval_f64(&[v, 1.0f64 / 3.0 - 0.1]) as f32;
        assert_eq!(z.data()[i].to_bits(), (p * (2.0f32 / 3.0)).to_bits());
    }
    let e = int_literal_ln.ir().unwrap_err().to_string();
    let at = format!("(at tests/math.rs:{}:", line_of("marker: int literal"));
    assert!(e.contains(&at), "{e}");
    assert!(
        e.contains("expected `f32`, found the integer literal `2`; write `2.0`"),
        "{e}"
    );
}

/// `sin`, `cos` and `tan` of a tile with no argument beyond the Cody-Waite range skip the
/// Payne-Hanek reduction (one branch for the tile, or for each group of 16 lanes in the CPU's
/// kernels); with one huge argument they take it. Both equal the definition bit for bit.
#[eagle::kernel(device)]
pub fn trig_tiles(ctx: Ctx, x: Tensor<f64, 2, 64>, y: Out<Tensor<f64, 6, 64>>) {
    let small = load(x, [0, 0], [1, 64]);
    let huge = load(x, [1, 0], [1, 64]);
    store(y, [0, 0], small.sin());
    store(y, [1, 0], small.cos());
    store(y, [2, 0], small.tan());
    store(y, [3, 0], huge.sin());
    store(y, [4, 0], huge.cos());
    store(y, [5, 0], huge.tan());
}
#[eagle::host]
pub fn trig_tiles_host(x: Tensor<f64, 2, 64>, y: Out<Tensor<f64, 6, 64>>) {
    trig_tiles(x, y, device = 0);
}

fn check_trig_tiles(s: &Session) {
    let mut xs: Vec<f64> = (0..128).map(|i| (i as f64 - 64.0) * 0.37 + 0.001).collect();
    xs[100] = 1e300;
    let x = Tensor::from_vec(&[2, 64], xs.clone()).unwrap();
    let mut y = Tensor::<f64>::zeros(&[6, 64]);
    trig_tiles_host.launch(s, &x, &mut y).unwrap();
    let fs = [MathFn::Sin, MathFn::Cos, MathFn::Tan];
    for row in 0..6 {
        for j in 0..64 {
            let v = xs[(row / 3) * 64 + j];
            let want = fs[row % 3].eval_f64(&[v]);
            let got = y.data()[row * 64 + j];
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{:?}({v:e}): {got:e} vs {want:e}",
                fs[row % 3]
            );
        }
    }
}

#[test]
fn trig_skips_payne_hanek_per_tile_with_the_same_bits() {
    check_trig_tiles(&Session::sim(1).unwrap());
    #[cfg(feature = "cuda")]
    {
        emulation::cxx();
        check_trig_tiles(&Session::cuda_emulated(vec![0]).unwrap());
    }
}

/// The `f32` definitions on scalars: a device kernel's `exp`, `ln`, `sin`, `cos` (one value:
/// the paired expansion, its `f64` path taken by a scalar branch) and `tanh` of a scalar
/// argument, and `powf` of it with `-1.5` and with `a` itself.
#[eagle::kernel(device)]
pub fn scalar_f32(ctx: Ctx, y: Out<Tensor<f32, 7>>, a: f32) {
    y[0] = a.exp();
    y[1] = a.ln();
    y[2] = a.sin();
    y[3] = a.cos();
    y[4] = a.tanh();
    y[5] = a.powf(-1.5);
    y[6] = a.powf(a);
}
#[eagle::host]
pub fn scalar_f32_host(y: Out<Tensor<f32, 7>>, a: f32) {
    scalar_f32(y, a, device = 0);
}

/// Special and ordinary scalars through the scalar path equal `MathFn::eval_f32` bit for bit
/// (NaN as NaN), on `sim` and in place on `cpu`.
#[test]
fn f32_definitions_on_scalars_equal_the_definition_bit_for_bit() {
    let fs = [
        MathFn::Exp,
        MathFn::Ln,
        MathFn::Sin,
        MathFn::Cos,
        MathFn::Tanh,
    ];
    let args = [
        0.0f32,
        -0.0,
        1.0,
        -2.5,
        0.55,
        3.0e-39,
        1.0e-7,
        88.7,
        -87.5,
        -104.0,
        255.9,
        256.0,
        -1.0e30,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    let sessions = [
        Session::sim(1).unwrap(),
        Session::new(eagle::runtime::Platform::Cpu, vec![0]).unwrap(),
    ];
    for s in &sessions {
        for &a in &args {
            let mut y = Tensor::<f32>::zeros(&[7]);
            scalar_f32_host.launch(s, &mut y, a).unwrap();
            let pows = [MathFn::Powf, MathFn::Powf];
            for (k, (f, got)) in fs.iter().chain(&pows).zip(y.data()).enumerate() {
                let want = match k {
                    5 => f.eval_f32(&[a, -1.5]),
                    6 => f.eval_f32(&[a, a]),
                    _ => f.eval_f32(&[a]),
                };
                let same = got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan());
                assert!(
                    same,
                    "{}({a:e}): {got:e}, the definition {want:e}",
                    f.name()
                );
            }
        }
    }
}
