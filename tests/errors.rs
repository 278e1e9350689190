//! Bad programs and bad input: each is an error value with a precise message, never a panic
//! or a hang.

use eagle::codegen::{CodegenError, SpecializeError};
use eagle::ir::{parse_module, verify_module, EagleFn, IrError};
use eagle::prelude::*;
use eagle::runtime::{Cause, RuntimeError};
use eagle::Error;

const SIZE: usize = 64;
const N_RANKS: usize = 2;

#[eagle::kernel(device)]
pub fn copy_next(
    ctx: Ctx,
    x: Tensor<f32, 1, SIZE>,
    y: Out<Tensor<f32, 1, SIZE>>,
    win: Window<f32, 1, SIZE>,
) {
    store(win, [0, 0], load(x, [0, 0], [1, SIZE]));
    barrier(ctx);
    store(
        y,
        [0, 0],
        remote_load(win, (rank(ctx) + 1) % nranks(ctx), [0, 0], [1, SIZE]),
    );
}

/// Step 07 with the world dimension pinned to the constant 2 (the seed's "fatal pitfall").
#[eagle::host]
pub fn pinned(x: Tensor<f32, N_RANKS, 1, SIZE>, y: Out<Tensor<f32, N_RANKS, 1, SIZE>>) {
    let buf = alloc_window_buffer([1, SIZE], f32);
    for r in 0..world_size() {
        copy_next(x[r], y[r], window(buf, [1, SIZE], f32), device = r);
    }
}

/// Takes the source location of `e`, so that an expected error can be compared whole while
/// its location is checked on its own.
trait WithLocOf {
    fn with_loc_of(self, e: &SpecializeError) -> SpecializeError;
}
impl WithLocOf for SpecializeError {
    fn with_loc_of(mut self, e: &SpecializeError) -> SpecializeError {
        if let (
            SpecializeError::WorldDimPinned { loc, .. },
            SpecializeError::WorldDimPinned { loc: l, .. },
        ) = (&mut self, e)
        {
            *loc = l.clone();
        }
        self
    }
}

fn specialize_err(e: Error) -> SpecializeError {
    match e {
        Error::Codegen(CodegenError::Specialize(s)) => *s,
        other => panic!("expected a specialization error, got {other:?}"),
    }
}

#[test]
fn pinned_world_dim_is_a_specialization_error() {
    let s = Session::sim(4).unwrap();
    let x = eagle_runner::random_tensor(&[4, 1, SIZE], 1);
    let mut y = Tensor::<f32>::zeros(&[4, 1, SIZE]);
    let e = specialize_err(pinned.launch(&s, &x, &mut y).unwrap_err());
    assert_eq!(
        e,
        SpecializeError::WorldDimPinned {
            function: "pinned".into(),
            argument: "x".into(),
            dim: 0,
            extent: 2,
            world_size: 4,
            loc: None,
        }
        .with_loc_of(&e)
    );
    // The message names the line that indexes the dimension with the rank (issue 35, item 9).
    let SpecializeError::WorldDimPinned { loc: Some(loc), .. } = &e else {
        panic!("no source line: {e}");
    };
    assert_eq!(
        (loc.file.ends_with("errors.rs"), loc.line),
        (true, 34),
        "{e}"
    );
    let msg = e.to_string();
    for needle in [
        "(at tests/errors.rs:34:",
        "argument `x`",
        "dimension 0",
        "constant 2",
        "world size 4",
        "dynamic!",
    ] {
        assert!(msg.contains(needle), "message lacks {needle:?}: {msg}");
    }
    // At P = 2 the pinned program still runs: the constant happens to match.
    let s2 = Session::sim(2).unwrap();
    let x2 = eagle_runner::random_tensor(&[2, 1, SIZE], 2);
    let mut y2 = Tensor::<f32>::zeros(&[2, 1, SIZE]);
    pinned.launch(&s2, &x2, &mut y2).unwrap();
    assert_eq!(y2.row(0), x2.row(1));
}

#[eagle::kernel(device)]
pub fn wrong_peer(ctx: Ctx, win: Window<f32, 1, SIZE>, y: Out<Tensor<f32, 1, SIZE>>) {
    let me = rank(ctx);
    let n = nranks(ctx);
    store(y, [0, 0], remote_load(win, (me - 1) % n, [0, 0], [1, SIZE]));
}

#[eagle::host]
pub fn negative_peer(y: Out<Tensor<f32, NR, 1, SIZE>>) {
    let buf = alloc_window_buffer([1, SIZE], f32);
    for r in 0..world_size() {
        wrong_peer(window(buf, [1, SIZE], f32), y[r], device = r);
    }
}

const NR: Dim = dynamic!("NR");

#[test]
fn negative_peer_arithmetic_is_flagged_before_running() {
    let s = Session::sim(3).unwrap();
    let mut y = Tensor::<f32>::zeros(&[3, 1, SIZE]);
    let e = specialize_err(negative_peer.launch(&s, &mut y).unwrap_err());
    match &e {
        SpecializeError::NegativePeer {
            function, lo, hi, ..
        } => {
            assert_eq!(function, "wrong_peer");
            assert_eq!((*lo, *hi), (-1, 1));
        }
        other => panic!("expected NegativePeer, got {other:?}"),
    }
    assert!(e.to_string().contains("(me + n - 1) % n"));
}

#[eagle::kernel(device)]
pub fn past_the_end(ctx: Ctx, x: Tensor<f32, 1, SIZE>, y: Out<Tensor<f32, 1, SIZE>>) {
    store(y, [0, 0], load(x, [0, 8], [1, SIZE]));
}

#[eagle::host]
pub fn static_oob(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>) {
    for r in 0..world_size() {
        past_the_end(x[r], y[r], device = r);
    }
}

#[test]
fn static_out_of_bounds_tile_is_a_specialization_error() {
    let s = Session::sim(2).unwrap();
    let x = eagle_runner::random_tensor(&[2, 1, SIZE], 3);
    let mut y = Tensor::<f32>::zeros(&[2, 1, SIZE]);
    let e = specialize_err(static_oob.launch(&s, &x, &mut y).unwrap_err());
    match e {
        SpecializeError::IndexOutOfBounds {
            function,
            dim,
            lo,
            hi,
            extent,
            ..
        } => {
            assert_eq!(
                (function.as_str(), dim, lo, hi, extent),
                ("past_the_end", 1, 8, 71, 64)
            );
        }
        other => panic!("expected IndexOutOfBounds, got {other:?}"),
    }
}

#[eagle::kernel(device)]
pub fn dynamic_offset(ctx: Ctx, x: Tensor<f32, 1, SIZE>, y: Out<Tensor<f32, 1, SIZE>>) {
    let mut off = 0;
    off = rank(ctx) * 8;
    store(y, [0, 0], load(x, [0, off], [1, 8]));
}

#[eagle::host]
pub fn runtime_oob(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>) {
    for r in 0..world_size() {
        dynamic_offset(x[r], y[r], device = r);
    }
}

#[test]
fn dynamic_out_of_bounds_offset_fails_at_run_time_with_the_rank() {
    // Offsets rank * 8 fit for ranks 0..=7 and fail on rank 8 (8 * 8 + 8 > 64).
    let s = Session::sim(9).unwrap();
    let x = eagle_runner::random_tensor(&[9, 1, SIZE], 4);
    let mut y = Tensor::<f32>::zeros(&[9, 1, SIZE]);
    match runtime_oob.launch(&s, &x, &mut y).unwrap_err() {
        Error::Runtime(RuntimeError::RankFailed {
            rank,
            cause: Cause::Fault(message),
        }) => {
            assert_eq!(rank, 8);
            assert!(message.contains("the offset in dim 1 is 64"), "{message}");
            assert!(message.contains("dynamic_offset"), "{message}");
        }
        other => panic!("expected RankFailed, got {other:?}"),
    }
    // At P = 8 every offset fits and the copy is exact.
    let s8 = Session::sim(8).unwrap();
    let x8 = eagle_runner::random_tensor(&[8, 1, SIZE], 5);
    let mut y8 = Tensor::<f32>::zeros(&[8, 1, SIZE]);
    runtime_oob.launch(&s8, &x8, &mut y8).unwrap();
    assert_eq!(&y8.row(3)[..8], &x8.row(3)[24..32]);
}

#[eagle::kernel(device)]
pub fn wait_forever(ctx: Ctx, sig: Window<i32, 1, 1>) {
    wait(sig, [0, 0], 1, Eq); // marker: the wait that never ends
}

