//! Issue 38, item 2: compute kernels that return values (scalars, tiles, tuples), the last
//! expression as in Rust, used by compute kernels and per-device programs; each call built in
//! place at the call site. Run on `sim` against plain-Rust goldens, and every misuse refused
//! before anything runs with the source line.
use eagle::ir::{DType, Dim, EagleFn, IrError, Shape, Type};
use eagle::prelude::*;

const M: usize = 2;
const N: usize = 8;

/// A tile: `x` loaded and doubled.
#[eagle::kernel]
pub fn twice(x: Tensor<f32, M, N>) -> Tile<f32, M, N> {
    let t = load(x, [0, 0], [M, N]);
    t * 2.0
}

/// A tuple: each row's maximum and where it is (first on ties).
#[eagle::kernel]
pub fn row_stats(t: Tile<f32, M, N>) -> (Tile<f32, M, 1>, Tile<i64, M, 1>) {
    (row_max(t), row_argmax(t))
}

/// A scalar: `i` clamped to `[0, n)`; a literal in the tail takes the declared dtype.
#[eagle::kernel]
pub fn clamp_index(i: usize, n: usize) -> usize {
    let last = n - 1;
    min(i, last)
}

/// A compute kernel using all three: `y = 2x + 1`, `m`/`am` the row maxima of `2x` and their
/// columns, `k[0]` = `clamp_index(9, N)`.
#[eagle::kernel]
pub fn use_returns(
    x: Tensor<f32, M, N>,
    y: Out<Tensor<f32, M, N>>,
    m: Out<Tensor<f32, M, 1>>,
    am: Out<Tensor<i64, M, 1>>,
    k: Out<Tensor<i64, 1>>,
) {
    let d = twice(x);
    store(y, [0, 0], d + 1.0);
    let (mx, mut at) = row_stats(d);
    store(m, [0, 0], mx);
    at = at + 0;
    store(am, [0, 0], at);
    k[0] = clamp_index(9, N) as i64;
}

/// A per-device program calling a returning kernel in an expression.
#[eagle::kernel(device)]
pub fn prog(
    ctx: Ctx,
    x: Tensor<f32, M, N>,
    y: Out<Tensor<f32, M, N>>,
    m: Out<Tensor<f32, M, 1>>,
    am: Out<Tensor<i64, M, 1>>,
    k: Out<Tensor<i64, 1>>,
) {
    use_returns(x, y, m, am, k);
    let r = rank(ctx);
    let row = extract(twice(x) - 1.0, [0, 0], [1, N]);
    store(y, [r, 0], row);
}

#[eagle::host]
pub fn prog_host(
    x: Tensor<f32, M, N>,
    y: Out<Tensor<f32, M, N>>,
    m: Out<Tensor<f32, M, 1>>,
    am: Out<Tensor<i64, M, 1>>,
    k: Out<Tensor<i64, 1>>,
) {
    prog(x, y, m, am, k, device = 0);
}

#[test]
fn scalars_tiles_and_tuples_return_from_compute_kernels() {
    let s = Session::sim(1).unwrap();
    let x = eagle_runner::random_tensor(&[M, N], 11);
    let mut y = Tensor::<f32>::zeros(&[M, N]);
    let mut m = Tensor::<f32>::zeros(&[M, 1]);
    let mut am = Tensor::<i64>::zeros(&[M, 1]);
    let mut k = Tensor::<i64>::zeros(&[1]);
    prog_host
        .launch(&s, &x, &mut y, &mut m, &mut am, &mut k)
        .unwrap();
    let xd = x.data();
    // Row 0 is rewritten by `prog` (rank 0): 2x - 1; row 1 keeps `use_returns`'s 2x + 1.
    let want_y: Vec<f32> = (0..M * N)
        .map(|e| {
            if e < N {
                xd[e] * 2.0 - 1.0
            } else {
                xd[e] * 2.0 + 1.0
            }
        })
        .collect();
    eagle_runner::check_bits("y", y.data(), &want_y).unwrap();
    for r in 0..M {
        let row: Vec<f32> = xd[r * N..(r + 1) * N].iter().map(|v| v * 2.0).collect();
        let mut best = 0;
        for c in 1..N {
            if row[c] > row[best] {
                best = c;
            }
        }
        assert_eq!(m.data()[r].to_bits(), row[best].to_bits(), "row {r}");
        assert_eq!(am.data()[r], best as i64, "row {r}");
    }
    assert_eq!(k.data(), &[N as i64 - 1]);
}

#[test]
fn a_returning_call_is_built_in_place_with_no_call_op() {
    let ir = use_returns::module().unwrap();
    let text = eagle::ir::print_module(&ir);
    assert_eq!(ir.functions.len(), 1, "{text}");
    assert!(!text.contains("call @"), "{text}");
    // The callee's ops, in place: its load and the doubling, then the caller's `+ 1`.
    assert!(text.contains("row_argmax"), "{text}");
    assert_eq!(
        <row_stats as eagle::ir::Returns>::returns(),
        vec![
            Type::Tile(Shape(vec![Dim::Const(2), Dim::Const(1)]), DType::F32),
            Type::Tile(Shape(vec![Dim::Const(2), Dim::Const(1)]), DType::I64),
        ]
    );
}

