//! The text form of the IR. [`crate::parse_module`] reads it back.

use crate::ir::{Block, Function, Module, Op, OpKind, Value};
use std::collections::HashMap;
use std::fmt::Write;

/// Canonical numbering: values are named `%0, %1, ...` in the order the text defines them;
/// `locs` says whether ops print their source locations.
struct Names(HashMap<Value, usize>, bool);

impl Names {
    fn of(f: &Function) -> Names {
        let mut m = HashMap::new();
        for p in &f.params {
            let n = m.len();
            m.insert(p.value, n);
        }
        fn walk(b: &Block, m: &mut HashMap<Value, usize>) {
            for op in &b.ops {
                if let Some(r) = op.result {
                    let n = m.len();
                    m.insert(r, n);
                }
                if let OpKind::For { var, .. } = &op.kind {
                    let n = m.len();
                    m.insert(*var, n);
                }
                for b in op.kind.blocks() {
                    walk(b, m);
                }
            }
        }
        walk(&f.body, &mut m);
        Names(m, false)
    }
    /// The ` ;@ file:line:column` suffix of `op`'s first line, when locations are printed.
    fn loc(&self, op: &Op) -> String {
        match (&op.loc, self.1) {
            (Some(l), true) => format!(" ;@ {l}"),
            _ => String::new(),
        }
    }
    fn v(&self, v: Value) -> String {
        match self.0.get(&v) {
            Some(n) => format!("%{n}"),
            None => format!("%<undefined {}>", v.0),
        }
    }
    fn list(&self, vs: &[Value]) -> String {
        vs.iter().map(|v| self.v(*v)).collect::<Vec<_>>().join(", ")
    }
}

/// The canonical number of every value of `f`: `%n` in the text form, in definition order
/// (parameters first). Backends name values by it so their output reads beside the IR.
pub fn value_numbers(f: &Function) -> HashMap<Value, usize> {
    Names::of(f).0
}

/// Prints a whole module: functions separated by a blank line, without source locations
/// (the form snapshots pin; see [`print_module_with_locs`]).
pub fn print_module(m: &Module) -> String {
    print_module_impl(m, false)
}

/// Prints a whole module with the source location of every op that has one, as a trailing
/// `;@ file:line:column` (a comment to other readers; [`crate::parse_module`] reads it back,
/// so this form round-trips too).
pub fn print_module_with_locs(m: &Module) -> String {
    print_module_impl(m, true)
}

fn print_module_impl(m: &Module, locs: bool) -> String {
    let mut s = String::new();
    for (i, f) in m.functions.iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        s.push_str(&print_function_impl(f, locs));
    }
    s
}

/// Prints one function (without source locations).
pub fn print_function(f: &Function) -> String {
    print_function_impl(f, false)
}

fn print_function_impl(f: &Function, locs: bool) -> String {
    let mut names = Names::of(f);
    names.1 = locs;
    let mut s = String::new();
    let params: Vec<String> = f
        .params
        .iter()
        .map(|p| {
            format!(
                "{}{} {}: {}",
                if p.out { "out " } else { "" },
                names.v(p.value),
                p.name,
                f.ty(p.value)
            )
        })
        .collect();
    let _ = writeln!(
        s,
        "{} @{}({}) {{",
        f.level.name(),
        f.name,
        params.join(", ")
    );
    print_block(f, &names, &f.body, 1, &mut s);
    s.push_str("}\n");
    s
}

fn print_block(f: &Function, n: &Names, b: &Block, depth: usize, s: &mut String) {
    for op in &b.ops {
        print_op_into(f, n, op, depth, s);
    }
}

/// Prints one op (and any nested blocks) as it appears in its function.
pub fn print_op(f: &Function, op: &Op) -> String {
    let mut s = String::new();
    print_op_into(f, &Names::of(f), op, 0, &mut s);
    s.trim_end().to_string()
}