#[eagle::host]
pub fn deadlock() {
    let buf = alloc_window_buffer([1, 1], i32);
    for r in 0..world_size() {
        wait_forever(window(buf, [1, 1], i32), device = r);
    }
}

#[test]
fn deadlock_is_reported_with_every_rank() {
    let s = Session::sim(3).unwrap();
    match deadlock.launch(&s).unwrap_err() {
        Error::Runtime(RuntimeError::Deadlock { report }) => {
            for r in 0..3 {
                assert!(
                    report.contains(&format!("rank {r} waits for signal window #0")),
                    "{report}"
                );
            }
            assert!(report.contains("== 1, but it holds 0"), "{report}");
        }
        other => panic!("expected Deadlock, got {other:?}"),
    }
}

/// With ranks as tasks (issue 37, item 3), a deadlock is reported with the same text as with
/// a thread per rank, and a race is found and names its op.
#[test]
fn reports_are_the_same_with_ranks_as_tasks() {
    use eagle::SimRanks;
    let deadlock_report = |ranks: SimRanks| {
        let s = Session::sim(3).unwrap().with_sim_ranks(ranks);
        match deadlock.launch(&s).unwrap_err() {
            Error::Runtime(RuntimeError::Deadlock { report }) => report,
            other => panic!("expected Deadlock ({ranks:?}), got {other:?}"),
        }
    };
    let threads = deadlock_report(SimRanks::Threads);
    assert!(
        threads.contains("rank 2 waits for signal window #0"),
        "{threads}"
    );
    assert_eq!(deadlock_report(SimRanks::Tasks), threads);
    let race = |ranks: SimRanks| {
        let x = eagle_runner::random_tensor(&[3, 1, SIZE], 11);
        let mut y = Tensor::<f32>::zeros(&[3, 1, SIZE]);
        let s = Session::sim(3).unwrap().with_sim_ranks(ranks);
        match wrong_handshake.launch(&s, &x, &mut y) {
            Err(Error::Runtime(RuntimeError::RankFailed {
                rank,
                cause: Cause::Race(message),
            })) => (rank, message),
            other => panic!("expected a race ({ranks:?}), got {other:?}"),
        }
    };
    // Which side of a race is found first (the read or the write) depends on the order the
    // ranks ran in, under threads as under tasks; either report names the racy `get`.
    let at = format!("(at tests/errors.rs:{}:5)", line_of("marker: the racy get"));
    for ranks in [SimRanks::Threads, SimRanks::Tasks] {
        let (_, message) = race(ranks);
        assert!(message.contains("data race: rank "), "{message}");
        assert!(message.contains(&at), "{message}");
    }
}

#[test]
fn host_argument_of_the_wrong_shape_is_named() {
    let s = Session::sim(2).unwrap();
    let x = eagle_runner::random_tensor(&[2, 1, SIZE], 6);
    let mut y = Tensor::<f32>::zeros(&[2, 1, 32]);
    match runtime_oob.launch(&s, &x, &mut y).unwrap_err() {
        Error::Runtime(RuntimeError::Argument {
            argument,
            expected,
            found,
            ..
        }) => {
            assert_eq!(argument, "y");
            assert!(expected.contains("[2, 1, 64]"), "{expected}");
            assert!(found.contains("[2, 1, 32]"), "{found}");
        }
        other => panic!("expected Argument, got {other:?}"),
    }
}

#[test]
fn conflicting_symbolic_dims_are_named() {
    let s = Session::sim(2).unwrap();
    let x = eagle_runner::random_tensor(&[2, 1, SIZE], 7);
    let mut y = Tensor::<f32>::zeros(&[3, 1, SIZE]);
    match runtime_oob.launch(&s, &x, &mut y).unwrap_err() {
        Error::Runtime(RuntimeError::Argument {
            argument,
            expected,
            found,
            ..
        }) => {
            assert_eq!(argument, "y");
            assert!(expected.contains("NR = 2"), "{expected}");
            assert_eq!(found, "3");
        }
        other => panic!("expected Argument, got {other:?}"),
    }
}

#[test]
fn session_rejects_bad_device_lists() {
    assert!(matches!(
        Session::new(eagle::Platform::Sim, vec![]).unwrap_err(),
        Error::Runtime(RuntimeError::Devices(m)) if m.contains("empty")
    ));
    assert!(matches!(
        Session::new(eagle::Platform::Sim, vec![0, 1, 0]).unwrap_err(),
        Error::Runtime(RuntimeError::Devices(m)) if m.contains("device 0 appears twice")
    ));
    assert!(matches!(
        Session::new(eagle::Platform::Sim, vec![0, 9999]).unwrap_err(),
        Error::Runtime(RuntimeError::Devices(m)) if m.contains("device 9999 does not exist")
    ));
    assert!(matches!(
        eagle_runner::parse_devices("0,x").unwrap_err(),
        Error::Usage(m) if m.contains("entry 1 is `x`")
    ));
}

/// The ring shift of `copy_next` at any world size.
#[eagle::host]
pub fn ring_next(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>) {
    let buf = alloc_window_buffer([1, SIZE], f32);
    for r in 0..world_size() {
        copy_next(x[r], y[r], window(buf, [1, SIZE], f32), device = r);
    }
}

#[test]
fn sim_runs_128_and_1024_devices_and_names_its_limit() {
    for p in [128, 1024] {
        let s = Session::sim(p).unwrap();
        let x = eagle_runner::random_tensor(&[p, 1, SIZE], 5);
        let mut y = Tensor::<f32>::zeros(&[p, 1, SIZE]);
        let r = ring_next.launch(&s, &x, &mut y).unwrap();
        assert_eq!(r.run.dispatches, p);
        for rank in [0, 1, p / 2, p - 1] {
            assert_eq!(y.row(rank), x.row((rank + 1) % p), "P={p} rank {rank}");
        }
    }
    let limit =
        "device 4096 does not exist: platform `sim` has devices 0 to 4095 (at most 4096 devices)";
    for e in [
        Session::sim(4097).unwrap_err(),
        Session::new(eagle::Platform::Sim, vec![0, 4096]).unwrap_err(),
    ] {
        assert!(
            matches!(&e, Error::Runtime(RuntimeError::Devices(m)) if m.starts_with(limit)),
            "{e}"
        );
    }
}

#[test]
fn sizes_too_large_for_the_machine_are_errors_not_panics() {
    // Used to panic (capacity overflow) or abort (allocation failure) building 0..p.
    for p in [usize::MAX, 1 << 40] {
        let e = Session::sim(p).unwrap_err();
        assert!(
            matches!(&e, Error::Runtime(RuntimeError::Devices(m)) if m.contains("(at most 4096 devices)")),
            "P={p}: {e}"
        );
    }
    // Tensors: the shape product overflows, the bytes overflow, or the allocation fails.
    for (shape, found) in [
        (
            vec![usize::MAX, 2],
            "the product of its dims overflows usize",
        ),
        (
            vec![usize::MAX],
            "elements of 8 bytes overflow the address space",
        ),
        (vec![1 << 45], "bytes could not be allocated"),
    ] {
        match Tensor::<f64>::try_zeros(&shape).unwrap_err() {
            RuntimeError::Argument {
                function,
                argument,
                expected,
                found: f,
            } => {
                assert_eq!(
                    (function.as_str(), argument.as_str()),
                    ("Tensor::try_zeros", "shape")
                );
                assert!(expected.contains("use a smaller shape"), "{expected}");
                assert!(f.starts_with(&format!("shape {shape:?}: ")), "{f}");
                assert!(f.contains(found), "{f}");
            }
            other => panic!("{shape:?}: {other:?}"),
        }
    }
    assert_eq!(Tensor::<f64>::try_zeros(&[3, 2]).unwrap().data(), &[0.0; 6]);
    // A shape whose product wraps to 0 was accepted with no data.
    let e = Tensor::<f32>::from_vec(&[1 << 62, 4], vec![]).unwrap_err();
    assert!(
        matches!(&e, RuntimeError::Argument { function, argument, found, .. }
            if function == "Tensor::from_vec" && argument == "shape"
                && found.contains("the product of its dims overflows usize")),
        "{e}"
    );
}