/// The body ends with a value of another type than the declared one.
#[eagle::kernel]
pub fn wrong_return(x: Tensor<f32, M, N>) -> Tile<f64, M, N> {
    load(x, [0, 0], [M, N])
}

#[eagle::kernel]
pub fn calls_wrong_return(x: Tensor<f32, M, N>, y: Out<Tensor<f64, M, N>>) {
    store(y, [0, 0], wrong_return(x));
}

/// An argument of another dtype than the parameter's.
#[eagle::kernel]
pub fn bad_argument(x: Tensor<f64, M, N>, y: Out<Tensor<f32, M, N>>) {
    store(y, [0, 0], twice(x));
}

/// A tuple used as one value.
#[eagle::kernel]
pub fn tuple_as_value(x: Tensor<f32, M, N>, y: Out<Tensor<f32, M, 1>>) {
    let t = load(x, [0, 0], [M, N]);
    store(y, [0, 0], row_stats(t));
}

/// A tuple bound by a pattern of another length.
#[eagle::kernel]
pub fn tuple_wrong_len(x: Tensor<f32, M, N>, y: Out<Tensor<f32, M, 1>>) {
    let t = load(x, [0, 0], [M, N]);
    let (a, b, c) = row_stats(t);
    store(y, [0, 0], a);
}

/// Two kernels returning values that call each other.
#[eagle::kernel]
pub fn ping(i: usize) -> usize {
    pong(i) + 1
}

#[eagle::kernel]
pub fn pong(i: usize) -> usize {
    ping(i) * 2
}

#[eagle::kernel]
pub fn calls_ping(k: Out<Tensor<i64, 1>>) {
    k[0] = ping(1) as i64;
}

fn build_error(e: IrError) -> String {
    match e {
        IrError::Build { message, .. } => message,
        other => panic!("expected a build error, got {other:?}"),
    }
}

#[test]
fn a_body_ending_with_the_wrong_type_names_both_types_and_the_line() {
    let msg = build_error(calls_wrong_return::module().unwrap_err());
    assert!(
        msg.starts_with("`wrong_return` is declared to return `tile<[2, 8], f64>`, but its body ends with `tile<[2, 8], f32>` (at tests/returns.rs:"),
        "{msg}"
    );
    assert!(
        msg.ends_with("change the return type or convert the value"),
        "{msg}"
    );
    // Built on its own, the kernel is refused the same way.
    let msg = build_error(wrong_return::module().unwrap_err());
    assert!(
        msg.contains("is declared to return `tile<[2, 8], f64>`"),
        "{msg}"
    );
}

#[test]
fn an_argument_of_another_type_names_the_parameter() {
    let msg = build_error(bad_argument::module().unwrap_err());
    assert!(
        msg.starts_with("`twice`'s parameter `x` is `tensor<[2, 8], f32>`, but the argument is `tensor<[2, 8], f64>` (at tests/returns.rs:"),
        "{msg}"
    );
}

#[test]
fn a_tuple_binds_one_name_per_value() {
    let msg = build_error(tuple_as_value::module().unwrap_err());
    assert!(
        msg.starts_with("`row_stats` returns 2 values (at tests/returns.rs:"),
        "{msg}"
    );
    assert!(
        msg.ends_with("bind them with `let (a, b, ...) = row_stats(...);`"),
        "{msg}"
    );
    let msg = build_error(tuple_wrong_len::module().unwrap_err());
    assert!(
        msg.starts_with("`row_stats` returns 2 values but the pattern binds 3"),
        "{msg}"
    );
}

#[test]
fn kernels_that_call_each_other_for_values_are_a_recursion_error() {
    match calls_ping::module().unwrap_err() {
        IrError::Recursion { chain } => {
            assert_eq!(chain, "ping -> pong -> ping")
        }
        other => panic!("expected Recursion, got {other:?}"),
    }
}

/// `_` in a tuple pattern drops that value.
#[eagle::kernel]
pub fn maxima_only(x: Tensor<f32, M, N>, m: Out<Tensor<f32, M, 1>>) {
    let (mx, _) = row_stats(load(x, [0, 0], [M, N]));
    store(m, [0, 0], mx);
}

#[test]
fn an_underscore_drops_a_tuple_element() {
    let text = eagle::ir::print_module(&maxima_only::module().unwrap());
    // Both values are built (the callee's body is), the maxima stored.
    assert!(
        text.contains("row_max") && text.contains("row_argmax"),
        "{text}"
    );
    assert_eq!(text.matches("store ").count(), 1, "{text}");
}
