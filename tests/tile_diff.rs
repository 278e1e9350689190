//! The differential test of the tile ops (`eagle_ir::TileOp`): every reduction, argmax and
//! argmin, running form (`cumsum`, ...), sort and argsort, gather and scatter, broadcast, layout, creation and matmul op on every number dtype, on tiles whose
//! extents are not multiples of the vector width or of the reduction's 8 lanes (`[6, 19]`,
//! `[19, 7]`), with NaN of both signs, +-0, +-inf, subnormals and integer extremes sprinkled
//! among random values, through
//!
//! - the reference semantics (`TileOp::eval`, the specification),
//! - the CPU backend (its 8-lane reductions, its vectorised matmul and their tails),
//! - the CUDA C, run in the CUDA emulation (per-device programs in block mode: tiles striped
//!   over the threads and staged through shared memory).
//!
//! Results must have identical bits, but for the allowance of Rust (RFC 3514): a NaN produced
//! by arithmetic (a sum, product or matmul that meets a NaN or `inf - inf`) may carry any sign
//! and payload. `max`/`min` reductions must give the canonical NaN exactly.
use eagle::codegen::{compile, Bindings, Target};
use eagle::ir::eval::Scalar;
use eagle::ir::tile::{Tile, TileOp};
use eagle::ir::{parse_module, DType, Type};
use eagle::runtime::{run_with, Arg, RunOptions};
use std::fmt::Write;

#[cfg(feature = "cuda")]
mod emulation;

const A: [u64; 2] = [6, 19];
const B: [u64; 2] = [19, 7];
const C: [u64; 2] = [6, 7];
/// An odd row count and a wide `B` (more than one 64-column panel), for matmul's register
/// blocks and their edges.
const E: [u64; 2] = [5, 19];
const W: [u64; 2] = [19, 70];

/// A case: the op text with operands `A`, `B`, `C` (tiles of the shapes above), `R` (the
/// row-max `[6, 1]`), `Q` (the col-sum `[1, 19]`), `S` (the whole-tile max, a scalar), `I`,
/// `J`, `D` (index tiles of `A`'s shape: see `program`); the result type; what it computes by
/// the reference.
struct Case {
    text: &'static str,
    op: TileOp,
    args: &'static [char],
    shape: Vec<u64>,
    dtype: Option<DType>,
    /// Whether arithmetic NaNs may differ in payload.
    arith: bool,
}

