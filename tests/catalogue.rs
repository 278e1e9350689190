//! Every entry of `docs/errors.md` names the tests that check it; this fails when a named test
//! does not exist (so the catalogue cannot drift from the suite), and when an entry has none.
//! A `file::test` lives in `tests/file.rs` or in `eagle-runner/tests/file.rs`.

#[test]
fn every_catalogue_entry_is_checked_by_an_existing_test() {
    let root = env!("CARGO_MANIFEST_DIR");
    let doc = std::fs::read_to_string(format!("{root}/docs/errors.md")).expect("docs/errors.md");
    let entries: Vec<&str> = doc.split("\n### ").skip(1).collect();
    assert!(entries.len() >= 25, "only {} entries", entries.len());
    for entry in entries {
        let title = entry.lines().next().unwrap_or_default();
        let tests: Vec<&str> = entry
            .lines()
            .filter(|l| l.starts_with("Test: ") || l.starts_with("Tests: "))
            .flat_map(|l| l.split('`').skip(1).step_by(2))
            .collect();
        assert!(!tests.is_empty(), "entry `{title}` names no test");
        for t in tests {
            let (file, name) = t
                .split_once("::")
                .unwrap_or_else(|| panic!("`{t}` is not file::test"));
            // The library's tests, or the runner's (command lines, exit codes).
            let src = ["tests", "eagle-runner/tests"]
                .iter()
                .find_map(|d| std::fs::read_to_string(format!("{root}/{d}/{file}.rs")).ok())
                .unwrap_or_else(|| panic!("entry `{title}`: no tests/{file}.rs"));
            assert!(
                src.contains(&format!("fn {name}()")),
                "entry `{title}`: tests/{file}.rs has no test `{name}`"
            );
        }
    }
}

