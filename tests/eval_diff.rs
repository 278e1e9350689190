//! The differential test of the reference evaluator (`eagle_ir::eval`): every elementwise op
//! on every dtype, over a table of edge values (NaN of both signs, +-0, +-inf, subnormals,
//! integer extremes, `i64` values that round differently through `f64`), through
//!
//! - the evaluator itself (the specification),
//! - the constant folder (`specialize` on constant operands),
//! - the CPU backend, on tiles (its fused 4x-unrolled SIMD loops and their scalar tails) and on
//!   scalars (element by element),
//! - the CUDA C emission, run in the CUDA emulation (tiles striped over threads, and scalars).
//!
//! Results must have identical bits. The one allowance is the one Rust makes (RFC 3514): a NaN
//! *produced by arithmetic* may carry any sign and payload, so two NaNs from `add`, `sub`,
//! `mul`, `div`, `sqrt`, `fma`, `neg` or `abs` of a NaN compare equal; `min`/`max` must give
//! the canonical NaN exactly, and casts, comparisons and selects exact bits. `exp` is compared
//! between the evaluator and the CPU backend only (CUDA's `expf`/`exp` are within 2 ulp of it;
//! documented in the evaluator's module docs).
use eagle::codegen::{compile, Bindings, Target};
use eagle::ir::eval::{self, Scalar};
use eagle::ir::{parse_module, BinOp, CmpOp, DType, MathFn, OpKind, UnOp, Value};
use eagle::runtime::{run_with, Arg, RunOptions};
use std::fmt::Write;

#[cfg(feature = "cuda")]
mod emulation;

/// The edge values of dtype `d`, as bits.
fn edges(d: DType) -> Vec<Scalar> {
    let f32s: Vec<f32> = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        1.5,
        2.5,
        -2.5,
        0.1,
        1.0 / 3.0,
        f32::MIN_POSITIVE,
        f32::from_bits(1),
        -f32::from_bits(1),
        f32::from_bits(0x007f_ffff),
        f32::MAX,
        f32::MIN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::from_bits(0x7fc0_0000),
        f32::from_bits(0xffc0_0000),
        f32::from_bits(0x7fa0_0001),
        3.0e9,
        -3.0e9,
        2147483648.0,
        -2147483648.0,
        4294967296.0,
        9.223372e18,
        1.8446744e19,
        1e30,
        16777216.0,
    ];
    let i64s: Vec<i64> = vec![
        0,
        1,
        -1,
        2,
        -2,
        7,
        -7,
        i64::MIN,
        i64::MAX,
        i64::MIN + 1,
        1_152_921_573_326_323_713,
        (1 << 53) + 1,
        -((1 << 53) + 1),
        1 << 31,
        (1 << 31) - 1,
        1 << 32,
        16_777_217,
        0x7fff_ffff_ffff_fe00,
    ];
    match d {
        DType::Bool => vec![Scalar::Bool(false), Scalar::Bool(true)],
        DType::I8 => [
            0,
            1,
            -1,
            2,
            -2,
            7,
            -7,
            i8::MIN,
            i8::MAX,
            i8::MIN + 1,
            100,
            -100,
        ]
        .map(Scalar::I8)
        .to_vec(),
        DType::U8 => [0, 1, 2, 7, u8::MAX, u8::MAX - 1, 128, 127, 200]
            .map(Scalar::U8)
            .to_vec(),
        DType::I16 => [
            0,
            1,
            -1,
            2,
            -2,
            7,
            -7,
            i16::MIN,
            i16::MAX,
            i16::MIN + 1,
            300,
            -12345,
        ]
        .map(Scalar::I16)
        .to_vec(),
        DType::U16 => [
            0,
            1,
            2,
            7,
            u16::MAX,
            u16::MAX - 1,
            1 << 15,
            (1 << 15) - 1,
            50000,
        ]
        .map(Scalar::U16)
        .to_vec(),
        // The f32 edges rounded to the dtype (NaN, infinities, the largest finite values,
        // subnormals, ties), and patterns that are not: a signalling NaN, the smallest
        // subnormal, the largest finite.
        DType::F16 | DType::BF16 => {
            let mut v: Vec<Scalar> = f32s
                .iter()
                .map(|&x| eval::narrow_float(x as f64, d))
                .collect();
            let extra: [u16; 5] = if d == DType::F16 {
                [0x7d01, 0x0001, 0x7bff, 0xfbff, 0x03ff]
            } else {
                [0x7f81, 0x0001, 0x7f7f, 0xff7f, 0x007f]
            };
            v.extend(extra.map(|b| Scalar::from_bits(b as u64, d)));
            v
        }
        // The f32 edges rounded to the dtype, and patterns: a NaN (signalling for `f8e5m2`),
        // the smallest subnormal (value), the largest finite and its negation, the largest
        // subnormal.
        DType::F8E4M3 | DType::F8E5M2 | DType::E8M0 => {
            let mut v: Vec<Scalar> = f32s
                .iter()
                .map(|&x| eval::narrow_float(x as f64, d))
                .collect();
            let extra: [u8; 5] = match d {
                DType::F8E4M3 => [0x7f, 0x01, 0x7e, 0xfe, 0x07],
                DType::F8E5M2 => [0x7d, 0x01, 0x7b, 0xfb, 0x03],
                _ => [0xff, 0, 254, 127, 1],
            };
            v.extend(extra.map(|b| Scalar::from_bits(b as u64, d)));
            v
        }
        DType::F32 => f32s.into_iter().map(Scalar::F32).collect(),
        DType::F64 => {
            let mut v: Vec<Scalar> = f32s.into_iter().map(|x| Scalar::F64(x as f64)).collect();
            v.extend(
                [
                    0.1,
                    f64::MIN_POSITIVE,
                    f64::from_bits(1),
                    f64::MAX,
                    f64::from_bits(0xfff8_0000_0000_0000),
                    9007199254740993.0,
                    1_152_921_573_326_323_713_i64 as f64,
                    1e300,
                    -1e-310,
                ]
                .map(Scalar::F64),
            );
            v
        }
        DType::I64 => i64s.into_iter().map(Scalar::I64).collect(),
        DType::Index => i64s.into_iter().map(Scalar::Index).collect(),
        DType::I32 => [
            0,
            1,
            -1,
            2,
            -2,
            7,
            -7,
            i32::MIN,
            i32::MAX,
            i32::MIN + 1,
            16_777_217,
            123_456_789,
            -123_456_789,
        ]
        .map(Scalar::I32)
        .to_vec(),
        DType::U32 => [
            0,
            1,
            2,
            7,
            u32::MAX,
            u32::MAX - 1,
            1 << 31,
            (1 << 31) - 1,
            16_777_217,
        ]
        .map(Scalar::U32)
        .to_vec(),
        DType::U64 => [
            0,
            1,
            2,
            7,
            u64::MAX,
            u64::MAX - 1,
            1 << 63,
            (1 << 63) - 1,
            (1 << 53) + 1,
            1_152_921_573_326_323_713,
        ]
        .map(Scalar::U64)
        .to_vec(),
    }
}

