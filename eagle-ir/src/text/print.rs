//! The text form of the IR. [`crate::parse_module`] reads it back.

use crate::entity::SecondaryMap;
use crate::ir::form::Writer;
use crate::ir::{Block, Function, Module, Op, OpKind, Value};
use std::fmt::Write;

/// Canonical numbering: values are named `%0, %1, ...` in the order the text defines them;
/// `locs` says whether ops print their source locations.
struct Names(SecondaryMap<Value, usize>, bool);

impl Names {
    fn of(f: &Function) -> Names {
        let mut m = SecondaryMap::with_capacity(f.values.len());
        for p in &f.params {
            let n = m.len();
            m.insert(p.value, n);
        }
        f.walk(&mut |op| {
            if let Some(r) = op.result {
                let n = m.len();
                m.insert(r, n);
            }
            if let OpKind::For { var, .. } = &op.kind {
                let n = m.len();
                m.insert(*var, n);
            }
        });
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
        let mut s = String::new();
        self.write_v(v, &mut s);
        s
    }
    fn write_v(&self, v: Value, s: &mut String) {
        let _ = match self.0.get(v) {
            Some(n) => write!(s, "%{n}"),
            None => write!(s, "%<undefined {}>", v.0),
        };
    }
}

/// The canonical number of every value of `f`: `%n` in the text form, in definition order
/// (parameters first). Backends name values by it so their output reads beside the IR.
pub fn value_numbers(f: &Function) -> SecondaryMap<Value, usize> {
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
    for op in b.iter(&f.ops) {
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
    let line_start = s.len();
    for _ in 0..depth {
        s.push_str("  ");
    }
    if let Some(r) = op.result {
        let _ = write!(s, "{} = ", n.v(r));
    }
    let mut w = OpWriter {
        f,
        n,
        op,
        depth,
        s,
        located: false,
    };
    op.kind.write_text(&mut w);
    let located = w.located;
    // A list that ends the line may be empty (`iota_0`): no space before the type.
    let end = s.trim_end_matches(' ').len().max(line_start);
    s.truncate(end);
    if let Some(r) = op.result {
        let _ = write!(s, " : {}", f.ty(r));
    }
    if !located {
        s.push_str(&n.loc(op));
    }
    s.push('\n');
}

/// The printer as an op's format writes it ([`crate::ir::form`]): values by their canonical
/// names, blocks one level deeper. An op with blocks prints its location after its first `{`.
struct OpWriter<'a> {
    f: &'a Function,
    n: &'a Names,
    op: &'a Op,
    depth: usize,
    s: &'a mut String,
    located: bool,
}

impl Writer for OpWriter<'_> {
    fn out(&mut self) -> &mut String {
        self.s
    }
    fn val(&mut self, v: Value) {
        self.n.write_v(v, self.s);
    }
    fn block(&mut self, b: &Block) {
        self.s.push('{');
        if !self.located {
            self.located = true;
            self.s.push_str(&self.n.loc(self.op));
        }
        self.s.push('\n');
        print_block(self.f, self.n, b, self.depth + 1, self.s);
        for _ in 0..self.depth {
            self.s.push_str("  ");
        }
        self.s.push('}');
    }
}
