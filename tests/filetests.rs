//! File tests, Cranelift-style: every `tests/filetests/**/*.eir` file is an IR module with a
//! header that says what to run and the expected result in comments.
//!
//! ```text
//! ; test: specialize P=3 NR=3        what to run (one line)
//! ; arg: k = 5                       a scalar argument of a `run` (others default)
//! <the module, in IR text>
//! ; error: result type must be       the command fails; its message contains this text
//! ; contains: eg_f_scale             the output contains this text (`cuda`)
//! ; lacks: > 999ull                  the output does not contain this text (`cuda`)
//! ; out: host @h(...) {              the expected output, line by line
//! ```
//!
//! Commands: `parse` (the text round-trips; the output is the printed module), `verify`,
//! `specialize P=n [DIM=v ...]` (the output is the specialized IR), `cpu P=n` (the CPU backend
//! compiles it), `cuda P=n` (the CUDA C emission; the output is the kernels), and `run P=n`
//! (the last host function runs on `sim`, and in the CUDA emulation, which must agree; input
//! tensor `j` holds `i * 0.25 + j` (floats) or `i + 10 j` (integers) at element `i`; the
//! output lists every `out` tensor).
//!
//! `EAGLE_BLESS=1 cargo test --test filetests` rewrites the `; out:` lines from what the
//! command printed (review the diff).
use eagle::codegen::{compile, specialize, Bindings, Target};
use eagle::ir::eval::Scalar;
use eagle::ir::{parse_module, print_module, verify_module, DType, Level, Module, Type};
use eagle::runtime::{run_with, Arg, RunOptions};
use std::path::{Path, PathBuf};

#[cfg(feature = "cuda")]
mod emulation;

struct FileTest {
    command: String,
    args: Vec<(String, String)>,
    errors: Vec<String>,
    contains: Vec<String>,
    lacks: Vec<String>,
    out: Vec<String>,
    source: String,
}

fn read(path: &Path) -> FileTest {
    let text = std::fs::read_to_string(path).unwrap();
    let mut t = FileTest {
        command: String::new(),
        args: vec![],
        errors: vec![],
        contains: vec![],
        lacks: vec![],
        out: vec![],
        source: String::new(),
    };
    for line in text.lines() {
        if let Some(c) = line.strip_prefix("; test: ") {
            t.command = c.trim().to_string();
        } else if let Some(a) = line.strip_prefix("; arg: ") {
            let (k, v) = a.split_once('=').expect("`; arg: name = value`");
            t.args.push((k.trim().to_string(), v.trim().to_string()));
        } else if let Some(e) = line.strip_prefix("; error: ") {
            t.errors.push(e.to_string());
        } else if let Some(c) = line.strip_prefix("; contains: ") {
            t.contains.push(c.to_string());
        } else if let Some(c) = line.strip_prefix("; lacks: ") {
            t.lacks.push(c.to_string());
        } else if let Some(o) = line.strip_prefix("; out:") {
            t.out.push(o.strip_prefix(' ').unwrap_or(o).to_string());
        } else if !line.starts_with("; ") && line != ";" {
            t.source.push_str(line);
            t.source.push('\n');
        }
    }
    assert!(
        !t.command.is_empty(),
        "{}: no `; test:` line",
        path.display()
    );
    t
}

/// `P=4 NR=4` as bindings.
fn bindings(words: &[&str]) -> Bindings {
    let mut p = 1;
    let mut dims = vec![];
    for w in words {
        let (k, v) = w
            .split_once('=')
            .unwrap_or_else(|| panic!("bad binding `{w}`"));
        let v: u64 = v.parse().unwrap_or_else(|_| panic!("bad binding `{w}`"));
        if k == "P" {
            p = v;
        } else {
            dims.push((k.to_string(), v));
        }
    }
    dims.into_iter()
        .fold(Bindings::world(p), |b, (k, v)| b.with(&k, v))
}

fn root(m: &Module) -> String {
    m.functions
        .iter()
        .rev()
        .find(|f| f.level == Level::Host)
        .map(|f| f.name.clone())
        .expect("a `run` needs a host function")
}

