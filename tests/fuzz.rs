//! Property tests: arbitrary and mutated IR text through the parser, verifier, printer,
//! specializer and CPU backend, and arbitrary bindings through `specialize`. The property is
//! always "an `Ok` or an error value, never a panic"; for text that verifies, also the round
//! trip. The number of cases is bounded so the suite stays fast.

use eagle::codegen::{self, Bindings};
use eagle::ir::{parse_module, print_module, verify_module, EagleFn, Module};
use proptest::prelude::*;

#[path = "../examples/07_dynamic_rank_count.rs"]
#[allow(dead_code)]
mod step07;
#[path = "../examples/11_builtin_allreduce.rs"]
#[allow(dead_code)]
mod step11;
#[path = "../examples/15_all_to_all.rs"]
#[allow(dead_code)]
mod step15;
#[path = "../examples/16_several_collectives.rs"]
#[allow(dead_code)]
mod step16;

fn corpus() -> Vec<Module> {
    vec![
        step07::ring_get::module().unwrap(),
        step11::builtin_ring::module().unwrap(),
        step15::all_to_all_step::module().unwrap(),
        step16::several::module().unwrap(),
    ]
}

const VOCAB: &[&str] = &[
    "%0",
    "%1",
    "%7",
    "%99",
    "@ring_get",
    "@per_rank_get",
    "const",
    "index",
    "f32",
    "i32",
    "tensor<[NR, 1, 64], f32>",
    "window<[1, 64], f32>",
    "tile<[1, 64], f32>",
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    ",",
    ":",
    "=",
    "..",
    "for",
    "if",
    "else",
    "load",
    "store",
    "get",
    "put",
    "dispatch",
    "device",
    "rank",
    "nranks",
    "world_size",
    "barrier",
    "notify",
    "wait",
    "set",
    "eq",
    "-1",
    "0",
    "18446744073709551615",
    "1e308",
    "NaN",
    "out",
    "host",
    "device",
    "compute",
    "allreduce",
    "sum",
    "ring",
    "subview",
    "\n",
];

/// Applies one edit to `text`: delete a range, insert a token, or duplicate a line.
fn mutate(text: &str, kind: u8, at: usize, len: usize, tok: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    let n = chars.len().max(1);
    let at = at % n;
    match kind % 3 {
        0 => {
            let end = (at + len % 40).min(chars.len());
            chars[..at].iter().chain(&chars[end..]).collect()
        }
        1 => {
            let t = format!(" {} ", VOCAB[tok % VOCAB.len()]);
            chars[..at].iter().collect::<String>() + &t + &chars[at..].iter().collect::<String>()
        }
        _ => {
            let lines: Vec<&str> = text.lines().collect();
            let i = at % lines.len().max(1);
            let mut out: Vec<&str> = lines.clone();
            if let Some(l) = lines.get(i) {
                out.insert((i + len) % (lines.len() + 1), l);
            }
            out.join("\n")
        }
    }
}

/// Everything downstream of a successful parse: verify, round trip, specialize, compile.
fn exercise(m: &Module, p: u64) {
    if verify_module(m).is_err() {
        return;
    }
    let text = print_module(m);
    let again = parse_module(&text).expect("printed IR parses");
    assert_eq!(
        print_module(&again),
        text,
        "round trip of a verified module"
    );
    if let Ok(s) = codegen::specialize(
        m,
        &Bindings::world(p).with("NR", p).with("N", 16).with("M", 3),
    ) {
        let root = s
            .functions
            .iter()
            .find(|f| f.level == eagle::ir::Level::Host)
            .map(|f| f.name.clone());
        if let Some(root) = root {
            let _ = codegen::compile(
                m,
                &root,
                &Bindings::world(p).with("NR", p).with("N", 16).with("M", 3),
                codegen::Target::Cpu,
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,300}") {
        if let Ok(m) = parse_module(&s) {
            exercise(&m, 2);
        }
    }

    #[test]
    fn mutated_ir_never_panics(
        which in 0usize..4,
        edits in proptest::collection::vec((any::<u8>(), any::<usize>(), any::<usize>(), any::<usize>()), 1..4),
        p in 1u64..6,
    ) {
        let mut text = print_module(&corpus()[which]);
        for (kind, at, len, tok) in edits {
            text = mutate(&text, kind, at, len, tok);
        }
        if let Ok(m) = parse_module(&text) {
            exercise(&m, p);
        }
    }

    #[test]
    fn arbitrary_bindings_never_panic(
        which in 0usize..4,
        p in prop_oneof![0u64..10, 4000u64..5000, Just(u64::MAX)],
        nr in prop_oneof![0u64..10, Just(u64::MAX), Just(1u64 << 40)],
        n in 0u64..3000,
    ) {
        let m = &corpus()[which];
        let b = Bindings::world(p).with("NR", nr).with("N", n).with("M", n % 7);
        if codegen::specialize(m, &b).is_ok() {
            let root = m.functions.last().map(|f| f.name.clone()).unwrap_or_default();
            let _ = codegen::compile(m, &root, &b, codegen::Target::Cpu);
        }
    }
}