fn cases(d: DType) -> Vec<Case> {
    let c = |text, args: &'static [char], shape: &[u64], dtype: Option<DType>, arith| Case {
        text,
        op: TileOp::from_name(text.split([' ', '[']).next().unwrap()).unwrap(),
        args,
        shape: shape.to_vec(),
        dtype,
        arith,
    };
    let mut v = vec![
        c("row_sum", &['A'], &[6, 1], None, true),
        c("row_prod", &['A'], &[6, 1], None, true),
        c("row_max", &['A'], &[6, 1], None, false),
        c("row_min", &['A'], &[6, 1], None, false),
        c("col_sum", &['A'], &[1, 19], None, true),
        c("col_prod", &['A'], &[1, 19], None, true),
        c("col_max", &['A'], &[1, 19], None, false),
        c("col_min", &['A'], &[1, 19], None, false),
        c("reduce_sum", &['A'], &[], None, true),
        c("reduce_prod", &['A'], &[], None, true),
        c("reduce_max", &['A'], &[], None, false),
        c("reduce_min", &['A'], &[], None, false),
        c("row_argmax", &['A'], &[6, 1], Some(DType::I64), false),
        c("row_argmin", &['A'], &[6, 1], Some(DType::I64), false),
        c("col_argmax", &['A'], &[1, 19], Some(DType::I64), false),
        c("col_argmin", &['A'], &[1, 19], Some(DType::I64), false),
        c("expand", &['R'], &[6, 19], None, false),
        c("expand", &['Q'], &[6, 19], None, false),
        c("expand", &['S'], &[3, 5], None, false),
        c("transpose", &['A'], &[19, 6], None, false),
        c("reshape", &['A'], &[19, 6], None, false),
        c("reshape", &['A'], &[114], None, false),
        c("concat_0", &['A', 'A'], &[12, 19], None, false),
        c("concat_1", &['A', 'A'], &[6, 38], None, false),
        c("extract[1, 3]", &['A'], &[4, 8], None, false),
        c("full", &['S'], &[2, 9], None, false),
        c("iota_0", &[], &[6, 19], None, false),
        c("iota_1", &[], &[6, 19], None, false),
        c("matmul", &['A', 'B'], &[6, 7], None, true),
        c("matmul_acc", &['C', 'A', 'B'], &[6, 7], None, true),
        c("matmul", &['E', 'W'], &[5, 70], None, true),
        c("transpose", &['W'], &[70, 19], None, false),
        c("cumsum_1", &['A'], &[6, 19], None, true),
        c("cumsum_0", &['A'], &[6, 19], None, true),
        c("cumprod_1", &['A'], &[6, 19], None, true),
        c("cumprod_0", &['B'], &[19, 7], None, true),
        c("cummax_1", &['A'], &[6, 19], None, false),
        c("cummin_0", &['A'], &[6, 19], None, false),
        c("sort_1", &['A'], &[6, 19], None, false),
        c("sort_0", &['A'], &[6, 19], None, false),
        c("argsort_1", &['A'], &[6, 19], Some(DType::I64), false),
        c("argsort_0", &['B'], &[19, 7], Some(DType::I64), false),
        c("gather_1", &['A', 'I'], &[6, 19], None, false),
        c("gather_0", &['A', 'J'], &[6, 19], None, false),
        c("scatter_1", &['A', 'D', 'A'], &[6, 19], None, false),
        c("scatter_add_1", &['A', 'D', 'A'], &[6, 19], None, true),
        c("scatter_add_0", &['A', 'J', 'A'], &[6, 19], None, true),
    ];
    if let Some(Case { op, .. }) = v.iter_mut().find(|k| k.text.starts_with("extract")) {
        *op = TileOp::Extract(vec![1, 3]);
    }
    for k in &mut v {
        k.dtype = Some(k.dtype.unwrap_or(d));
    }
    v
}

/// Deterministic inputs: random values of the dtype's range with its edge values sprinkled in.
fn values(d: DType, n: usize, seed: u64) -> Vec<Scalar> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let f32_edges = [
        f32::NAN,
        -f32::NAN,
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::from_bits(1),
        f32::MAX,
    ];
    (0..n)
        .map(|i| {
            let r = next();
            let edge = i % 23 == 7 && seed % 2 == 1;
            match d {
                DType::F32 => Scalar::F32(if edge {
                    f32_edges[(r % 8) as usize]
                } else {
                    // Values that keep products of 19 finite, with ties and zeros of both signs.
                    let k = (r % 41) as i32 - 20;
                    if k == 0 && r & 64 != 0 {
                        -0.0
                    } else {
                        k as f32 / 8.0 + if r & 128 != 0 { 0.1 } else { 0.0 }
                    }
                }),
                DType::F64 => Scalar::F64(if edge {
                    f32_edges[(r % 8) as usize] as f64
                } else {
                    let k = (r % 41) as i32 - 20;
                    if k == 0 && r & 64 != 0 {
                        -0.0
                    } else {
                        k as f64 / 8.0 + if r & 128 != 0 { 0.1 } else { 0.0 }
                    }
                }),
                DType::I32 => Scalar::I32(if edge {
                    i32::MIN
                } else {
                    (r as i32) >> (r % 24)
                }),
                DType::I64 => Scalar::I64(if edge {
                    i64::MAX
                } else {
                    (r as i64) >> (r % 50)
                }),
                DType::U32 => Scalar::U32(if edge {
                    u32::MAX
                } else {
                    (r as u32) >> (r % 24)
                }),
                DType::U64 => Scalar::U64(if edge { 0 } else { r >> (r % 50) }),
                DType::Index => Scalar::Index((r as i64) >> (r % 50)),
                DType::Bool => Scalar::Bool(r & 1 == 1),
                DType::F16 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2 | DType::E8M0 => {
                    let x = if edge {
                        f32_edges[(r % 8) as usize]
                    } else {
                        let k = (r % 41) as i32 - 20;
                        k as f32 / 8.0 + if r & 128 != 0 { 0.1 } else { 0.0 }
                    };
                    eagle::ir::eval::narrow_float(x as f64, d)
                }
                DType::I8 => Scalar::I8(if edge { i8::MIN } else { (r as i8) >> (r % 6) }),
                DType::U8 => Scalar::U8(if edge { u8::MAX } else { (r as u8) >> (r % 6) }),
                DType::I16 => Scalar::I16(if edge {
                    i16::MIN
                } else {
                    (r as i16) >> (r % 12)
                }),
                DType::U16 => Scalar::U16(if edge {
                    u16::MAX
                } else {
                    (r as u16) >> (r % 12)
                }),
            }
        })
        .collect()
}