/// One op of the test: its text (with `A`, `B`, `C` for the operands), its result dtype, and
/// whether the CUDA emulation takes part.
#[derive(Clone)]
struct Case {
    text: String,
    kind: OpKind,
    arity: usize,
    to: DType,
    cuda: bool,
}

/// Every elementwise op the verifier accepts on dtype `d` (checked against the verifier: an
/// op it accepts must be defined by the evaluator, one it refuses must not be tested).
fn cases(d: DType) -> Vec<Case> {
    let (a, b, c) = (Value(0), Value(1), Value(2));
    let mut v = vec![];
    for op in BinOp::ALL {
        v.push(Case {
            text: format!("{} A, B", op.name()),
            kind: OpKind::Binary(op, a, b),
            arity: 2,
            to: d,
            cuda: true,
        });
    }
    for op in UnOp::ALL {
        v.push(Case {
            text: format!("{} A", op.name()),
            kind: OpKind::Unary(op, a),
            arity: 1,
            to: d,
            cuda: true,
        });
    }
    // The math library (expanded into the ops above at specialization); `powi`'s exponent
    // is `i32`, so it is covered by `tests/math.rs` instead.
    for f in MathFn::ALL {
        let (text, args) = match f.arity() {
            1 => (format!("{} A", f.name()), vec![a]),
            _ if f == MathFn::Powi => continue,
            _ => (format!("{} A, B", f.name()), vec![a, b]),
        };
        v.push(Case {
            text,
            kind: OpKind::Math(f, args.clone()),
            arity: args.len(),
            to: d,
            cuda: true,
        });
    }
    v.push(Case {
        text: "fma A, B, C".into(),
        kind: OpKind::Fma(a, b, c),
        arity: 3,
        to: d,
        cuda: true,
    });
    v.push(Case {
        text: "select S, A, B".into(),
        kind: OpKind::Select(c, a, b),
        arity: 2,
        to: d,
        cuda: true,
    });
    for op in CmpOp::ALL {
        v.push(Case {
            text: format!("cmp {} A, B", op.name()),
            kind: OpKind::Cmp(op, a, b),
            arity: 2,
            to: DType::Bool,
            cuda: true,
        });
    }
    for to in DType::ALL {
        v.push(Case {
            text: "cast A".into(),
            kind: OpKind::Cast(a),
            arity: 1,
            to,
            cuda: true,
        });
        v.push(Case {
            text: "bitcast A".into(),
            kind: OpKind::Bitcast(a),
            arity: 1,
            to,
            cuda: true,
        });
    }
    v.into_iter().filter(|k| verifies(k, d)).collect()
}