/// What `command` prints for the module, or its error message.
fn run_command(t: &FileTest) -> Result<String, String> {
    let words: Vec<&str> = t.command.split_whitespace().collect();
    let m = parse_module(&t.source).map_err(|e| e.to_string())?;
    match words[0] {
        "parse" => {
            let text = print_module(&m);
            let again = parse_module(&text).map_err(|e| e.to_string())?;
            assert_eq!(
                print_module(&again),
                text,
                "the printed module does not round-trip"
            );
            Ok(text)
        }
        "verify" => verify_module(&m)
            .map(|()| String::new())
            .map_err(|e| e.to_string()),
        "specialize" => {
            verify_module(&m).map_err(|e| e.to_string())?;
            let s = specialize(&m, &bindings(&words[1..])).map_err(|e| e.to_string())?;
            Ok(print_module(&s))
        }
        "cpu" | "cuda" => {
            verify_module(&m).map_err(|e| e.to_string())?;
            let target = if words[0] == "cpu" {
                Target::Cpu
            } else {
                Target::Cuda
            };
            let (art, _) = compile(&m, &root(&m), &bindings(&words[1..]), target)
                .map_err(|e| e.to_string())?;
            Ok(match (&art.cuda, target) {
                (Some(c), Target::Cuda) => c.kernels().to_string(),
                _ => String::new(),
            })
        }
        "run" => {
            verify_module(&m).map_err(|e| e.to_string())?;
            let b = bindings(&words[1..]);
            let sim = run_on(t, &m, &b, Target::Cpu, &RunOptions::default());
            #[cfg(feature = "cuda")]
            {
                emulation::cxx();
                let opts = RunOptions {
                    platform: eagle::runtime::Platform::Cuda,
                    devices: (0..b.world_size as usize).collect(),
                    cuda_emulate: true,
                    ..RunOptions::default()
                };
                let emu = run_on(t, &m, &b, Target::Cuda, &opts)
                    .map_err(|e| e.replace(" (in the CUDA emulation)", ""));
                assert_eq!(sim, emu, "sim and the CUDA emulation disagree");
            }
            sim
        }
        c => panic!("unknown command `{c}`"),
    }
}

/// Input element `i` of tensor argument `j`.
fn input(d: DType, i: usize, j: usize) -> Scalar {
    match d {
        DType::F32 => Scalar::F32(i as f32 * 0.25 + j as f32),
        DType::F64 => Scalar::F64(i as f64 * 0.25 + j as f64),
        DType::Bool => Scalar::Bool((i + j) % 2 == 1),
        d => eagle::ir::eval::cast(Scalar::I64((i + 10 * j) as i64), d),
    }
}

fn run_on(
    t: &FileTest,
    m: &Module,
    b: &Bindings,
    target: Target,
    opts: &RunOptions,
) -> Result<String, String> {
    let name = root(m);
    let (art, _) = compile(m, &name, b, target).map_err(|e| e.to_string())?;
    let f = art.module.function(&name).expect("the root").clone();
    let mut bufs: Vec<Vec<u8>> = vec![];
    let mut scalars = vec![];
    for (j, p) in f.params.iter().enumerate() {
        match f.ty(p.value) {
            Type::Tensor(s, d) => {
                let n: usize = s.0.iter().map(|x| x.as_const().unwrap() as usize).product();
                let mut bytes = vec![0u8; n * d.size()];
                if !p.out {
                    for i in 0..n {
                        let v = input(*d, i, j).bits().to_le_bytes();
                        bytes[i * d.size()..(i + 1) * d.size()].copy_from_slice(&v[..d.size()]);
                    }
                }
                bufs.push(bytes);
            }
            Type::Scalar(d) => {
                let given = t.args.iter().find(|(k, _)| *k == p.name).map(|(_, v)| v);
                let c = match given {
                    Some(v) => {
                        parse_module(&format!("compute @c() {{\n  %0 = const {v} : {d}\n}}\n"))
                            .ok()
                            .and_then(|m| {
                                match &m.functions[0].op(m.functions[0].body.ops[0]).kind {
                                    eagle::ir::OpKind::Const(c) => Some(*c),
                                    _ => None,
                                }
                            })
                            .unwrap_or_else(|| panic!("bad argument `{}` = `{v}`", p.name))
                    }
                    None => input(*d, 2, j).to_const(),
                };
                scalars.push((j, c, *d));
                bufs.push(vec![]);
            }
            other => panic!("a host parameter of type `{other}`"),
        }
    }
    let mut args: Vec<Arg> = vec![];
    for (j, (p, buf)) in f.params.iter().zip(bufs.iter_mut()).enumerate() {
        match f.ty(p.value) {
            Type::Tensor(s, d) => {
                let shape = s.0.iter().map(|x| x.as_const().unwrap() as usize).collect();
                args.push(if p.out {
                    Arg::Out(shape, *d, buf)
                } else {
                    Arg::In(shape, *d, (&buf[..]).into())
                });
            }
            _ => {
                let (_, c, d) = scalars.iter().find(|s| s.0 == j).unwrap();
                args.push(Arg::Scalar(*c, *d));
            }
        }
    }
    run_with(&art, &mut args, b.world_size as usize, opts).map_err(|e| e.to_string())?;
    drop(args);
    let mut out = String::new();
    for (p, buf) in f.params.iter().zip(&bufs) {
        if let (true, Type::Tensor(_, d)) = (p.out, f.ty(p.value)) {
            let vals: Vec<String> = buf
                .chunks(d.size())
                .map(|c| {
                    let mut b = [0u8; 8];
                    b[..c.len()].copy_from_slice(c);
                    Scalar::from_bits(u64::from_le_bytes(b), *d)
                        .to_const()
                        .to_string()
                })
                .collect();
            out.push_str(&format!("{} = [{}]\n", p.name, vals.join(", ")));
        }
    }
    Ok(out)
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|e| e == "eir") {
            out.push(p);
        }
    }
}