fn print_op_into(f: &Function, n: &Names, op: &Op, depth: usize, s: &mut String) {
    let ind = "  ".repeat(depth);
    let res = |s: &mut String| {
        if let Some(r) = op.result {
            let _ = write!(s, "{} = ", n.v(r));
        }
    };
    s.push_str(&ind);
    res(s);
    let offs = |o: &[Value]| format!("[{}]", n.list(o));
    use OpKind::*;
    let body = match &op.kind {
        Const(c) => format!("const {c}"),
        Dim(d) => format!("dim {d}"),
        Binary(o, a, b) => format!("{} {}, {}", o.name(), n.v(*a), n.v(*b)),
        Unary(o, a) => format!("{} {}", o.name(), n.v(*a)),
        Fma(a, b, c) => format!("fma {}", n.list(&[*a, *b, *c])),
        Cmp(o, a, b) => format!("cmp {} {}, {}", o.name(), n.v(*a), n.v(*b)),
        Select(a, b, c) => format!("select {}", n.list(&[*a, *b, *c])),
        Cast(a) => format!("cast {}", n.v(*a)),
        Bitcast(a) => format!("bitcast {}", n.v(*a)),
        Slice { src, index } => format!("slice {}[{}]", n.v(*src), n.v(*index)),
        Load { src, offsets } => format!("load {}{}", n.v(*src), offs(offsets)),
        Elem { src, indices } => format!("elem {}{}", n.v(*src), offs(indices)),
        SetElem {
            value,
            dst,
            indices,
        } => format!("set_elem {}, {}{}", n.v(*value), n.v(*dst), offs(indices)),
        Subview { src, offset } => format!("subview {}[{}..]", n.v(*src), n.v(*offset)),
        Broadcast {
            ctx,
            src,
            dst,
            root,
        } => format!("broadcast {}", n.list(&[*ctx, *src, *dst, *root])),
        AllGather { ctx, src, dst } => format!("allgather {}", n.list(&[*ctx, *src, *dst])),
        ReduceScatter { ctx, src, dst, op } => {
            format!(
                "reduce_scatter {}, {}",
                n.list(&[*ctx, *src, *dst]),
                op.name()
            )
        }
        AllReduce {
            ctx,
            src,
            dst,
            op,
            mode,
        } => format!(
            "allreduce {}, {}, {}",
            n.list(&[*ctx, *src, *dst]),
            op.name(),
            mode.name()
        ),
        AllToAll { ctx, src, dst } => format!("all_to_all {}", n.list(&[*ctx, *src, *dst])),
        Store {
            value,
            dst,
            offsets,
        } => format!("store {}, {}{}", n.v(*value), n.v(*dst), offs(offsets)),
        Var(a) => format!("var {}", n.v(*a)),
        Read(a) => format!("read {}", n.v(*a)),
        Write(a, b) => format!("write {}, {}", n.v(*a), n.v(*b)),
        For { .. } | If { .. } => {
            print_nested(f, n, op, depth, s);
            return;
        }
        Call { callee, args } => format!("call @{callee}({})", n.list(args)),
        Dispatch {
            callee,
            args,
            device,
        } => format!(
            "dispatch @{callee}({}) device {}",
            n.list(args),
            n.v(*device)
        ),
        Rank(c) => format!("rank {}", n.v(*c)),
        NRanks(c) => format!("nranks {}", n.v(*c)),
        WorldSize => "world_size".to_string(),
        AllocWindowBuffer => "alloc_window_buffer".to_string(),
        Window(b) => format!("window {}", n.v(*b)),
        Put { dst, peer, src } => format!("put {}", n.list(&[*dst, *peer, *src])),
        Get { dst, peer, src } => format!("get {}", n.list(&[*dst, *peer, *src])),
        RemoteLoad { src, peer, offsets } => {
            format!(
                "remote_load {}, {}, {}",
                n.v(*src),
                n.v(*peer),
                offs(offsets)
            )
        }
        RemoteStore {
            value,
            dst,
            peer,
            offsets,
        } => format!(
            "remote_store {}, {}, {}, {}",
            n.v(*value),
            n.v(*dst),
            n.v(*peer),
            offs(offsets)
        ),
        Notify {
            signal,
            peer,
            offsets,
            value,
            op,
        } => format!(
            "notify {}, {}, {}, {}, {}",
            n.v(*signal),
            n.v(*peer),
            offs(offsets),
            n.v(*value),
            op.name()
        ),
        Wait {
            signal,
            offsets,
            expected,
            cmp,
        } => format!(
            "wait {}, {}, {}, {}",
            n.v(*signal),
            offs(offsets),
            n.v(*expected),
            cmp.name()
        ),
        Barrier(c) => format!("barrier {}", n.v(*c)),
        Tile(crate::tile::TileOp::Extract(offs), args) => {
            let o: Vec<String> = offs.iter().map(u64::to_string).collect();
            format!("extract[{}] {}", o.join(", "), n.list(args))
        }
        Tile(op, args) if args.is_empty() => op.name().to_string(),
        Tile(op, args) => format!("{} {}", op.name(), n.list(args)),
        Math(f, args) => format!("{} {}", f.name(), n.list(args)),
    };
    s.push_str(&body);
    if let Some(r) = op.result {
        let _ = write!(s, " : {}", f.ty(r));
    }
    s.push_str(&n.loc(op));
    s.push('\n');
}

/// Prints a `for` or an `if` (the op's head, its nested blocks one level deeper, the closing
/// braces) after the indentation and result already written.
fn print_nested(f: &Function, n: &Names, op: &Op, depth: usize, s: &mut String) {
    use OpKind::*;
    let ind = "  ".repeat(depth);
    match &op.kind {
        For { var, lo, hi, body } => {
            let _ = writeln!(
                s,
                "for {} in {}..{} {{{}",
                n.v(*var),
                n.v(*lo),
                n.v(*hi),
                n.loc(op)
            );
            print_block(f, n, body, depth + 1, s);
            let _ = writeln!(s, "{ind}}}");
        }
        If {
            cond,
            then_body,
            else_body,
        } => {
            let _ = writeln!(s, "if {} {{{}", n.v(*cond), n.loc(op));
            print_block(f, n, then_body, depth + 1, s);
            if else_body.ops.is_empty() {
                let _ = writeln!(s, "{ind}}}");
            } else {
                let _ = writeln!(s, "{ind}}} else {{");
                print_block(f, n, else_body, depth + 1, s);
                let _ = writeln!(s, "{ind}}}");
            }
        }
        _ => {}
    }
}