#[test]
fn an_argument_whose_bytes_do_not_match_its_shape_is_an_error() {
    use eagle::ir::DType;
    use eagle::runtime::Arg;
    let s = Session::sim(N_RANKS).unwrap();
    let bytes = [0u8; 100];
    let mut out = vec![0u8; N_RANKS * SIZE * 4];
    // Used to panic slicing the 100 bytes as the 512 the shape asks for.
    let e = s
        .launch::<pinned>(vec![
            Arg::In(vec![N_RANKS, 1, SIZE], DType::F32, (&bytes[..]).into()),
            Arg::Out(vec![N_RANKS, 1, SIZE], DType::F32, &mut out),
        ])
        .unwrap_err();
    assert!(
        matches!(&e, Error::Runtime(RuntimeError::Argument { function, argument, expected, found })
            if function == "pinned" && argument == "x"
                && expected.starts_with("512 bytes for shape [2, 1, 64] of f32")
                && found == "100 bytes"),
        "{e}"
    );
    // A shape whose size overflows, with a symbolic dim it would bind.
    let e = s
        .launch::<ring_next>(vec![
            Arg::In(vec![1 << 62, 1, SIZE], DType::F32, (&bytes[..]).into()),
            Arg::Out(vec![N_RANKS, 1, SIZE], DType::F32, &mut out),
        ])
        .unwrap_err();
    assert!(
        matches!(&e, Error::Runtime(RuntimeError::Argument { argument, expected, .. })
            if argument == "x" && expected.contains("overflows usize")),
        "{e}"
    );
    // The runtime entry point checks the same.
    let (art, _) = eagle::codegen::compile(
        &pinned::module().unwrap(),
        "pinned",
        &eagle::codegen::Bindings::world(N_RANKS as u64),
        eagle::codegen::Target::Cpu,
    )
    .unwrap();
    let e = eagle::runtime::run(
        &art,
        &mut [
            Arg::In(vec![N_RANKS, 1, SIZE], DType::F32, (&bytes[..]).into()),
            Arg::Out(vec![N_RANKS, 1, SIZE], DType::F32, &mut out),
        ],
        N_RANKS,
    )
    .unwrap_err();
    assert!(
        matches!(&e, RuntimeError::Argument { argument, found, .. } if argument == "x" && found == "100 bytes"),
        "{e}"
    );
}

#[test]
fn debug_of_an_error_is_its_message_and_the_alternate_form_its_variant() {
    // `fn main() -> eagle::Result<()>` prints the error with `Debug`.
    let e = Session::new(eagle::Platform::Sim, vec![]).unwrap_err();
    let msg = "device list (`-d/--devices`): the device list is empty; give at least one id, e.g. `-d 0,1`";
    assert_eq!(e.to_string(), msg);
    assert_eq!(format!("{e:?}"), msg);
    assert_eq!(
        format!("{e:#?}"),
        "Runtime(\n    Devices(\n        \"the device list is empty; give at least one id, e.g. `-d 0,1`\",\n    ),\n)"
    );
    let s = Session::sim(4).unwrap();
    let mut y = Tensor::<f32>::zeros(&[4, 1, SIZE]);
    let e = unsigned_negative_peer.launch(&s, &mut y).unwrap_err();
    assert_eq!(format!("{e:?}"), e.to_string());
    assert!(!format!("{e:?}").contains("NegativePeer"), "{e:?}");
    assert!(
        format!("{e:#?}").starts_with("Codegen(\n    Specialize(\n        NegativePeer {"),
        "{e:#?}"
    );
}

#[test]
fn verifier_names_function_op_and_operand() {
    let text =
        "device @k(%0 x: tensor<[4], f32>) {\n  %1 = const 1 : index\n  %2 = add %1, %1 : f32\n}\n";
    let m = parse_module(text).unwrap();
    match verify_module(&m).unwrap_err() {
        IrError::Verify {
            function,
            op,
            message,
            loc,
        } => {
            // Read from text without `;@` locations: none.
            assert_eq!(loc, None);
            assert_eq!(function, "k");
            assert_eq!(op, "%2 = add %1, %1 : f32");
            assert_eq!(message, "result type must be `index`, found `f32`");
        }
        other => panic!("expected Verify, got {other:?}"),
    }
    let text = "device @k(%0 x: tensor<[4], f32>) {\n  %1 = load %0[%9] : tile<[4], f32>\n}\n";
    assert!(matches!(
        parse_module(text).unwrap_err(),
        IrError::Parse { line: 2, message, .. } if message.contains("`%9` is used before it is defined")
    ));
}

#[test]
fn parser_reports_line_and_column() {
    match parse_module("host @h() {\n  %0 = frobnicate : index\n}\n").unwrap_err() {
        IrError::Parse {
            line,
            column,
            message,
        } => {
            assert_eq!((line, column), (2, 8));
            assert_eq!(message, "unknown op `frobnicate`");
        }
        other => panic!("expected Parse, got {other:?}"),
    }
}

#[eagle::kernel]
pub fn ping(x: Tensor<f32, 4>) {
    pong(x);
}
#[eagle::kernel]
pub fn pong(x: Tensor<f32, 4>) {
    ping(x);
}

#[test]
fn mutual_recursion_is_an_error() {
    match ping::module().unwrap_err() {
        IrError::Recursion { chain } => assert_eq!(chain, "ping -> pong -> ping"),
        other => panic!("expected Recursion, got {other:?}"),
    }
}

#[eagle::kernel(device)]
pub fn mixes_types(ctx: Ctx, y: Out<Tensor<f32, 1, SIZE>>) {
    let t = load(y, [0, 0], [1, SIZE]);
    store(y, [0, 0], t + rank(ctx));
}

#[test]
fn mixing_dtypes_names_the_fix() {
    let e = mixes_types::module().unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("mixes_types"), "{msg}");
    assert!(
        msg.contains("operand 1 has dtype `index` but an earlier operand has `f32`"),
        "{msg}"
    );
    assert!(msg.contains("as f32"), "{msg}");
}

/// The typing rule of an elementwise op (`eagle_ir::typing`) is applied as the kernel is
/// built: the mistake is a build error at its source line, with the verifier's message.
#[test]
fn an_elementwise_typing_mistake_is_a_build_error_at_its_line() {
    let IrError::Build { function, message } = mixes_types::module().unwrap_err() else {
        panic!("expected a build error");
    };
    assert_eq!(function, "mixes_types");
    let line = line_of("store(y, [0, 0], t + rank(ctx));");
    assert_eq!(
        message,
        format!("operand 1 has dtype `index` but an earlier operand has `f32`; convert one with `as f32` (at tests/errors.rs:{line}:22)")
    );
    // The same rule, from the verifier, on IR read from text.
    let m =
        parse_module("compute @f(%0 a: f32, %1 b: index) {\n  %2 = add %0, %1 : f32\n}\n").unwrap();
    let IrError::Verify { message, .. } = verify_module(&m).unwrap_err() else {
        panic!("expected a verifier error");
    };
    assert_eq!(
        message,
        "operand 1 has dtype `index` but an earlier operand has `f32`; convert one with `as f32`"
    );
}

/// A float literal where an integer goes: the builder's error, at its source line.
#[eagle::kernel(device)]
pub fn float_into_int(ctx: Ctx, x: Tensor<u32, 2>, y: Out<Tensor<u32, 2>>) {
    y[0] = x[0] + 1.5; // marker: float literal into u32
}

/// Every build error names the source line of the call being built, whether or not its
/// message places the location itself.
#[test]
fn every_build_error_names_its_source_line() {
    let IrError::Build { function, message } = float_into_int::module().unwrap_err() else {
        panic!("expected a build error");
    };
    assert_eq!(function, "float_into_int");
    let at = format!(
        "(at tests/errors.rs:{}:",
        line_of("marker: float literal into u32")
    );
    assert!(
        message.starts_with("float literal `1.5` used where `u32` is expected; write an integer literal or cast with `as u32` (at tests/errors.rs:"),
        "{message}"
    );
    assert!(message.contains(&at), "{message} lacks {at}");
}

/// Passes a slice of the input `x` where `dynamic_offset` writes (its `Out` parameter `y`).
#[eagle::host]
pub fn input_as_out(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>) {
    for r in 0..world_size() {
        dynamic_offset(y[r], x[r], device = r);
    }
}

#[test]
fn writing_an_input_tensor_asks_for_out() {
    // Direct writes (`store(x, ...)`) are compile errors (tests/ui); this is the indirect case.
    let e = input_as_out::module().unwrap_err().to_string();
    assert!(
        e.contains("passing it as `Out` argument `y` of `@dynamic_offset` writes `x`, an input tensor; mark the parameter `Out<Tensor<...>>`"),
        "{e}"
    );
}