fn ty(t: DType) -> &'static str {
    t.name()
}

/// Whether the verifier accepts case `k` on scalars of dtype `d`.
fn verifies(k: &Case, d: DType) -> bool {
    let text = format!(
        "compute @f(%0 a: {d}, %1 b: {d}, %2 c: {d}, %3 s: bool) {{\n  %4 = {} : {}\n}}\n",
        k.text
            .replace('A', "%0")
            .replace('B', "%1")
            .replace('C', "%2")
            .replace('S', "%3"),
        ty(k.to)
    );
    let m = parse_module(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    eagle::ir::verify_module(&m).is_ok()
}

/// The operand tuples of a case of arity `n` over the edge values of `d`: every pair for
/// binary ops, a 12-value cube for `fma`.
fn inputs(d: DType, n: usize) -> Vec<[Scalar; 3]> {
    let e = edges(d);
    match n {
        1 => e.iter().map(|&x| [x, x, x]).collect(),
        2 => e
            .iter()
            .flat_map(|&x| e.iter().map(move |&y| [x, y, y]))
            .collect(),
        _ => {
            let s: Vec<Scalar> = e.iter().copied().step_by(e.len().div_ceil(12)).collect();
            let mut v = vec![];
            for &x in &s {
                for &y in &s {
                    for &z in &s {
                        v.push([x, y, z]);
                    }
                }
            }
            v
        }
    }
}

/// What the evaluator says for case `k` on `x` (`None`: an integer division by zero, left out
/// of the compiled runs because it faults).
fn want(k: &Case, x: &[Scalar; 3], sel: bool) -> Option<Scalar> {
    let args: Vec<Scalar> = match &k.kind {
        OpKind::Select(..) => vec![Scalar::Bool(sel), x[0], x[1]],
        _ => x[..k.arity].to_vec(),
    };
    match eval::elementwise(&k.kind, &args, k.to) {
        Ok(v) => Some(v),
        Err(eval::EvalError::DivisionByZero) => None,
        Err(e) => panic!(
            "the verifier accepts `{}` on {:?} but the evaluator says: {e}",
            k.text, x
        ),
    }
}

/// Whether `got` is acceptable for `want` (see the module docs on NaNs).
fn same(k: &Case, want: Scalar, got: Scalar) -> bool {
    let arith = matches!(
        k.kind,
        OpKind::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div, ..)
            | OpKind::Unary(UnOp::Sqrt | UnOp::Neg | UnOp::Abs, _)
            | OpKind::Fma(..)
            | OpKind::Math(..)
    );
    // A signalling `f16`/`bf16` NaN becomes quiet when loaded (payload kept; docs/language.md).
    let quieted = match (want, got) {
        (Scalar::F16(w), Scalar::F16(g)) => w.is_nan() && w.to_bits() | 0x0200 == g.to_bits(),
        (Scalar::BF16(w), Scalar::BF16(g)) => w.is_nan() && w.to_bits() | 0x0040 == g.to_bits(),
        (Scalar::F8(DType::F8E5M2, w), Scalar::F8(_, g)) => {
            w & 0x7c == 0x7c && w & 3 != 0 && w | 2 == g
        }
        // `x.to_bits()` of such a NaN: the quiet pattern.
        (Scalar::U16(_) | Scalar::I16(_), _) if matches!(k.kind, OpKind::Bitcast(_)) => {
            let (w, g) = (want.bits() as u16, got.bits() as u16);
            (eagle::f16::from_bits(w).is_nan() && w | 0x0200 == g)
                || (eagle::bf16::from_bits(w).is_nan() && w | 0x0040 == g)
        }
        // An `f8e5m2` signalling NaN's `to_bits()`.
        (Scalar::U8(_) | Scalar::I8(_), _) if matches!(k.kind, OpKind::Bitcast(_)) => {
            let (w, g) = (want.bits() as u8, got.bits() as u8);
            w & 0x7c == 0x7c && w & 3 != 0 && w | 2 == g
        }
        _ => false,
    };
    want == got || quieted || (arith && want.is_nan() && got.is_nan())
}