/// The top-level modules of `crate_dir/src` (a file `x.rs` or a folder `x/`, with their files),
/// and the modules each reaches through `crate::` paths (re-exports of `lib.rs` resolved to the
/// module they come from). Comments are skipped.
fn module_graph(
    crate_dir: &str,
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    use std::collections::{BTreeMap, BTreeSet};
    let root = format!("{}/{crate_dir}/src", env!("CARGO_MANIFEST_DIR"));
    fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let strip = |t: &str| -> String {
        t.lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let mut mods: BTreeMap<String, Vec<std::path::PathBuf>> = BTreeMap::new();
    for e in std::fs::read_dir(&root).unwrap().flatten() {
        let p = e.path();
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        if p.is_dir() {
            let mut fs = vec![];
            files(&p, &mut fs);
            mods.insert(name, fs);
        } else if name != "lib" && name != "main" && p.extension().is_some_and(|x| x == "rs") {
            mods.insert(name, vec![p]);
        }
    }
    let idents = |s: &str| -> Vec<String> {
        s.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    };
    // `use m::{a, b as c};` and `pub use m::x as y;` in lib.rs: a, c, x, y name module m.
    let lib = strip(&std::fs::read_to_string(format!("{root}/lib.rs")).unwrap());
    let mut alias: BTreeMap<String, String> = BTreeMap::new();
    for stmt in lib.split(';') {
        let Some(rest) = stmt
            .trim()
            .strip_prefix("pub use ")
            .or_else(|| stmt.trim().strip_prefix("use "))
        else {
            continue;
        };
        let Some((m, tail)) = rest.split_once("::") else {
            continue;
        };
        if mods.contains_key(m.trim()) {
            for w in idents(tail) {
                alias.entry(w).or_insert_with(|| m.trim().to_string());
            }
        }
    }
    let resolve = |w: &str| -> Option<String> {
        if mods.contains_key(w) {
            Some(w.to_string())
        } else {
            alias.get(w).cloned()
        }
    };
    let mut graph = BTreeMap::new();
    for (m, fs) in &mods {
        let mut deps = BTreeSet::new();
        for f in fs {
            let t = strip(&std::fs::read_to_string(f).unwrap());
            for (i, _) in t.match_indices("crate::") {
                let after = &t[i + 7..];
                let names: Vec<String> = if let Some(group) = after.strip_prefix('{') {
                    idents(group.split('}').next().unwrap_or(""))
                } else {
                    idents(after).into_iter().take(1).collect()
                };
                for n in names {
                    if let Some(d) = resolve(&n).filter(|d| d != m) {
                        deps.insert(d);
                    }
                }
            }
        }
        graph.insert(m.clone(), deps);
    }
    graph
}

/// The groups of two or more modules that reach each other (strongly connected components).
fn module_cycles(crate_dir: &str) -> Vec<Vec<String>> {
    let g = module_graph(crate_dir);
    let reach = |from: &str| -> std::collections::BTreeSet<String> {
        let mut seen = std::collections::BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(m) = todo.pop() {
            for d in &g[&m] {
                if seen.insert(d.clone()) {
                    todo.push(d.clone());
                }
            }
        }
        seen
    };
    let mut groups: Vec<Vec<String>> = vec![];
    for m in g.keys() {
        let r = reach(m);
        let group: Vec<String> = g
            .keys()
            .filter(|o| *o == m || (r.contains(*o) && reach(o).contains(m)))
            .cloned()
            .collect();
        if group.len() > 1 && !groups.contains(&group) {
            groups.push(group);
        }
    }
    groups
}

/// Layers (issue 36, item 4): no two top-level modules of any crate reach each other. In
/// eagle-ir the op data (`ir`, with `TileOp` and `MathFn`) knows no semantics, the semantics
/// (`eval`, `math`, `tile`) no transform (`expand`, `narrow`); passes know no backend; no
/// executor imports the host interpreter.
#[test]
fn no_module_cycles_in_any_crate() {
    for c in [
        "eagle-ir",
        "eagle-codegen",
        "eagle-runtime",
        "eagle-macros",
        "eagle-runner",
        ".",
    ] {
        assert_eq!(module_cycles(c), Vec::<Vec<String>>::new(), "crate `{c}`");
    }
}

/// Every `.rs` file of the tree (not `target/`), with its text, and every other file's path.
fn tree() -> (Vec<(String, String)>, Vec<String>) {
    let root = env!("CARGO_MANIFEST_DIR");
    let (mut rs, mut all) = (vec![], vec![]);
    let mut todo = vec![std::path::PathBuf::from(root)];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            if name == "target" || (name.starts_with('.') && name != ".ci") {
                continue;
            }
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().to_string();
            if p.is_dir() {
                all.push(format!("{rel}/"));
                todo.push(p);
            } else {
                if name.ends_with(".rs") {
                    rs.push((rel.clone(), std::fs::read_to_string(&p).unwrap_or_default()));
                }
                all.push(rel);
            }
        }
    }
    (rs, all)
}

/// Whether `pat` (`*` any run of characters but `/`, `**` any path) matches `s`.
fn glob(pat: &str, s: &str) -> bool {
    if let Some(rest) = pat.strip_prefix("**/") {
        return glob(rest, s) || s.split_once('/').is_some_and(|(_, t)| glob(pat, t));
    }
    match pat.chars().next() {
        None => s.is_empty(),
        Some('*') => (0..=s.len())
            .filter(|&i| s.is_char_boundary(i) && !s[..i].contains('/'))
            .any(|i| glob(&pat[1..], &s[i..])),
        Some(c) => s.starts_with(c) && glob(&pat[c.len_utf8()..], &s[c.len_utf8()..]),
    }
}

fn has_word(text: &str, w: &str) -> bool {
    text.match_indices(w).any(|(i, _)| {
        let ok = |c: Option<char>| !c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        ok(text[..i].chars().next_back()) && ok(text[i + w.len()..].chars().next())
    })
}