#[eagle::kernel(device)]
pub fn big_literal(ctx: Ctx, y: Out<Tensor<f32, 1, SIZE>>) {
    let a: i32 = 99999999999;
    store(y, [0, 0], load(y, [0, 0], [1, SIZE]) * (a as f32));
}

#[eagle::kernel(device)]
pub fn negative_unsigned(ctx: Ctx, y: Out<Tensor<f32, 1, SIZE>>) {
    let b: u32 = -1;
    store(y, [0, 0], load(y, [0, 0], [1, SIZE]) * (b as f32));
}

#[eagle::kernel(device)]
pub fn mistyped_let(ctx: Ctx, y: Out<Tensor<f32, 1, SIZE>>) {
    let c: usize = 3;
    let d: f32 = c;
    store(y, [0, 0], load(y, [0, 0], [1, SIZE]) * d);
}

#[test]
fn literals_and_let_annotations_are_checked() {
    let e = big_literal::module().unwrap_err().to_string();
    assert!(
        e.contains("integer literal `99999999999` does not fit `i32`"),
        "{e}"
    );
    let e = negative_unsigned::module().unwrap_err().to_string();
    assert!(e.contains("integer literal `-1` does not fit `u32`"), "{e}");
    let e = mistyped_let::module().unwrap_err().to_string();
    assert!(
        e.contains("`let d: f32` is given a value of dtype `index`; convert it with `as f32`"),
        "{e}"
    );
}

/// `65536 * 65536` is a literal expression: it takes `i32` from the annotation and does not
/// fit, as rustc's `arithmetic_overflow` error says.
#[eagle::kernel]
pub fn literal_product_overflows(x: Tensor<i32, 4>) {
    let c: i32 = 65536 * 65536;
}

/// Literal arithmetic takes its dtype from the other operand (`i32` here), as in Rust.
#[eagle::kernel(device)]
pub fn literal_context(ctx: Ctx, x: Tensor<i32, 4>, y: Out<Tensor<i32, 4>>) {
    let t = load(x, [0], [4]);
    let six: i32 = 2 * 3;
    store(y, [0], t / (0 - 1) + six + (10 - 3) * 2);
}

#[eagle::host]
pub fn literal_context_host(x: Tensor<i32, NR, 4>, y: Out<Tensor<i32, NR, 4>>) {
    for r in 0..world_size() {
        literal_context(x[r], y[r], device = r);
    }
}

#[test]
fn integer_literal_expressions_take_their_type_from_the_context() {
    let e = literal_product_overflows::module().unwrap_err().to_string();
    assert!(
        e.contains("integer literal `4294967296` does not fit `i32`"),
        "{e}"
    );
    let s = Session::sim(1).unwrap();
    let x = Tensor::<i32>::from_vec(&[1, 4], vec![1, -2, 30, i32::MAX]).unwrap();
    let mut y = Tensor::<i32>::zeros(&[1, 4]);
    literal_context_host.launch(&s, &x, &mut y).unwrap();
    let want: Vec<i32> = x
        .data()
        .iter()
        .map(|v| v.wrapping_div(-1).wrapping_add(6).wrapping_add(14))
        .collect();
    assert_eq!(y.data(), &want[..]);
}

#[eagle::kernel]
pub fn compute_only(x: Tensor<f32, 1, SIZE>) {
    let t = load(x, [0, 0], [1, SIZE]);
}

#[eagle::host]
pub fn dispatches_compute(x: Tensor<f32, NR, 1, SIZE>) {
    for r in 0..world_size() {
        compute_only(x[r], device = r);
    }
}

#[test]
fn dispatch_and_call_levels_are_explained() {
    let e = dispatches_compute::module().unwrap_err().to_string();
    assert!(
        e.contains("`compute_only` is a compute kernel; call it (without `device =`)"),
        "{e}"
    );
}

const BIG: usize = 2 * 1024 * 1024;

#[eagle::kernel(device)]
pub fn huge_tile(ctx: Ctx, x: Tensor<f32, 1, BIG>, y: Out<Tensor<f32, 1, BIG>>) {
    store(y, [0, 0], load(x, [0, 0], [1, BIG]) * 2.0);
}

#[eagle::host]
pub fn huge(x: Tensor<f32, NR, 1, BIG>, y: Out<Tensor<f32, NR, 1, BIG>>) {
    for r in 0..world_size() {
        huge_tile(x[r], y[r], device = r);
    }
}

#[test]
fn oversized_tiles_are_a_compile_error_not_a_stack_overflow() {
    let s = Session::sim(1).unwrap();
    let x = Tensor::<f32>::zeros(&[1, 1, BIG]);
    let mut y = Tensor::<f32>::zeros(&[1, 1, BIG]);
    let e = huge.launch(&s, &x, &mut y).unwrap_err().to_string();
    assert!(e.contains("function `huge_tile`"), "{e}");
    assert!(
        e.contains("a tile of type `tile<[1, 2097152], f32>` needs 8388608 bytes, more than the limit of 4194304 bytes"),
        "{e}"
    );
}

#[eagle::kernel(device)]
pub fn rank0_waits(ctx: Ctx, sig: Window<i32, 1, 1>) {
    if rank(ctx) == 0 {
        wait(sig, [0, 0], 1, Eq);
    }
}

#[eagle::host]
pub fn partial_deadlock() {
    let buf = alloc_window_buffer([1, 1], i32);
    for r in 0..world_size() {
        rank0_waits(window(buf, [1, 1], i32), device = r);
    }
}

#[test]
fn a_deadlock_names_the_ranks_that_finished() {
    let s = Session::sim(3).unwrap();
    let e = partial_deadlock.launch(&s).unwrap_err().to_string();
    assert!(e.contains("rank 0 waits for signal window #0"), "{e}");
    assert!(
        e.contains("rank(s) 1, 2 finished without satisfying these waits"),
        "{e}"
    );
}

/// Step 07's get mode with the wrong handshake of the tutorial seed's symptom table: it
/// notifies the rank it reads from (next) instead of the rank that reads it (previous).
#[eagle::kernel(device)]
pub fn wrong_handshake_get(
    ctx: Ctx,
    x: Tensor<f32, 1, SIZE>,
    y: Out<Tensor<f32, 1, SIZE>>,
    src: Window<f32, 1, SIZE>,
    dst: Window<f32, 1, SIZE>,
    signal: Window<i32, 1, 1>,
) {
    let me = rank(ctx);
    let n = nranks(ctx);
    let next = (me + 1) % n;
    store(src, [0, 0], load(x, [0, 0], [1, SIZE]));
    notify(signal, next, [0, 0], 1, Set);
    wait(signal, [0, 0], 1, Eq);
    get(dst, next, src); // marker: the racy get
    store(y, [0, 0], load(dst, [0, 0], [1, SIZE]));
}

#[eagle::host]
pub fn wrong_handshake(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>) {
    let src = alloc_window_buffer([1, SIZE], f32);
    let dst = alloc_window_buffer([1, SIZE], f32);
    let sig = alloc_window_buffer([1, 1], i32);
    for r in 0..world_size() {
        wrong_handshake_get(
            x[r],
            y[r],
            window(src, [1, SIZE], f32),
            window(dst, [1, SIZE], f32),
            window(sig, [1, 1], i32),
            device = r,
        );
    }
}

#[test]
fn wrong_handshake_is_reported_as_a_race_on_every_run() {
    let s = Session::sim(3).unwrap();
    let x = eagle_runner::random_tensor(&[3, 1, SIZE], 11);
    for run in 0..25 {
        let mut y = Tensor::<f32>::zeros(&[3, 1, SIZE]);
        match wrong_handshake.launch(&s, &x, &mut y).unwrap_err() {
            Error::Runtime(RuntimeError::RankFailed {
                rank,
                cause: Cause::Race(message),
            }) => {
                // The race is reported whichever of the two accesses ran first: the get that
                // reads the next rank's `src` before that rank's store is ordered before it,
                // or that store over bytes the get already read (naming the get).
                let (next, prev) = ((rank + 1) % 3, (rank + 2) % 3);
                let read = format!(
                    "data race: rank {rank} reads window #0 ([1, 64] f32; `src` of `wrong_handshake_get`) elements 0..64 on rank {next}, which rank {next} wrote"
                );
                let write = format!(
                    "data race: rank {rank} writes window #0 ([1, 64] f32; `src` of `wrong_handshake_get`) elements 0..64 on rank {rank}, which rank {prev} read (function `wrong_handshake_get`, op `get "
                );
                if message.contains(&read) {
                    assert!(
                        message.contains("notify the rank that reads you"),
                        "{message}"
                    );
                } else {
                    assert!(message.contains(&write), "run {run}: {message}");
                    assert!(
                        message.contains("so the read may see either value"),
                        "{message}"
                    );
                }
            }
            other => panic!("run {run}: expected a race report, got {other:?}"),
        }
    }
    // With the detector off the same program runs (its result depends on timing).
    let quiet = Session::sim(3).unwrap().with_race_check(false);
    let mut y = Tensor::<f32>::zeros(&[3, 1, SIZE]);
    wrong_handshake.launch(&quiet, &x, &mut y).unwrap();
}