/// One program per input dtype: a device function that applies every case to tiles (one row
/// of the output per case) and, in a loop, to scalars (another row), and a host that
/// dispatches it on rank 0.
struct Program {
    text: String,
    n: usize,
    /// Per case: (case, inputs, output tensor index, row of the tile result).
    rows: Vec<(Case, Vec<[Scalar; 3]>)>,
}

fn program(d: DType, cases: &[Case], n: usize) -> Program {
    let outs: Vec<DType> = DType::ALL.to_vec();
    let mut t = String::new();
    // Parameters: a, b, c, s (bool selector), then one output per result dtype of [rows, n].
    let per_out = |o: DType| cases.iter().filter(|k| k.to == o).count() * 2;
    let mut params = format!(
        "%0 ctx: ctx, %1 a: tensor<[{cases_n}, {n}], {d}>, %2 b: tensor<[{cases_n}, {n}], {d}>, %3 c: tensor<[{cases_n}, {n}], {d}>, %4 s: tensor<[{cases_n}, {n}], bool>",
        cases_n = cases.len()
    );
    for (i, o) in outs.iter().enumerate() {
        let _ = write!(
            params,
            ", out %{} y{i}: tensor<[{}, {n}], {o}>",
            5 + i,
            per_out(*o).max(1)
        );
    }
    let _ = writeln!(t, "device @k({params}) {{");
    let mut v = 5 + outs.len();
    let mut next = || {
        v += 1;
        v - 1
    };
    let zero = next();
    let nn = next();
    let _ = writeln!(t, "  %{zero} = const 0 : index");
    let _ = writeln!(t, "  %{nn} = const {n} : index");
    let mut row_of: Vec<usize> = vec![0; outs.len()];
    for (ci, k) in cases.iter().enumerate() {
        let oi = outs.iter().position(|o| *o == k.to).unwrap();
        let row = row_of[oi];
        row_of[oi] += 2;
        let r = next();
        let _ = writeln!(t, "  %{r} = const {ci} : index");
        let tile = format!("tile<[1, {n}], {d}>");
        let (la, lb, lc, ls) = (next(), next(), next(), next());
        let _ = writeln!(t, "  %{la} = load %1[%{r}, %{zero}] : {tile}");
        let _ = writeln!(t, "  %{lb} = load %2[%{r}, %{zero}] : {tile}");
        let _ = writeln!(t, "  %{lc} = load %3[%{r}, %{zero}] : {tile}");
        let _ = writeln!(t, "  %{ls} = load %4[%{r}, %{zero}] : tile<[1, {n}], bool>");
        let body = |a: usize, b: usize, c: usize, s: usize| {
            k.text
                .replace('A', &format!("%{a}"))
                .replace('B', &format!("%{b}"))
                .replace('C', &format!("%{c}"))
                .replace('S', &format!("%{s}"))
        };
        let res = next();
        let _ = writeln!(
            t,
            "  %{res} = {} : tile<[1, {n}], {}>",
            body(la, lb, lc, ls),
            k.to
        );
        let (row_t, row_s) = (next(), next());
        let _ = writeln!(t, "  %{row_t} = const {row} : index");
        let _ = writeln!(t, "  %{row_s} = const {} : index", row + 1);
        let _ = writeln!(t, "  store %{res}, %{}[%{row_t}, %{zero}]", 5 + oi);
        let i = next();
        let _ = writeln!(t, "  for %{i} in %{zero}..%{nn} {{");
        let (ea, eb, ec, es) = (next(), next(), next(), next());
        let _ = writeln!(t, "    %{ea} = elem %1[%{r}, %{i}] : {d}");
        let _ = writeln!(t, "    %{eb} = elem %2[%{r}, %{i}] : {d}");
        let _ = writeln!(t, "    %{ec} = elem %3[%{r}, %{i}] : {d}");
        let _ = writeln!(t, "    %{es} = elem %4[%{r}, %{i}] : bool");
        let sr = next();
        let _ = writeln!(t, "    %{sr} = {} : {}", body(ea, eb, ec, es), k.to);
        let _ = writeln!(t, "    set_elem %{sr}, %{}[%{row_s}, %{i}]", 5 + oi);
        let _ = writeln!(t, "  }}");
    }
    let _ = writeln!(t, "}}\n");
    let mut hp = format!(
        "%0 a: tensor<[{c}, {n}], {d}>, %1 b: tensor<[{c}, {n}], {d}>, %2 c: tensor<[{c}, {n}], {d}>, %3 s: tensor<[{c}, {n}], bool>",
        c = cases.len()
    );
    for (i, o) in outs.iter().enumerate() {
        let _ = write!(
            hp,
            ", out %{} y{i}: tensor<[{}, {n}], {o}>",
            4 + i,
            per_out(*o).max(1)
        );
    }
    let z = 4 + outs.len();
    let args: Vec<String> = (0..4 + outs.len()).map(|i| format!("%{i}")).collect();
    let _ = writeln!(
        t,
        "host @h({hp}) {{\n  %{z} = const 0 : index\n  dispatch @k({}) device %{z}\n}}",
        args.join(", ")
    );
    let rows = cases
        .iter()
        .map(|k| {
            let mut x = inputs(d, k.arity);
            // Integer division by zero faults (tested elsewhere): left out of the runs.
            x.retain(|x| want(k, x, false).is_some());
            // Spread over the whole table when it is longer than a tile row.
            if x.len() > n {
                let step = x.len().div_ceil(n);
                x = x.into_iter().step_by(step).collect();
            }
            x.truncate(n);
            (k.clone(), x)
        })
        .collect();
    Program { text: t, n, rows }
}