fn tensor(shape: &[u64], d: DType) -> String {
    let s: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("tensor<[{}], {}>", s.join(", "), d.name())
}

fn tile(shape: &[u64], d: DType) -> String {
    if shape.is_empty() {
        return d.name().to_string();
    }
    let s: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("tile<[{}], {}>", s.join(", "), d.name())
}

/// The IR text of one program holding every case for dtype `d`: a per-device program that
/// loads `A`, `B`, `C`, computes each case and stores it into output `k` (a scalar result
/// into element 0 of a `[1]` tensor).
fn program(d: DType, cases: &[Case]) -> String {
    let mut params = vec![
        "%0 ctx: ctx".to_string(),
        format!("%1 a: {}", tensor(&A, d)),
        format!("%2 b: {}", tensor(&B, d)),
        format!("%3 c: {}", tensor(&C, d)),
        format!("%4 e: {}", tensor(&E, d)),
        format!("%5 w: {}", tensor(&W, d)),
    ];
    let out_shape = |k: &Case| -> Vec<u64> {
        if k.shape.is_empty() {
            vec![1]
        } else {
            k.shape.clone()
        }
    };
    for (i, k) in cases.iter().enumerate() {
        params.push(format!(
            "out %{} y{i}: {}",
            6 + i,
            tensor(&out_shape(k), k.dtype.unwrap())
        ));
    }
    let mut body = String::new();
    let mut n = 6 + cases.len();
    let mut fresh = || {
        n += 1;
        n - 1
    };
    let z = fresh();
    let _ = writeln!(body, "  %{z} = const 0 : index");
    let (ta, tb, tc) = (fresh(), fresh(), fresh());
    let _ = writeln!(body, "  %{ta} = load %1[%{z}, %{z}] : {}", tile(&A, d));
    let _ = writeln!(body, "  %{tb} = load %2[%{z}, %{z}] : {}", tile(&B, d));
    let _ = writeln!(body, "  %{tc} = load %3[%{z}, %{z}] : {}", tile(&C, d));
    let (te, tw) = (fresh(), fresh());
    let _ = writeln!(body, "  %{te} = load %4[%{z}, %{z}] : {}", tile(&E, d));
    let _ = writeln!(body, "  %{tw} = load %5[%{z}, %{z}] : {}", tile(&W, d));
    let (r, q, s) = (fresh(), fresh(), fresh());
    let _ = writeln!(body, "  %{r} = row_max %{ta} : {}", tile(&[6, 1], d));
    let _ = writeln!(body, "  %{q} = col_sum %{ta} : {}", tile(&[1, 19], d));
    let _ = writeln!(body, "  %{s} = reduce_max %{ta} : {}", d.name());
    // Index tiles for gather and scatter: a permutation of each row of A (`I`), row indices of
    // A for each column (`J`), and `I % 3` (`D`: duplicate indices in every row).
    let (ii, jj, dd, three) = (fresh(), fresh(), fresh(), fresh());
    let _ = writeln!(body, "  %{ii} = argsort_1 %{ta} : tile<[6, 19], i64>");
    let _ = writeln!(body, "  %{jj} = argsort_0 %{ta} : tile<[6, 19], i64>");
    let _ = writeln!(body, "  %{three} = const 3 : i64");
    let _ = writeln!(body, "  %{dd} = rem %{ii}, %{three} : tile<[6, 19], i64>");
    for (i, k) in cases.iter().enumerate() {
        let args: Vec<String> = k
            .args
            .iter()
            .map(|c| {
                format!(
                    "%{}",
                    match c {
                        'A' => ta,
                        'B' => tb,
                        'C' => tc,
                        'E' => te,
                        'W' => tw,
                        'R' => r,
                        'Q' => q,
                        'I' => ii,
                        'J' => jj,
                        'D' => dd,
                        _ => s,
                    }
                )
            })
            .collect();
        let v = fresh();
        let sep = if args.is_empty() { "" } else { " " };
        let _ = writeln!(
            body,
            "  %{v} = {}{sep}{} : {}",
            k.text,
            args.join(", "),
            tile(&k.shape, k.dtype.unwrap())
        );
        if k.shape.is_empty() {
            let _ = writeln!(body, "  set_elem %{v}, %{}[%{z}]", 6 + i);
        } else {
            let offs = vec![format!("%{z}"); k.shape.len()];
            let _ = writeln!(body, "  store %{v}, %{}[{}]", 6 + i, offs.join(", "));
        }
    }
    let mut host_params = vec![
        format!("%0 a: {}", tensor(&A, d)),
        format!("%1 b: {}", tensor(&B, d)),
        format!("%2 c: {}", tensor(&C, d)),
        format!("%3 e: {}", tensor(&E, d)),
        format!("%4 w: {}", tensor(&W, d)),
    ];
    for (i, k) in cases.iter().enumerate() {
        host_params.push(format!(
            "out %{} y{i}: {}",
            5 + i,
            tensor(&out_shape(k), k.dtype.unwrap())
        ));
    }
    let h0 = 5 + cases.len();
    let hargs: Vec<String> = (0..5 + cases.len()).map(|i| format!("%{i}")).collect();
    format!(
        "device @k({}) {{\n{body}}}\n\nhost @h({}) {{\n  %{h0} = const 0 : index\n  dispatch @k({}) device %{h0}\n}}\n",
        params.join(", "),
        host_params.join(", "),
        hargs.join(", ")
    )
}