#[eagle::kernel(device)]
pub fn no_barrier(
    ctx: Ctx,
    x: Tensor<f32, 1, SIZE>,
    y: Out<Tensor<f32, 1, SIZE>>,
    win: Window<f32, 1, SIZE>,
) {
    store(win, [0, 0], load(x, [0, 0], [1, SIZE]));
    store(
        y,
        [0, 0],
        remote_load(win, (rank(ctx) + 1) % nranks(ctx), [0, 0], [1, SIZE]),
    );
}

#[eagle::host]
pub fn unsynchronised(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>) {
    let buf = alloc_window_buffer([1, SIZE], f32);
    for r in 0..world_size() {
        no_barrier(x[r], y[r], window(buf, [1, SIZE], f32), device = r);
    }
}

#[test]
fn remote_load_without_synchronisation_is_a_race() {
    let s = Session::sim(2).unwrap();
    let x = eagle_runner::random_tensor(&[2, 1, SIZE], 12);
    let mut y = Tensor::<f32>::zeros(&[2, 1, SIZE]);
    let e = unsynchronised
        .launch(&s, &x, &mut y)
        .unwrap_err()
        .to_string();
    assert!(e.contains("data race: rank"), "{e}");
    assert!(
        e.contains("with no notify -> wait (or barrier) ordering"),
        "{e}"
    );
}

/// Push without a wait: every rank stores into the next rank's window and notifies it, but
/// `wait_first = false` reads its own window without waiting for that signal.
#[eagle::kernel(device)]
pub fn push_then_load(
    ctx: Ctx,
    x: Tensor<f32, 1, SIZE>,
    y: Out<Tensor<f32, 1, SIZE>>,
    win: Window<f32, 1, SIZE>,
    sig: Window<i32, 1, 1>,
    wait_first: bool,
) {
    let next = (rank(ctx) + 1) % nranks(ctx);
    remote_store(win, next, [0, 0], load(x, [0, 0], [1, SIZE]));
    notify(sig, next, [0, 0], 1, Set);
    if wait_first {
        wait(sig, [0, 0], 1, Eq);
    }
    store(y, [0, 0], load(win, [0, 0], [1, SIZE])); // marker: the unordered load
                                                    // Keep every window alive until all have read.
    barrier(ctx);
}

/// Two ranks write the same elements of rank 0's window with nothing ordering the writes.
#[eagle::kernel(device)]
pub fn two_writers(ctx: Ctx, x: Tensor<f32, 1, SIZE>, win: Window<f32, 1, SIZE>) {
    put(win, 0, x); // marker: the second of two unordered writes
    barrier(ctx);
}

#[eagle::host]
pub fn push_step(
    x: Tensor<f32, NR, 1, SIZE>,
    y: Out<Tensor<f32, NR, 1, SIZE>>,
    wait_first: bool,
    writers: bool,
) {
    let buf = alloc_window_buffer([1, SIZE], f32);
    let sig = alloc_window_buffer([1, 1], i32);
    for r in 0..world_size() {
        if writers {
            two_writers(x[r], window(buf, [1, SIZE], f32), device = r);
        } else {
            push_then_load(
                x[r],
                y[r],
                window(buf, [1, SIZE], f32),
                window(sig, [1, 1], i32),
                wait_first,
                device = r,
            );
        }
    }
}

/// A rank's own `load` of what a peer pushed (`remote_store`) must follow a wait for the
/// peer's signal, and two ranks' writes of the same elements must be ordered: both are
/// reported on every run with the op's source line; with the wait the program runs.
#[test]
fn pushed_data_loaded_without_a_wait_and_unordered_writes_are_races() {
    let s = Session::sim(3).unwrap();
    let x = eagle_runner::random_tensor(&[3, 1, SIZE], 13);
    let mut y = Tensor::<f32>::zeros(&[3, 1, SIZE]);
    let line = |marker: &str| {
        let src = include_str!("errors.rs");
        let at = src.find(marker).unwrap();
        src[..at].lines().count()
    };
    for run in 0..3 {
        let e = push_step
            .launch(&s, &x, &mut y, false, false)
            .unwrap_err()
            .to_string();
        // Whichever of the two ran first: the load of the pushed bytes, or the push over bytes
        // the load read (which names the load too).
        assert!(
            e.contains("data race: rank")
                && (e.contains(" reads window #0 ([1, 64] f32; `win` of `push_then_load`) elements 0..64 on rank ")
                    || e.contains(" writes window #0 ([1, 64] f32; `win` of `push_then_load`) elements 0..64 on rank "))
                && e.contains(&format!(
                    "tests/errors.rs:{}:",
                    line("// marker: the unordered load")
                )),
            "run {run}: {e}"
        );
        let e = push_step
            .launch(&s, &x, &mut y, false, true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(" writes window #0 ([1, 64] f32; `win` of `two_writers`) elements 0..64 on rank 0, which rank ")
                && e.contains(
                    "also wrote with no notify -> wait (or barrier) ordering the two writes"
                )
                && e.contains(&format!(
                    "tests/errors.rs:{}:",
                    line("// marker: the second of two")
                )),
            "run {run}: {e}"
        );
    }
    push_step.launch(&s, &x, &mut y, true, false).unwrap();
    for r in 0..3 {
        let from = (r + 2) % 3;
        eagle_runner::check_bits(
            "y",
            &y.data()[r * SIZE..(r + 1) * SIZE],
            &x.data()[from * SIZE..(from + 1) * SIZE],
        )
        .unwrap();
    }
}

#[eagle::kernel(device)]
pub fn busy_or_waiting(ctx: Ctx, sig: Window<i32, 1, 1>, out: Out<Tensor<f32, 1>>) {
    if rank(ctx) == 0 {
        wait(sig, [0, 0], 1, Eq); // marker: the wait that times out
    } else {
        // Busy for a while (the result is stored, so the loop is real work).
        let mut k = 0;
        for i in 0..200000000 {
            k += i % 7;
        }
        store(out, [0], load(out, [0], [1]) + k as f32);
    }
}

#[eagle::host]
pub fn slow_peer(out: Out<Tensor<f32, NR, 1>>) {
    let buf = alloc_window_buffer([1, 1], i32);
    for r in 0..world_size() {
        busy_or_waiting(window(buf, [1, 1], i32), out[r], device = r);
    }
}

#[test]
fn wait_timeout_is_configurable() {
    // Rank 1 is busy (not blocked), so this is no deadlock; the timeout ends rank 0's wait.
    let s = Session::sim(2)
        .unwrap()
        .with_wait_timeout(std::time::Duration::from_secs(0));
    let mut out = Tensor::<f32>::zeros(&[2, 1]);
    match slow_peer.launch(&s, &mut out).unwrap_err() {
        Error::Runtime(RuntimeError::RankFailed {
            rank,
            cause: Cause::WaitTimeout(message),
        }) => {
            assert_eq!(rank, 0);
            assert!(message.contains("did not complete within 0 s"), "{message}");
        }
        other => panic!("expected a timeout on rank 0, got {other:?}"),
    }
}