/// Runs the program and returns, per case, the tile results and the scalar results.
type Results = Vec<(Vec<Scalar>, Vec<Scalar>)>;

fn run(p: &Program, d: DType, target: Target, opts: &RunOptions) -> Results {
    let m = parse_module(&p.text).unwrap_or_else(|e| panic!("{e}\n{}", p.text));
    eagle::ir::verify_module(&m).unwrap_or_else(|e| panic!("{e}"));
    let (art, _) =
        compile(&m, "h", &Bindings::world(1), target).unwrap_or_else(|e| panic!("{d}: {e}"));
    let c = p.rows.len();
    let n = p.n;
    let pack = |f: &dyn Fn(&[Scalar; 3], usize) -> Scalar, dt: DType| -> Vec<u8> {
        let mut bytes = vec![0u8; c * n * dt.size()];
        for (ci, (_, xs)) in p.rows.iter().enumerate() {
            for j in 0..n {
                // Lanes past the case's inputs repeat them (a zero could divide).
                let v = f(&xs[j % xs.len()], j);
                let b = v.bits().to_le_bytes();
                let at = (ci * n + j) * dt.size();
                bytes[at..at + dt.size()].copy_from_slice(&b[..dt.size()]);
            }
        }
        bytes
    };
    let a = pack(&|x, _| x[0], d);
    let b = pack(&|x, _| x[1], d);
    let cc = pack(&|x, _| x[2], d);
    let s = pack(&|_, j| Scalar::Bool(j % 3 == 1), DType::Bool);
    let mut outs: Vec<(DType, usize, Vec<u8>)> = DType::ALL
        .iter()
        .map(|&o| {
            let rows = (p.rows.iter().filter(|(k, _)| k.to == o).count() * 2).max(1);
            (o, rows, vec![0u8; rows * n * o.size()])
        })
        .collect();
    let mut args = vec![
        Arg::In(vec![c, n], d, (&a[..]).into()),
        Arg::In(vec![c, n], d, (&b[..]).into()),
        Arg::In(vec![c, n], d, (&cc[..]).into()),
        Arg::In(vec![c, n], DType::Bool, (&s[..]).into()),
    ];
    for (o, rows, bytes) in outs.iter_mut() {
        args.push(Arg::Out(vec![*rows, n], *o, bytes));
    }
    run_with(&art, &mut args, 1, opts).unwrap_or_else(|e| panic!("{target:?}: {e}"));
    drop(args);
    let mut next_row = vec![0usize; outs.len()];
    p.rows
        .iter()
        .map(|(k, xs)| {
            let oi = DType::ALL.iter().position(|o| *o == k.to).unwrap();
            let row = next_row[oi];
            next_row[oi] += 2;
            let (o, _, bytes) = &outs[oi];
            let read = |r: usize| {
                (0..xs.len())
                    .map(|j| {
                        let at = (r * n + j) * o.size();
                        let mut b = [0u8; 8];
                        b[..o.size()].copy_from_slice(&bytes[at..at + o.size()]);
                        Scalar::from_bits(u64::from_le_bytes(b), *o)
                    })
                    .collect()
            };
            (read(row), read(row + 1))
        })
        .collect()
}