fn bytes(v: &[Scalar]) -> Vec<u8> {
    let mut out = vec![];
    for x in v {
        let d = x.dtype();
        out.extend_from_slice(&x.bits().to_le_bytes()[..d.size()]);
    }
    out
}

fn scalars(b: &[u8], d: DType) -> Vec<Scalar> {
    b.chunks(d.size())
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            Scalar::from_bits(u64::from_le_bytes(w), d)
        })
        .collect()
}

/// Runs every case of dtype `d` on `target` and compares with the reference; returns the
/// disagreements and counts the comparisons.
fn check(d: DType, target: Target, opts: &RunOptions, compared: &mut usize) -> Vec<String> {
    let cases = cases(d);
    let text = program(d, &cases);
    let m = parse_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    eagle::ir::verify_module(&m).unwrap_or_else(|e| panic!("{e}\n{text}"));
    // The text form of every tile op round-trips.
    let printed = eagle::ir::print_module(&m);
    let again = parse_module(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert_eq!(eagle::ir::print_module(&again), printed);
    let (art, _) =
        compile(&m, "h", &Bindings::world(1), target).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (a, b, c) = (
        values(d, 114, d as u64 * 2 + 1),
        values(d, 133, 10),
        values(d, 42, 12),
    );
    let (e, w) = (values(d, 95, 14), values(d, 19 * 70, 16));
    let (ab, bb, cb, eb, wb) = (bytes(&a), bytes(&b), bytes(&c), bytes(&e), bytes(&w));
    let mut outs: Vec<Vec<u8>> = cases
        .iter()
        .map(|k| {
            vec![0u8; k.shape.iter().product::<u64>().max(1) as usize * k.dtype.unwrap().size()]
        })
        .collect();
    let mut args = vec![
        Arg::In(A.iter().map(|&x| x as usize).collect(), d, (&ab[..]).into()),
        Arg::In(B.iter().map(|&x| x as usize).collect(), d, (&bb[..]).into()),
        Arg::In(C.iter().map(|&x| x as usize).collect(), d, (&cb[..]).into()),
        Arg::In(E.iter().map(|&x| x as usize).collect(), d, (&eb[..]).into()),
        Arg::In(W.iter().map(|&x| x as usize).collect(), d, (&wb[..]).into()),
    ];
    for (k, o) in cases.iter().zip(outs.iter_mut()) {
        let shape = if k.shape.is_empty() {
            vec![1]
        } else {
            k.shape.iter().map(|&x| x as usize).collect()
        };
        args.push(Arg::Out(shape, k.dtype.unwrap(), o));
    }
    run_with(&art, &mut args, 1, opts).unwrap_or_else(|e| panic!("{target:?} {d}: {e}"));
    drop(args);
    let t = |shape: &[u64], data: &[Scalar]| Tile {
        shape: shape.to_vec(),
        data: data.to_vec(),
    };
    let (ta, tb, tc, te, tw) = (t(&A, &a), t(&B, &b), t(&C, &c), t(&E, &e), t(&W, &w));
    let ty = |shape: &[u64], d: DType| {
        if shape.is_empty() {
            Type::Scalar(d)
        } else {
            Type::Tile(eagle::ir::Shape::of(shape), d)
        }
    };
    let r = TileOp::from_name("row_max")
        .unwrap()
        .eval(std::slice::from_ref(&ta), &ty(&[6, 1], d))
        .unwrap();
    let q = TileOp::from_name("col_sum")
        .unwrap()
        .eval(std::slice::from_ref(&ta), &ty(&[1, 19], d))
        .unwrap();
    let s = TileOp::from_name("reduce_max")
        .unwrap()
        .eval(std::slice::from_ref(&ta), &ty(&[], d))
        .unwrap();
    let idx = |name: &str| {
        TileOp::from_name(name)
            .unwrap()
            .eval(std::slice::from_ref(&ta), &ty(&A, DType::I64))
            .unwrap()
    };
    let (ii, jj) = (idx("argsort_1"), idx("argsort_0"));
    let dd = Tile {
        shape: ii.shape.clone(),
        data: ii
            .data
            .iter()
            .map(|x| Scalar::I64(x.bits() as i64 % 3))
            .collect(),
    };
    let mut bad = vec![];
    for (k, o) in cases.iter().zip(&outs) {
        let ins: Vec<Tile> = k
            .args
            .iter()
            .map(|ch| match ch {
                'A' => ta.clone(),
                'B' => tb.clone(),
                'C' => tc.clone(),
                'E' => te.clone(),
                'W' => tw.clone(),
                'R' => r.clone(),
                'Q' => q.clone(),
                'I' => ii.clone(),
                'J' => jj.clone(),
                'D' => dd.clone(),
                _ => s.clone(),
            })
            .collect();
        let rd = k.dtype.unwrap();
        let want = k.op.eval(&ins, &ty(&k.shape, rd)).unwrap();
        let got = scalars(o, rd);
        for (e, (w, g)) in want.data.iter().zip(&got).enumerate() {
            *compared += 1;
            let same = w.bits() == g.bits() || (k.arith && w.is_nan() && g.is_nan());
            if !same {
                bad.push(format!(
                    "{target:?} {d} `{}` element {e}: want {w} ({:#x}), got {g} ({:#x})",
                    k.text,
                    w.bits(),
                    g.bits()
                ));
            }
        }
    }
    bad
}

const DTYPES: [DType; 16] = [
    DType::F16,
    DType::BF16,
    DType::F8E4M3,
    DType::F8E5M2,
    DType::E8M0,
    DType::I8,
    DType::U8,
    DType::I16,
    DType::U16,
    DType::F32,
    DType::F64,
    DType::I32,
    DType::I64,
    DType::U32,
    DType::U64,
    DType::Index,
];

fn report(bad: Vec<String>, compared: usize) {
    for b in bad.iter().take(40) {
        println!("{b}");
    }
    assert!(
        bad.is_empty(),
        "{} disagreements (first 40 above)",
        bad.len()
    );
    // 30 cases x 7 dtypes, about 1,000 elements each.
    assert!(compared > 7 * 1000, "only {compared} results compared");
}

#[test]
fn the_cpu_backend_computes_what_the_tile_reference_says() {
    let (mut bad, mut compared) = (vec![], 0);
    for d in DTYPES {
        bad.extend(check(d, Target::Cpu, &RunOptions::default(), &mut compared));
    }
    report(bad, compared);
}

#[cfg(feature = "cuda")]
#[test]
fn the_cuda_c_computes_what_the_tile_reference_says_in_the_emulation() {
    emulation::cxx();
    let opts = RunOptions {
        platform: eagle::runtime::Platform::Cuda,
        devices: vec![0],
        cuda_emulate: true,
        ..RunOptions::default()
    };
    let (mut bad, mut compared) = (vec![], 0);
    for d in DTYPES {
        bad.extend(check(d, Target::Cuda, &opts, &mut compared));
    }
    report(bad, compared);
}