#[test]
fn unbound_and_oversized_dims_are_named() {
    use eagle::codegen::{specialize, Bindings};
    let m = pinned::module().unwrap();
    // `runtime_oob` uses NR; specializing without it names the argument and the dim.
    let m2 = runtime_oob::module().unwrap();
    match specialize(&m2, &Bindings::world(2)).unwrap_err() {
        SpecializeError::UnboundDim {
            function,
            place,
            name,
        } => {
            assert_eq!(
                (function.as_str(), place.as_str(), name.as_str()),
                ("runtime_oob", "argument `x`, dimension 0", "NR")
            );
        }
        other => panic!("expected UnboundDim, got {other:?}"),
    }
    match specialize(&m2, &Bindings::world(2).with("NR", 1 << 40)).unwrap_err() {
        SpecializeError::TooLarge {
            function,
            what,
            limit,
            ..
        } => {
            assert_eq!(
                (function.as_str(), what.as_str(), limit),
                ("runtime_oob", "a tensor or window", 1 << 40)
            );
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(specialize(&m, &Bindings::world(2)).is_ok());
}

#[eagle::kernel(device)]
pub fn put_mismatch(ctx: Ctx, x: Tensor<f32, 1, 32>, win: Window<f32, 1, SIZE>) {
    put(win, 0, x);
}

#[eagle::host]
pub fn wrong_view(y: Out<Tensor<f32, NR, 1, SIZE>>) {
    let buf = alloc_window_buffer([1, SIZE], f32);
    for r in 0..world_size() {
        copy_next(y[r], y[r], window(buf, [1, SIZE], i32), device = r);
    }
}

#[test]
fn mismatched_put_and_window_views_are_named() {
    let e = put_mismatch::module().unwrap_err().to_string();
    assert!(
        e.contains("destination is `[1, 64], f32` but source is `[1, 32], f32`; put/get copy whole buffers of the same shape and dtype"),
        "{e}"
    );
    let e = wrong_view::module().unwrap_err().to_string();
    assert!(
        e.contains(
            "window viewed as `[1, 64], i32` but the buffer was allocated as `[1, 64], f32`"
        ),
        "{e}"
    );
}

#[eagle::kernel(device)]
pub fn unsigned_peer(ctx: Ctx, win: Window<f32, 1, SIZE>, y: Out<Tensor<f32, 1, SIZE>>) {
    let me = rank(ctx) as u32;
    let n = nranks(ctx) as u32;
    let peer = (me - 1) % n;
    store(
        y,
        [0, 0],
        remote_load(win, peer as usize, [0, 0], [1, SIZE]),
    );
}

#[eagle::host]
pub fn unsigned_negative_peer(y: Out<Tensor<f32, NR, 1, SIZE>>) {
    let buf = alloc_window_buffer([1, SIZE], f32);
    for r in 0..world_size() {
        unsigned_peer(window(buf, [1, SIZE], f32), y[r], device = r);
    }
}

#[test]
fn negative_peer_on_unsigned_values_is_flagged_too() {
    // `(me - 1) % n` on u32 wraps on rank 0 instead of going negative; the range analysis
    // works on the mathematical values, so it is flagged the same way, before anything runs.
    let s = Session::sim(4).unwrap();
    let mut y = Tensor::<f32>::zeros(&[4, 1, SIZE]);
    match specialize_err(unsigned_negative_peer.launch(&s, &mut y).unwrap_err()) {
        SpecializeError::NegativePeer { function, lo, .. } => {
            assert_eq!((function.as_str(), lo), ("unsigned_peer", -1));
        }
        other => panic!("expected NegativePeer, got {other:?}"),
    }
}

/// Pulls from the previous rank, guarded so that rank 0 does not.
#[eagle::kernel(device)]
pub fn guarded_prev(
    ctx: Ctx,
    x: Tensor<f32, 1, SIZE>,
    y: Out<Tensor<f32, 1, SIZE>>,
    win: Window<f32, 1, SIZE>,
) {
    let me = rank(ctx);
    store(win, [0, 0], load(x, [0, 0], [1, SIZE]));
    barrier(ctx);
    if me > 0 {
        store(y, [0, 0], remote_load(win, me - 1, [0, 0], [1, SIZE]));
    }
}

/// Pulls from the next rank, guarded so that the last rank does not.
#[eagle::kernel(device)]
pub fn guarded_next(
    ctx: Ctx,
    x: Tensor<f32, 1, SIZE>,
    y: Out<Tensor<f32, 1, SIZE>>,
    win: Window<f32, 1, SIZE>,
) {
    let me = rank(ctx);
    let n = nranks(ctx);
    store(win, [0, 0], load(x, [0, 0], [1, SIZE]));
    barrier(ctx);
    if me + 1 < n {
        store(y, [0, 0], remote_load(win, me + 1, [0, 0], [1, SIZE]));
    }
}

#[eagle::host]
pub fn prev_host(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>) {
    let buf = alloc_window_buffer([1, SIZE], f32);
    for r in 0..world_size() {
        guarded_prev(x[r], y[r], window(buf, [1, SIZE], f32), device = r);
    }
}

#[eagle::host]
pub fn next_host(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>) {
    let buf = alloc_window_buffer([1, SIZE], f32);
    for r in 0..world_size() {
        guarded_next(x[r], y[r], window(buf, [1, SIZE], f32), device = r);
    }
}

#[test]
fn a_peer_guarded_by_its_branch_condition_is_not_flagged() {
    for p in 1..=4 {
        let s = Session::sim(p).unwrap();
        let x = eagle_runner::random_tensor(&[p, 1, SIZE], 40 + p as u64);
        let mut y = Tensor::<f32>::zeros(&[p, 1, SIZE]);
        prev_host
            .launch(&s, &x, &mut y)
            .unwrap_or_else(|e| panic!("prev at P = {p}: {e}"));
        for r in 0..p {
            let want = if r > 0 {
                x.row(r - 1)
            } else {
                &[0.0; SIZE][..]
            };
            assert_eq!(y.row(r), want, "prev at P = {p}, rank {r}");
        }
        let mut y = Tensor::<f32>::zeros(&[p, 1, SIZE]);
        next_host
            .launch(&s, &x, &mut y)
            .unwrap_or_else(|e| panic!("next at P = {p}: {e}"));
        for r in 0..p {
            let want = if r + 1 < p {
                x.row(r + 1)
            } else {
                &[0.0; SIZE][..]
            };
            assert_eq!(y.row(r), want, "next at P = {p}, rank {r}");
        }
        // The unguarded `(me - 1) % n` stays flagged at every P >= 2 (at P = 1 it is 0).
        if p >= 2 {
            let mut y = Tensor::<f32>::zeros(&[p, 1, SIZE]);
            match specialize_err(negative_peer.launch(&s, &mut y).unwrap_err()) {
                SpecializeError::NegativePeer { lo, .. } => assert_eq!(lo, -1, "P = {p}"),
                other => panic!("P = {p}: {other:?}"),
            }
        }
    }
}

/// The world dimension pinned to 4, larger than the world at P = 1..3.
#[eagle::host]
pub fn pinned4(x: Tensor<f32, 4, 1, SIZE>, y: Out<Tensor<f32, 4, 1, SIZE>>) {
    let buf = alloc_window_buffer([1, SIZE], f32);
    for r in 0..world_size() {
        copy_next(x[r], y[r], window(buf, [1, SIZE], f32), device = r);
    }
}

#[test]
fn a_pinned_world_dim_larger_than_the_world_is_an_error_too() {
    let x = eagle_runner::random_tensor(&[4, 1, SIZE], 3);
    for p in 1..=3 {
        let s = Session::sim(p).unwrap();
        let mut y = Tensor::<f32>::zeros(&[4, 1, SIZE]);
        let e = specialize_err(pinned4.launch(&s, &x, &mut y).unwrap_err());
        assert_eq!(
            e,
            SpecializeError::WorldDimPinned {
                function: "pinned4".into(),
                argument: "x".into(),
                dim: 0,
                extent: 4,
                world_size: p as u64,
                loc: None,
            }
            .with_loc_of(&e)
        );
        let line = include_str!("errors.rs")
            .lines()
            .position(|l| l.starts_with("pub fn pinned4"))
            .unwrap()
            + 4;
        assert!(
            e.to_string()
                .contains(&format!("(at tests/errors.rs:{line}:")),
            "{e}"
        );
        assert!(e
            .to_string()
            .contains("declare the world dimension with `dynamic!`"));
        assert!(y.data().iter().all(|v| *v == 0.0), "nothing ran at P = {p}");
    }
    // At P = 4 the constant matches the world, and it runs.
    let s = Session::sim(4).unwrap();
    let mut y = Tensor::<f32>::zeros(&[4, 1, SIZE]);
    pinned4.launch(&s, &x, &mut y).unwrap();
    assert_eq!(y.row(3), x.row(0));
}

#[eagle::host]
pub fn dynamic_shift(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>) {
    let buf = alloc_window_buffer([1, SIZE], f32);
    for r in 0..world_size() {
        copy_next(x[r], y[r], window(buf, [1, SIZE], f32), device = r);
    }
}

#[test]
fn a_dynamic_world_dim_bound_to_another_size_names_the_binding_argument() {
    let s = Session::sim(3).unwrap();
    for rows in [2usize, 4] {
        let x = eagle_runner::random_tensor(&[rows, 1, SIZE], 4);
        let mut y = Tensor::<f32>::zeros(&[rows, 1, SIZE]);
        let e = specialize_err(dynamic_shift.launch(&s, &x, &mut y).unwrap_err());
        assert_eq!(
            e,
            SpecializeError::WorldDimBound {
                function: "dynamic_shift".into(),
                argument: "x".into(),
                dim: 0,
                name: "NR".into(),
                extent: rows as u64,
                bound_by: "argument `x`".into(),
                world_size: 3,
            }
        );
        let msg = e.to_string();
        assert!(
            msg.contains(&format!(
                "the world dimension `NR` was bound to {rows} by argument `x`, but the session has 3 devices"
            )),
            "{msg}"
        );
        assert!(!msg.contains("pinned"), "{msg}");
        assert!(!msg.contains("declare the world dimension"), "{msg}");
        assert!(
            msg.contains(&format!(", or run on {rows} devices")),
            "{msg}"
        );
    }
    // An empty argument binds NR = 0: the message does not suggest running on 0 devices.
    let x = Tensor::<f32>::zeros(&[0, 1, SIZE]);
    let mut y = Tensor::<f32>::zeros(&[0, 1, SIZE]);
    let msg = dynamic_shift
        .launch(&s, &x, &mut y)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("the world dimension `NR` was bound to 0"),
        "{msg}"
    );
    assert!(!msg.contains("run on 0 devices"), "{msg}");
}

/// `{:?}` of a launch report is a short summary, not the artifact's IR and code (issue 35,
/// item 9).
#[test]
fn a_launch_report_debugs_as_a_one_line_summary() {
    let s = Session::sim(3).unwrap();
    let x = eagle_runner::random_tensor(&[3, 1, SIZE], 4);
    let mut y = Tensor::<f32>::zeros(&[3, 1, SIZE]);
    let r = dynamic_shift.launch(&s, &x, &mut y).unwrap();
    let d = format!("{r:?}");
    assert!(d.starts_with("LaunchReport { compile_time: "), "{d}");
    assert!(
        d.contains("artifact: `dynamic_shift` for Cpu at P=3"),
        "{d}"
    );
    assert!(!d.contains('\n') && d.len() < 400, "{} bytes: {d}", d.len());
    assert!(
        !d.contains("alloc_window_buffer"),
        "the IR is not printed: {d}"
    );
}

/// Waits for a count that is a loop variable (`usize`) where the signal holds `i32`.
#[eagle::kernel]
pub fn wait_on_loop_var(ctx: Ctx, sig: Window<i32, 1, 1>) {
    let n = nranks(ctx);
    for i in 0..n {
        wait(sig, [0, 0], i + 1, Ge);
    }
}

/// An `i32` value where a `usize` offset belongs.
#[eagle::kernel]
pub fn i32_offset(ctx: Ctx, x: Tensor<f32, 1, SIZE>, y: Out<Tensor<f32, 1, SIZE>>) {
    let o = rank(ctx) as i32;
    store(y, [0, 0], load(x, [0, o], [1, 1]));
}

#[test]
fn an_index_value_where_another_dtype_belongs_names_the_cast() {
    let e = wait_on_loop_var::module().unwrap_err().to_string();
    assert!(
        e.contains(
            "operand value must be an `i32` scalar, found `index`; convert it with `as i32`"
        ),
        "{e}"
    );
    let e = i32_offset::module().unwrap_err().to_string();
    assert!(
        e.contains("must be an `index` scalar, found `i32`; convert it with `as usize`"),
        "{e}"
    );
}

/// Writes and reads elements of a 2-D window: `w[i][j] = v`, `w[i][j] += v`, `w[i][j]`.
#[eagle::kernel(device)]
pub fn window_elements(ctx: Ctx, y: Out<Tensor<f32, 16>>, w: Window<f32, NR, 16>) {
    let me = rank(ctx);
    for j in 0..16 {
        w[me][j] = (me * 100 + j) as f32;
        w[me][j] += 0.5;
    }
    barrier(ctx);
    for j in 0..16 {
        y[j] = w[me][j] * 2.0;
    }
}

#[eagle::host]
pub fn window_elements_host(y: Out<Tensor<f32, NR, 16>>) {
    let buf = alloc_window_buffer([NR, 16], f32);
    for r in 0..world_size() {
        window_elements(y[r], window(buf, [NR, 16], f32), device = r);
    }
}

#[test]
fn a_2d_window_is_indexed_one_element_per_dim() {
    for p in 1..=3 {
        let s = Session::sim(p).unwrap();
        let mut y = Tensor::<f32>::zeros(&[p, 16]);
        window_elements_host.launch(&s, &mut y).unwrap();
        for r in 0..p {
            let want: Vec<f32> = (0..16)
                .map(|j| ((r * 100 + j) as f32 + 0.5) * 2.0)
                .collect();
            assert_eq!(y.row(r), &want[..], "P = {p}, rank {r}");
        }
    }
    // The IR names every index: one `set_elem` and `elem` with two indices.
    let ir = window_elements.ir().unwrap();
    assert!(ir.contains("set_elem") && ir.contains("elem"), "{ir}");
}

#[eagle::kernel(device)]
pub fn put_scalar(ctx: Ctx, k: f32, y: Out<Tensor<f32, 1, 2>>) {
    y[0][0] = k;
    y[0][1] = rank(ctx) as f32;
}

/// A host that computes a scalar with a variable and `fma` before dispatching it.
#[eagle::host]
pub fn host_arith(y: Out<Tensor<f32, NR, 1, 2>>) {
    let mut acc = 0.5f32;
    for r in 0..world_size() {
        acc += r as f32;
    }
    let k = fma(acc, 2.0, 0.25);
    for r in 0..world_size() {
        put_scalar(k, y[r], device = r);
    }
}

#[test]
fn a_host_function_runs_variables_and_fma() {
    // Once `rank 0 failed: device operation in a host function` at run time.
    let s = Session::sim(3).unwrap();
    let mut y = Tensor::<f32>::zeros(&[3, 1, 2]);
    host_arith.launch(&s, &mut y).unwrap();
    // acc = 0.5 + 0 + 1 + 2 = 3.5; fma(3.5, 2, 0.25) = 7.25 on every rank.
    assert_eq!(y.data(), &[7.25, 0.0, 7.25, 1.0, 7.25, 2.0]);
}

#[test]
fn device_work_in_a_host_function_is_a_verifier_error() {
    for (body, what) in [
        (
            "%2 = const 0 : index\n  %3 = elem %0[%2] : f32",
            "element access",
        ),
        (
            "%2 = const 0 : index\n  %3 = load %0[%2] : tile<[4], f32>",
            "a tile load or store",
        ),
        (
            "%2 = const 0 : index\n  %3 = subview %0[%2..] : tensor<[2], f32>",
            "a sub-view",
        ),
    ] {
        let text = format!("host @h(%0 x: tensor<[4], f32>, %1 k: f32) {{\n  {body}\n}}\n");
        let m = parse_module(&text).unwrap();
        let e = verify_module(&m).unwrap_err();
        let IrError::Verify {
            function,
            op,
            message,
            ..
        } = &e
        else {
            panic!("expected a verifier error, got {e:?}");
        };
        assert_eq!(function, "h");
        assert!(op.starts_with("%3 = "), "{op}");
        assert!(message.starts_with(what), "{message}");
        assert!(message.contains("per-device program"), "{message}");
    }
}

/// The 1-based line of this file that holds `marker` (the source of a kernel below).
fn line_of(marker: &str) -> u32 {
    let src = include_str!("errors.rs");
    let hits: Vec<usize> = src
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(marker) && !l.contains("line_of("))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(
        hits.len(),
        1,
        "marker {marker:?} must be on exactly one line"
    );
    hits[0] as u32
}