/// Compares `got` with the evaluator and lists the disagreements; counts the comparisons in
/// `compared`.
fn check(p: &Program, got: &Results, by: &str, cuda: bool, compared: &mut usize) -> Vec<String> {
    let mut bad = vec![];
    for ((k, xs), (tile, scalar)) in p.rows.iter().zip(got) {
        if cuda && !k.cuda {
            continue;
        }
        for (j, x) in xs.iter().enumerate() {
            let w = want(k, x, j % 3 == 1).unwrap();
            for (path, g) in [("tile", tile[j]), ("scalar", scalar[j])] {
                *compared += 1;
                if !same(k, w, g) {
                    bad.push(format!(
                        "{by} {path}: `{}` -> {} on {:?}: evaluator {w} bits {:#x}, got {g} bits {:#x}",
                        k.text,
                        k.to,
                        &x[..k.arity],
                        w.bits(),
                        g.bits()
                    ));
                }
            }
        }
    }
    bad
}

fn programs() -> Vec<(DType, Program)> {
    DType::ALL
        .iter()
        .map(|&d| {
            let cs = cases(d);
            let n = cs
                .iter()
                .map(|k| inputs(d, k.arity).len())
                .max()
                .unwrap_or(1)
                // At most 1023 lanes (the triples of `fma` are sampled evenly): the math
                // cases' tiles (the Payne-Hanek branch holds its results in tile variables)
                // fit the CPU backend's 4 MiB; not a multiple of 16, so the SIMD loops get a
                // scalar tail.
                .min(1023)
                | 1;
            (d, program(d, &cs, n))
        })
        .collect()
}

fn report(bad: Vec<String>, compared: usize) {
    for b in bad.iter().take(40) {
        println!("{b}");
    }
    assert!(
        bad.is_empty(),
        "{} disagreements (first 40 above)",
        bad.len()
    );
    // Every dtype's program ran: about 10^5 results in all, tiles and scalars.
    assert!(compared > 50_000, "only {compared} results compared");
}

#[test]
fn the_verifier_and_the_evaluator_agree_on_which_ops_exist() {
    // Spot checks of the table `cases` derives from the verifier.
    let names = |d| cases(d).iter().map(|k| k.text.clone()).collect::<Vec<_>>();
    assert!(names(DType::F32).contains(&"fma A, B, C".to_string()));
    assert!(!names(DType::F32).contains(&"rem A, B".to_string()));
    assert!(!names(DType::I32).contains(&"sqrt A".to_string()));
    assert!(!names(DType::U32).contains(&"neg A".to_string()));
    assert!(names(DType::Bool).contains(&"xor A, B".to_string()));
    // Every accepted case is defined by the evaluator on every edge value (`want` panics
    // otherwise).
    let mut evaluated = 0;
    for d in DType::ALL {
        for k in cases(d) {
            for x in inputs(d, k.arity) {
                want(&k, &x, true);
                evaluated += 1;
            }
        }
    }
    assert!(evaluated > 10_000, "{evaluated}");
}

#[test]
fn the_cpu_backend_computes_what_the_evaluator_says() {
    let opts = RunOptions::default();
    let (mut bad, mut compared) = (vec![], 0);
    for (d, p) in programs() {
        let got = run(&p, d, Target::Cpu, &opts);
        bad.extend(check(&p, &got, &format!("cpu {d}"), false, &mut compared));
    }
    report(bad, compared);
}