/// Checks one file; `Err` says how it failed.
fn check(path: &Path, bless: bool) -> Result<(), String> {
    let t = read(path);
    let got = run_command(&t);
    match (&got, t.errors.is_empty()) {
        (Err(e), false) => {
            for want in &t.errors {
                if !e.contains(want.as_str()) {
                    return Err(format!("the error lacks `{want}`:\n  {e}"));
                }
            }
            Ok(())
        }
        (Err(e), true) => Err(format!("unexpected error:\n  {e}")),
        (Ok(_), false) => Err(format!("expected an error containing {:?}", t.errors)),
        (Ok(text), true) => {
            for c in &t.contains {
                if !text.contains(c.as_str()) {
                    return Err(format!("the output lacks `{c}`"));
                }
            }
            for c in &t.lacks {
                if text.contains(c.as_str()) {
                    return Err(format!("the output contains `{c}`"));
                }
            }
            let lines: Vec<String> = text.lines().map(str::to_string).collect();
            if t.contains.is_empty() && t.lacks.is_empty() && lines != t.out {
                if bless {
                    bless_file(path, &lines);
                    return Ok(());
                }
                return Err(format!(
                    "the output differs (EAGLE_BLESS=1 rewrites it):\n--- expected\n{}\n--- got\n{}",
                    t.out.join("\n"),
                    text
                ));
            }
            Ok(())
        }
    }
}

fn bless_file(path: &Path, lines: &[String]) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut kept: Vec<&str> = text.lines().filter(|l| !l.starts_with("; out:")).collect();
    while kept.last().is_some_and(|l| l.is_empty()) {
        kept.pop();
    }
    let mut s = kept.join("\n");
    s.push('\n');
    for l in lines {
        s.push_str(if l.is_empty() { "; out:" } else { "; out: " });
        s.push_str(l);
        s.push('\n');
    }
    std::fs::write(path, s).unwrap();
}

#[test]
fn filetests() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let mut all = vec![];
    files(&dir, &mut all);
    let bless = std::env::var_os("EAGLE_BLESS").is_some_and(|v| v == "1");
    let mut failed = vec![];
    for p in &all {
        let name = p.strip_prefix(&dir).unwrap().display().to_string();
        match check(p, bless) {
            Ok(()) => println!("ok   {name}"),
            Err(e) => {
                println!("FAIL {name}: {e}");
                failed.push(name);
            }
        }
    }
    assert!(all.len() >= 60, "only {} file tests", all.len());
    assert!(
        failed.is_empty(),
        "{} of {} file tests failed: {failed:?}",
        failed.len(),
        all.len()
    );
}