/// A tile load in a host function: passes the macro, refused by the verifier.
#[eagle::host]
pub fn host_loads_a_tile(x: Tensor<f32, NR, 1, 2>, y: Out<Tensor<f32, NR, 1, 2>>) {
    let t = load(x, [0, 0, 0], [1, 1, 2]); // marker: host tile load
    for r in 0..world_size() {
        put_scalar(1.0, y[r], device = r);
    }
}

#[test]
fn a_verifier_error_names_the_rust_source_line() {
    let s = Session::sim(2).unwrap();
    let x = Tensor::<f32>::zeros(&[2, 1, 2]);
    let mut y = Tensor::<f32>::zeros(&[2, 1, 2]);
    let e = host_loads_a_tile.launch(&s, &x, &mut y).unwrap_err();
    let Error::Ir(IrError::Verify { function, loc, .. }) = &e else {
        panic!("expected a verifier error, got {e:?}");
    };
    assert_eq!(function, "host_loads_a_tile");
    let loc = loc.as_ref().expect("a macro-built op has a location");
    assert_eq!(&*loc.file, "tests/errors.rs");
    assert_eq!(loc.line, line_of("marker: host tile load"));
    // The column of `load(`.
    assert_eq!(loc.column, 13);
    let at = format!("(at tests/errors.rs:{}:13)", loc.line);
    assert!(e.to_string().contains(&at), "{e}");
}