/// Docs that cannot drift (issue 36, item 6): every path, every qualified name (`Type::item`,
/// `module::item` of this tree) and every snake-case or camel-case name quoted in backticks in
/// `ARCHITECTURE.md` and `docs/dev/` exists in the tree.
#[test]
fn docs_name_only_what_exists() {
    let root = env!("CARGO_MANIFEST_DIR");
    let (rs, all) = tree();
    let mut docs = vec!["ARCHITECTURE.md".to_string()];
    for e in std::fs::read_dir(format!("{root}/docs/dev"))
        .unwrap()
        .flatten()
    {
        docs.push(format!("docs/dev/{}", e.file_name().to_string_lossy()));
    }
    let is_ident = |s: &str| {
        !s.is_empty()
            && s.chars().all(|c| c.is_alphanumeric() || c == '_')
            && !s.starts_with(|c: char| c.is_ascii_digit())
    };
    let defines = |text: &str, x: &str| {
        [
            "enum ", "struct ", "trait ", "union ", "type ", "impl ", "for ",
        ]
        .iter()
        .any(|k| has_word(text, &format!("{k}{x}")))
            || text.contains(&format!("impl<'_> {x}"))
            || text.contains(&format!("impl {x}<"))
    };
    let mut bad = vec![];
    for doc in &docs {
        let text = std::fs::read_to_string(format!("{root}/{doc}")).unwrap();
        for span in text.split('`').skip(1).step_by(2) {
            let s = span.trim().trim_end_matches("()");
            let exts = [
                ".rs", ".md", ".toml", ".eir", ".cuh", ".h", ".json", ".svg", ".sh",
            ];
            let pathish = !s.starts_with('-')
                && !s.contains("://")
                && s.chars()
                    .all(|c| c.is_alphanumeric() || "_./*{},-".contains(c))
                && (s.contains('/') || exts.iter().any(|e| s.ends_with(e)))
                && s.chars().any(char::is_alphabetic);
            if pathish {
                let expanded: Vec<String> = match (s.find('{'), s.find('}')) {
                    (Some(a), Some(b)) if a < b => s[a + 1..b]
                        .split(',')
                        .map(|x| format!("{}{x}{}", &s[..a], &s[b + 1..]))
                        .collect(),
                    _ => vec![s.to_string()],
                };
                for p in expanded {
                    let p = p.replace("NN", "*");
                    let p = p.trim_end_matches('/');
                    let found = all.iter().any(|f| {
                        let f = f.trim_end_matches('/');
                        glob(&format!("**/{p}"), f) || glob(p, f)
                    });
                    if !found {
                        bad.push(format!("{doc}: no file `{p}`"));
                    }
                }
            } else if s.contains("::") && s.split("::").all(is_ident) {
                let parts: Vec<&str> = s.split("::").collect();
                let (x, y) = (parts[parts.len() - 2], parts[parts.len() - 1]);
                let typed: Vec<&(String, String)> =
                    rs.iter().filter(|(_, t)| defines(t, x)).collect();
                let module: Vec<&(String, String)> = rs
                    .iter()
                    .filter(|(f, _)| {
                        f.ends_with(&format!("/{x}.rs")) || f.contains(&format!("/{x}/"))
                    })
                    .collect();
                // A crate of this workspace, or the facade's name for one (`codegen::compile`).
                let local_crate =
                    x.starts_with("eagle") || ["codegen", "runtime", "ir"].contains(&x);
                let scope: Vec<&(String, String)> = if local_crate {
                    rs.iter().collect()
                } else if !module.is_empty() {
                    module
                } else if !typed.is_empty() {
                    typed
                } else {
                    continue; // another crate's name (`proc_macro::Span`)
                };
                if !scope.iter().any(|(_, t)| has_word(t, y)) {
                    bad.push(format!("{doc}: `{s}`: no `{y}` where `{x}` is defined"));
                }
            } else if is_ident(s)
                && (s.contains('_') && s.chars().any(|c| c.is_ascii_lowercase())
                    || s.starts_with(|c: char| c.is_ascii_uppercase())
                        && s.chars().skip(1).any(|c| c.is_ascii_uppercase())
                        && s.chars().any(|c| c.is_ascii_lowercase()))
                && !rs.iter().any(|(_, t)| has_word(t, s))
            {
                bad.push(format!("{doc}: no name `{s}` in the sources"));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The op enums: a match over one of them in a semantic path must name every variant.
const OP_ENUMS: &[&str] = &[
    "OpKind",
    "BinOp",
    "UnOp",
    "CmpOp",
    "TileOp",
    "ArgOp",
    "MathFn",
    "ReduceOp",
    "NotifyOp",
    "AllreduceMode",
];

/// The semantic paths (issue 36, item 3): the evaluator, the math library and its widening,
/// the tile typing, access-category inference, the math expansion, every pass and backend, the
/// host interpreter and the plan executor.
const SEMANTIC_PATHS: &[&str] = &[
    "eagle-ir/src/eval.rs",
    "eagle-ir/src/narrow.rs",
    "eagle-ir/src/math/**/*.rs",
    "eagle-ir/src/tile.rs",
    "eagle-ir/src/analysis.rs",
    "eagle-ir/src/expand.rs",
    "eagle-ir/src/facts.rs",
    "eagle-codegen/src/**/*.rs",
    "eagle-runtime/src/host.rs",
    "src/plan.rs",
    "src/plan/**/*.rs",
];

/// Whether a pattern names a variant of an op enum (`OpKind::Binary(..)`, `BinOp::Min`,
/// `ir::OpKind::Load { .. }`), through `|`, `x @` and `&`.
fn names_op_variant(p: &syn::Pat) -> bool {
    let path_is_op = |path: &syn::Path| {
        let segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        segs.len() >= 2 && OP_ENUMS.contains(&segs[segs.len() - 2].as_str())
    };
    match p {
        syn::Pat::Or(o) => o.cases.iter().any(names_op_variant),
        syn::Pat::Ident(i) => i.subpat.as_ref().is_some_and(|(_, s)| names_op_variant(s)),
        syn::Pat::Reference(r) => names_op_variant(&r.pat),
        syn::Pat::Paren(p) => names_op_variant(&p.pat),
        syn::Pat::Guard(g) => names_op_variant(&g.pat),
        syn::Pat::Path(p) => path_is_op(&p.path),
        syn::Pat::TupleStruct(t) => path_is_op(&t.path),
        syn::Pat::Struct(s) => path_is_op(&s.path),
        _ => false,
    }
}

/// Whether an arm's body diverges loudly: `unreachable!`/`panic!`/`unimplemented!`, `Err(..)`
/// or `return Err(..)`, or a block that ends in one.
fn diverges(e: &syn::Expr) -> bool {
    let is_err = |e: &syn::Expr| matches!(e, syn::Expr::Call(c) if matches!(&*c.func, syn::Expr::Path(p) if p.path.is_ident("Err")));
    match e {
        syn::Expr::Macro(m) => ["unreachable", "panic", "unimplemented"]
            .iter()
            .any(|n| m.mac.path.is_ident(n)),
        syn::Expr::Return(r) => r.expr.as_deref().is_some_and(is_err),
        syn::Expr::Block(b) => match b.block.stmts.last() {
            Some(syn::Stmt::Expr(e, _)) => diverges(e),
            Some(syn::Stmt::Macro(m)) => ["unreachable", "panic", "unimplemented"]
                .iter()
                .any(|n| m.mac.path.is_ident(n)),
            _ => false,
        },
        e => is_err(e),
    }
}

/// The unguarded catch-all arms (`_ =>`, `other =>`) that do not diverge, of matches over an op
/// enum, in one file.
struct CatchAlls {
    file: String,
    found: Vec<String>,
}

impl<'a> syn::visit::Visit<'a> for CatchAlls {
    fn visit_expr_match(&mut self, m: &'a syn::ExprMatch) {
        if m.arms.iter().any(|a| names_op_variant(&a.pat)) {
            for a in &m.arms {
                // A guarded arm (`Pat::Guard`) is not a catch-all.
                let catch_all = match &a.pat {
                    syn::Pat::Wild(_) => true,
                    syn::Pat::Ident(i) => i.subpat.is_none(),
                    _ => false,
                };
                if catch_all && !diverges(&a.body) {
                    let line = syn::spanned::Spanned::span(&a.pat).start().line;
                    self.found.push(format!("{}:{line}", self.file));
                }
            }
        }
        syn::visit::visit_expr_match(self, m);
    }
}

/// Semantics decided per op (issue 36, item 3): in a semantic path, a match over an op enum
/// that decides what ops do names every variant, so a new op cannot compile until the path
/// decides; the only catch-all arms left are those that fail loudly (an internal error where a
/// router that names every variant sent the op elsewhere). No `_ => fmin`, `_ => false` or
/// `_ => {}` can run a new op wrongly. A query for one or two kinds is `if let`/`matches!`, or
/// a fact of the op's declaration (`OpKind::blocks`, `OpKind::info`).
#[test]
fn no_catch_all_arm_over_an_op_enum_in_a_semantic_path() {
    let (rs, _) = tree();
    let mut found = vec![];
    for (path, text) in rs
        .iter()
        .filter(|(p, _)| SEMANTIC_PATHS.iter().any(|g| glob(g, p)))
    {
        let file = syn::parse_file(text).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut v = CatchAlls {
            file: path.clone(),
            found: vec![],
        };
        syn::visit::Visit::visit_file(&mut v, &file);
        found.extend(v.found);
    }
    found.sort();
    assert_eq!(found, Vec::<String>::new(), "catch-all arms over op enums");
}

/// The functions of one file longer than a limit, as `path:line name (lines)`.
struct LongFns {
    file: String,
    limit: usize,
    found: Vec<String>,
}

impl LongFns {
    fn check(&mut self, name: &syn::Ident, block: &syn::Block) {
        let sp = syn::spanned::Spanned::span(block);
        let lines = sp.end().line - sp.start().line + 1;
        if lines > self.limit {
            self.found.push(format!(
                "{}:{} {name} ({lines} lines)",
                self.file,
                sp.start().line
            ));
        }
    }
}

impl<'a> syn::visit::Visit<'a> for LongFns {
    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        self.check(&f.sig.ident, &f.block);
        syn::visit::visit_item_fn(self, f);
    }
    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        self.check(&f.sig.ident, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }
}

/// Sizes (issue 36): no function body over 150 lines and no file over 1,200 lines outside
/// tests, benches and examples, so that each function reads as one idea and each file as one
/// concern.
#[test]
fn no_function_over_150_lines_and_no_file_over_1200_lines() {
    let (rs, _) = tree();
    let outside_tests = |p: &str| {
        !["tests/", "benches/", "examples/"]
            .iter()
            .any(|d| p.starts_with(d) || p.contains(&format!("/{d}")))
    };
    let mut found = vec![];
    for (path, text) in rs.iter().filter(|(p, _)| outside_tests(p)) {
        let lines = text.lines().count();
        if lines > 1200 {
            found.push(format!("{path} ({lines} lines)"));
        }
        let file = syn::parse_file(text).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut v = LongFns {
            file: path.clone(),
            limit: 150,
            found: vec![],
        };
        syn::visit::Visit::visit_file(&mut v, &file);
        found.extend(v.found);
    }
    found.sort();
    assert_eq!(
        found,
        Vec::<String>::new(),
        "functions over 150 lines, files over 1,200"
    );
}

/// Issue 36, item 2: a value is minted by its function's value table (`values.push(ty)`, the
/// `PrimaryMap` that returns its handle), never by hand from the table's length.
#[test]
fn no_value_is_minted_by_hand() {
    let (rs, _) = tree();
    let mut found = vec![];
    for (path, text) in rs.iter().filter(|(p, _)| !p.starts_with("tests/")) {
        for (i, line) in text.lines().enumerate() {
            let l = line.replace(' ', "");
            if l.contains("Value(") && l.contains("len()asu32") {
                found.push(format!("{path}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert_eq!(found, Vec::<String>::new(), "values minted by hand");
}

/// Issue 36 item 2: every emitter writes through a context it owns or borrows
/// (`eagle_ir::Cursor`, the math lanes' `Float::Cx`), never through global or thread-local state:
/// no `thread_local!` and no `static mut` in the IR crate or the compiler's passes.
#[test]
fn no_emitter_state_is_global_or_thread_local() {
    let (rs, _) = tree();
    let mut found = vec![];
    let compiler =
        |p: &str| p.starts_with("eagle-ir/src/") || p.starts_with("eagle-codegen/src/passes/");
    for (path, text) in rs.iter().filter(|(p, _)| compiler(p)) {
        for (i, line) in text.lines().enumerate() {
            let l = line.trim_start();
            if l.starts_with("//") {
                continue;
            }
            if l.contains("thread_local!") || l.contains("static mut ") {
                found.push(format!("{path}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert_eq!(
        found,
        Vec::<String>::new(),
        "global or thread-local emitter state"
    );
}