#[cfg(feature = "cuda")]
#[test]
fn the_cuda_c_computes_what_the_evaluator_says_in_the_emulation() {
    emulation::cxx();
    let opts = RunOptions {
        platform: eagle::runtime::Platform::Cuda,
        devices: vec![0],
        cuda_emulate: true,
        ..RunOptions::default()
    };
    let (mut bad, mut compared) = (vec![], 0);
    for (d, p) in programs() {
        let got = run(&p, d, Target::Cuda, &opts);
        bad.extend(check(
            &p,
            &got,
            &format!("cuda-emulation {d}"),
            true,
            &mut compared,
        ));
    }
    report(bad, compared);
}

/// Folds `expr` (IR text over constants, result `%9`) at specialization and returns the bits
/// of the constant it folds to.
fn folded(consts: &str, expr: &str, ty: DType) -> u64 {
    let src = format!(
        "compute @f(out %0 y: tensor<[1], {ty}>) {{\n{consts}  {expr}\n  %10 = const 0 : index\n  set_elem %9, %0[%10]\n}}\nhost @h(out %0 y: tensor<[1], {ty}>) {{\n  %1 = const 0 : index\n}}\n"
    );
    let m = parse_module(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let s = eagle::codegen::specialize(&m, &Bindings::world(1)).unwrap();
    let f = s.function("f").unwrap();
    let text = eagle::ir::print_function(f);
    let c = f
        .body
        .iter(&f.ops)
        .find_map(|op| match (&op.kind, op.result) {
            (OpKind::Const(c), Some(r)) if f.ty(r).dtype() == Some(ty) => Some(*c),
            _ => None,
        })
        .unwrap_or_else(|| panic!("nothing folded:\n{text}"));
    Scalar::from_const(c, ty).unwrap().bits()
}

#[test]
fn min_of_a_nan_folds_to_the_nan_that_runs() {
    // `min(z / z, 1.0)`: the folder once used `f32::min`, which drops the NaN.
    let bits = folded(
        "  %1 = const 0.0 : f32\n  %2 = div %1, %1 : f32\n  %3 = const 1.0 : f32\n",
        "%9 = min %2, %3 : f32",
        DType::F32,
    );
    assert_eq!(bits, eval::CANONICAL_NAN_F32 as u64);
    // The evaluator, which `the_cpu_backend_computes_what_the_evaluator_says` holds compiled
    // code to on NaN operands, gives the same bits.
    let z = Scalar::F32(0.0);
    let nan = eval::binary(BinOp::Div, z, z).unwrap();
    let m = eval::binary(BinOp::Min, nan, Scalar::F32(1.0)).unwrap();
    assert_eq!(m.bits(), bits);
}

#[test]
fn an_i64_cast_to_f32_folds_with_one_rounding() {
    // Through f64 this is 0x5d800000; rustc and compiled code give 0x5d800001.
    let bits = folded(
        "  %1 = const 1152921573326323713 : i64\n",
        "%9 = cast %1 : f32",
        DType::F32,
    );
    assert_eq!(bits, 0x5d80_0001);
    assert_eq!(
        (1_152_921_573_326_323_713_i64 as f32).to_bits(),
        0x5d80_0001
    );
}

#[test]
fn float_constants_keep_their_bits_through_the_text_form() {
    for (text, d, bits) in [
        ("nan(0xffc00000)", DType::F32, 0xffc0_0000_u64),
        ("nan(0x7fa00001)", DType::F32, 0x7fa0_0001),
        ("nan(0xfff8000000000001)", DType::F64, 0xfff8_0000_0000_0001),
        ("-0.0", DType::F32, 0x8000_0000),
        ("0.1", DType::F32, 0x3dcc_cccd),
        ("-inf", DType::F64, 0xfff0_0000_0000_0000),
    ] {
        let src = format!("compute @f() {{\n  %0 = const {text} : {d}\n}}\n");
        let m = parse_module(&src).unwrap_or_else(|e| panic!("{text}: {e}"));
        let g = &m.functions[0];
        let OpKind::Const(c) = g.op(g.body.ops[0]).kind else {
            panic!()
        };
        assert_eq!(Scalar::from_const(c, d).unwrap().bits(), bits, "{text}");
        assert_eq!(eagle::ir::print_module(&m), src, "{text}");
    }
    // A NaN's width must be its dtype's.
    let e = parse_module("compute @f() {\n  %0 = const nan(0x7fc0) : f32\n}\n").unwrap_err();
    assert!(e.to_string().contains("8 hex digits for f32"), "{e}");
}