#[test]
fn a_specialization_error_names_the_rust_source_line() {
    let s = Session::sim(2).unwrap();
    let x = eagle_runner::random_tensor(&[2, 1, SIZE], 3);
    let mut y = Tensor::<f32>::zeros(&[2, 1, SIZE]);
    let e = specialize_err(static_oob.launch(&s, &x, &mut y).unwrap_err());
    let SpecializeError::IndexOutOfBounds { loc: Some(loc), .. } = &e else {
        panic!("expected IndexOutOfBounds with a location, got {e:?}");
    };
    assert_eq!(loc.line, line_of("load(x, [0, 8], [1, SIZE])"));
    assert!(
        e.to_string()
            .contains(&format!("(at tests/errors.rs:{}:", loc.line)),
        "{e}"
    );
}

#[eagle::kernel(device)]
pub fn divide_by(ctx: Ctx, k: i32, y: Out<Tensor<i32, 1, 2>>) {
    y[0][0] = 10 / k; // marker: run-time division
    y[0][1] = rank(ctx) as i32;
}

#[eagle::host]
pub fn host_divides(k: i32, y: Out<Tensor<i32, NR, 1, 2>>) {
    for r in 0..world_size() {
        divide_by(k, y[r], device = r);
    }
}

#[test]
fn a_run_time_fault_names_the_rust_source_line() {
    let s = Session::sim(2).unwrap();
    let mut y = Tensor::<i32>::zeros(&[2, 1, 2]);
    host_divides.launch(&s, 5, &mut y).unwrap();
    assert_eq!(y.data(), &[2, 0, 2, 1]);
    let e = host_divides.launch(&s, 0, &mut y).unwrap_err();
    assert!(
        matches!(
            &e,
            Error::Runtime(RuntimeError::RankFailed {
                cause: Cause::Fault(_),
                ..
            })
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    let line = line_of("marker: run-time division");
    assert!(msg.contains("integer division by zero"), "{msg}");
    // The column of `10 / k`.
    assert!(
        msg.contains(&format!("(at tests/errors.rs:{line}:15)")),
        "{msg}"
    );
}

#[test]
fn deadlock_reports_races_and_wait_timeouts_name_the_rust_source_line() {
    // The deadlock report names each blocked wait's op and line.
    let s = Session::sim(2).unwrap();
    let Err(Error::Runtime(RuntimeError::Deadlock { report })) = deadlock.launch(&s) else {
        panic!("expected a deadlock");
    };
    let at = format!(
        "(at tests/errors.rs:{}:5)",
        line_of("marker: the wait that never ends")
    );
    assert_eq!(report.matches(&at).count(), 2, "{report}");
    assert!(report.contains("op `wait "), "{report}");
    // A race names the read.
    let x = eagle_runner::random_tensor(&[3, 1, SIZE], 11);
    let mut y = Tensor::<f32>::zeros(&[3, 1, SIZE]);
    let s3 = Session::sim(3).unwrap();
    let Err(Error::Runtime(RuntimeError::RankFailed {
        cause: Cause::Race(message),
        ..
    })) = wrong_handshake.launch(&s3, &x, &mut y)
    else {
        panic!("expected a race");
    };
    let at = format!("(at tests/errors.rs:{}:5)", line_of("marker: the racy get"));
    assert!(message.contains(&at), "{message}");
    assert!(message.contains("op `get "), "{message}");
    // A wait timeout names the wait.
    let s = Session::sim(2)
        .unwrap()
        .with_wait_timeout(std::time::Duration::from_secs(0));
    let mut out = Tensor::<f32>::zeros(&[2, 1]);
    let Err(Error::Runtime(RuntimeError::RankFailed {
        cause: Cause::WaitTimeout(message),
        ..
    })) = slow_peer.launch(&s, &mut out)
    else {
        panic!("expected a wait timeout");
    };
    let at = format!(
        "(at tests/errors.rs:{}:9)",
        line_of("marker: the wait that times out")
    );
    assert!(message.contains(&at), "{message}");
}

const WS: Dim = dynamic!("WS");

/// Puts `x` into a window of the same shape.
#[eagle::kernel(device)]
pub fn stage_rows(ctx: Ctx, x: Tensor<f32, WS, 2>, w: Window<f32, WS, 2>) {
    put(w, rank(ctx), x);
}

/// A host that passes a window of a fixed `[4, 2]` where the kernel wants `[WS, 2]`.
#[eagle::host]
pub fn stage_fixed(x: Tensor<f32, NR, WS, 2>) {
    let s = alloc_window_buffer([4, 2], f32);
    for r in 0..world_size() {
        stage_rows(x[r], window(s, [4, 2], f32), device = r);
    }
}

/// A window whose shape differs from the parameter's once the dims are bound: the error names
/// the host line, both types, and each binding with the argument (or the world size) that
/// bound it, so the user sees where `WS = 3` came from.
#[test]
fn a_window_of_another_shape_names_the_host_line_and_where_each_dim_was_bound() {
    let s = Session::sim(2).unwrap();
    let x = Tensor::<f32>::zeros(&[2, 3, 2]);
    let msg = stage_fixed.launch(&s, &x).unwrap_err().to_string();
    assert!(
        msg.starts_with("after binding dims (NR = 2 from argument `x`, WS = 3 from argument `x`): verifier: in function `stage_fixed`, op `dispatch @stage_rows("),
        "{msg}"
    );
    assert!(
        msg.contains("(at tests/errors.rs:")
            && msg.ends_with("argument `w` of `@stage_rows` must be `window<[3, 2], f32>`, found `window<[4, 2], f32>`"),
        "{msg}"
    );
}

/// Writes 7 into the last row of `w` and copies that row out.
#[eagle::kernel(device)]
pub fn last_row(ctx: Ctx, w: Window<f32, WS, 2>, y: Out<Tensor<f32, 1, 2>>) {
    store(w, [WS - 1, 0], full([1, 2], 7.0));
    store(y, [0, 0], load(w, [WS - 1, 0], [1, 2]));
}

/// `WS` appears in no argument: the `[4, 2]` window passed to `last_row` fixes it.
#[eagle::host]
pub fn infer_ws(y: Out<Tensor<f32, NR, 1, 2>>) {
    let s = alloc_window_buffer([4, 2], f32);
    for r in 0..world_size() {
        last_row(window(s, [4, 2], f32), y[r], device = r);
    }
}

/// Two windows of different rows passed to the same parameter.
#[eagle::host]
pub fn two_ws(y: Out<Tensor<f32, NR, 1, 2>>) {
    let s = alloc_window_buffer([4, 2], f32);
    let t = alloc_window_buffer([5, 2], f32);
    for r in 0..world_size() {
        last_row(window(s, [4, 2], f32), y[r], device = r);
        last_row(window(t, [5, 2], f32), y[r], device = r);
    }
}

/// A symbol of a kernel parameter that only a constant-shaped host buffer fixes is bound from
/// it (as a Rust generic is inferred), and a second buffer that disagrees is an error naming
/// where the first binding came from.
#[test]
fn a_constant_window_passed_to_a_symbolic_parameter_binds_the_symbol() {
    let s = Session::sim(2).unwrap();
    let mut y = Tensor::<f32>::zeros(&[2, 1, 2]);
    let report = infer_ws.launch(&s, &mut y).unwrap();
    assert_eq!(y.data(), &[7.0; 4]);
    assert!(format!("{report:?}").contains("WS=4"), "{report:?}");
    let msg = two_ws.launch(&s, &mut y).unwrap_err().to_string();
    assert!(
        msg.starts_with("after binding dims (NR = 2 from argument `y`, WS = 4 from the `window<[4, 2], f32>` passed as `w` to `last_row` at tests/errors.rs:"),
        "{msg}"
    );
    assert!(
        msg.ends_with("argument `w` of `@last_row` must be `window<[4, 2], f32>`, found `window<[5, 2], f32>`"),
        "{msg}"
    );
}
