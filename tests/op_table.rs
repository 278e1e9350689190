//! No op can be half-handled: every op of the table (`OpKind::info`) and every binary and
//! unary op is exercised by a file test that runs it through the CPU backend and the CUDA C
//! emulation (`tests/filetests/run/`, `backend/`), and every elementwise op on every dtype by
//! `tests/eval_diff.rs` (which walks `BinOp::ALL`, `UnOp::ALL`, `CmpOp::ALL` and every cast).
use eagle::ir::{
    AllreduceMode, BinOp, Block, CmpOp, Const, Dim, MathFn, NotifyOp, OpKind, ReduceOp, TileOp,
    UnOp, Value,
};
use std::path::Path;

/// One op of every kind. The match below has no fall-through arm, so a new kind does not
/// compile until it is listed here (and then this test asks for a file test that runs it).
fn every_kind() -> Vec<OpKind> {
    let v = Value(0);
    let kinds = vec![
        OpKind::Const(Const::Int(0)),
        OpKind::Dim(Dim::Const(1)),
        OpKind::Binary(BinOp::Add, v, v),
        OpKind::Unary(UnOp::Neg, v),
        OpKind::Fma(v, v, v),
        OpKind::Cmp(CmpOp::Eq, v, v),
        OpKind::Select(v, v, v),
        OpKind::Cast(v),
        OpKind::Bitcast(v),
        OpKind::Slice { src: v, index: v },
        OpKind::Subview { src: v, offset: v },
        OpKind::View {
            src: v,
            offsets: vec![v],
        },
        OpKind::Broadcast {
            ctx: v,
            src: v,
            dst: v,
            root: v,
        },
        OpKind::AllGather {
            ctx: v,
            src: v,
            dst: v,
        },
        OpKind::ReduceScatter {
            ctx: v,
            src: v,
            dst: v,
            op: ReduceOp::Sum,
        },
        OpKind::AllReduce {
            ctx: v,
            src: v,
            dst: v,
            op: ReduceOp::Sum,
            mode: AllreduceMode::Mesh,
        },
        OpKind::AllToAll {
            ctx: v,
            src: v,
            dst: v,
        },
        OpKind::AllToAllV {
            ctx: v,
            src: v,
            send_counts: v,
            dst: v,
            recv_counts: v,
        },
        OpKind::AllGatherV {
            ctx: v,
            src: v,
            count: v,
            dst: v,
            recv_counts: v,
        },
        OpKind::Elem {
            src: v,
            indices: vec![],
        },
        OpKind::SetElem {
            value: v,
            dst: v,
            indices: vec![],
        },
        OpKind::Load {
            src: v,
            offsets: vec![],
        },
        OpKind::Store {
            value: v,
            dst: v,
            offsets: vec![],
        },
        OpKind::Var(v),
        OpKind::Read(v),
        OpKind::Write(v, v),
        OpKind::For {
            var: v,
            lo: v,
            hi: v,
            body: Block::default(),
        },
        OpKind::While {
            flag: v,
            cap: 1,
            body: Block::default(),
        },
        OpKind::If {
            cond: v,
            then_body: Block::default(),
            else_body: Block::default(),
        },
        OpKind::Call {
            callee: String::new(),
            args: vec![],
        },
        OpKind::Dispatch {
            callee: String::new(),
            args: vec![],
            device: v,
        },
        OpKind::Rank(v),
        OpKind::NRanks(v),
        OpKind::WorldSize,
        OpKind::AllocWindowBuffer,
        OpKind::Window(v),
        OpKind::LocalArray,
        OpKind::Put {
            dst: v,
            peer: v,
            src: v,
        },
        OpKind::Get {
            dst: v,
            peer: v,
            src: v,
        },
        OpKind::RemoteLoad {
            src: v,
            peer: v,
            offsets: vec![],
        },
        OpKind::RemoteStore {
            value: v,
            dst: v,
            peer: v,
            offsets: vec![],
        },
        OpKind::Notify {
            signal: v,
            peer: v,
            offsets: vec![],
            value: v,
            op: NotifyOp::Set,
        },
        OpKind::Wait {
            signal: v,
            offsets: vec![],
            expected: v,
            cmp: CmpOp::Eq,
        },
        OpKind::Barrier(v),
        OpKind::Group {
            ctx: v,
            grid: vec![v],
            axis: 0,
        },
        OpKind::Split {
            ctx: v,
            color: v,
            key: v,
        },
        OpKind::WorldRank { group: v, rank: v },
        OpKind::TrapIf {
            cond: v,
            a: v,
            b: v,
            kind: eagle::ir::Trap::RecvCapacity,
        },
        OpKind::Tile(TileOp::Matmul, vec![]),
        OpKind::Math(MathFn::Ln, vec![]),
    ];
    for k in &kinds {
        // Exhaustive: a new `OpKind` variant must be added to the list above.
        match k {
            OpKind::Const(_)
            | OpKind::Dim(_)
            | OpKind::Binary(..)
            | OpKind::Unary(..)
            | OpKind::Fma(..)
            | OpKind::Cmp(..)
            | OpKind::Select(..)
            | OpKind::Cast(_)
            | OpKind::Bitcast(_)
            | OpKind::Slice { .. }
            | OpKind::Subview { .. }
            | OpKind::View { .. }
            | OpKind::Broadcast { .. }
            | OpKind::AllGather { .. }
            | OpKind::ReduceScatter { .. }
            | OpKind::AllReduce { .. }
            | OpKind::AllToAll { .. }
            | OpKind::AllToAllV { .. }
            | OpKind::AllGatherV { .. }
            | OpKind::Elem { .. }
            | OpKind::SetElem { .. }
            | OpKind::Load { .. }
            | OpKind::Store { .. }
            | OpKind::LocalArray
            | OpKind::Var(_)
            | OpKind::Read(_)
            | OpKind::Write(..)
            | OpKind::For { .. }
            | OpKind::While { .. }
            | OpKind::If { .. }
            | OpKind::Call { .. }
            | OpKind::Dispatch { .. }
            | OpKind::Rank(_)
            | OpKind::NRanks(_)
            | OpKind::WorldSize
            | OpKind::AllocWindowBuffer
            | OpKind::Window(_)
            | OpKind::Put { .. }
            | OpKind::Get { .. }
            | OpKind::RemoteLoad { .. }
            | OpKind::RemoteStore { .. }
            | OpKind::Notify { .. }
            | OpKind::Wait { .. }
            | OpKind::Barrier(_)
            | OpKind::Group { .. }
            | OpKind::Split { .. }
            | OpKind::WorldRank { .. }
            | OpKind::TrapIf { .. }
            | OpKind::Tile(..)
            | OpKind::Math(..) => {}
        }
    }
    kinds
}

/// The op keywords used in the files under `dirs` (the word after `=`, or the first word of
/// a line without a result).
fn keywords(dirs: &[&str]) -> std::collections::BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let mut out = std::collections::BTreeSet::new();
    for d in dirs {
        for e in std::fs::read_dir(root.join(d)).unwrap() {
            let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
            for line in text.lines().filter(|l| l.starts_with("  ")) {
                let l = line.trim();
                let l = l.split_once(" = ").map_or(l, |(_, r)| r);
                if let Some(w) = l.split(|c: char| c.is_whitespace() || c == '[').next() {
                    out.insert(w.to_string());
                }
            }
        }
    }
    out
}

#[test]
fn every_op_runs_through_both_backends_in_a_file_test() {
    let run = keywords(&["run", "backend"]);
    let mut names: Vec<&str> = every_kind().iter().map(|k| k.info().name).collect();
    names.extend(BinOp::ALL.iter().map(|b| b.name()));
    names.extend(UnOp::ALL.iter().map(|u| u.name()));
    let tile_ops = TileOp::keyword_ops();
    names.extend(tile_ops.iter().map(|t| t.name()));
    names.push(TileOp::Extract(vec![]).name());
    names.extend(MathFn::ALL.iter().map(|f| f.name()));
    // `dim` folds to a constant before any backend sees it; `specialize/bind_dims.eir` has it.
    let missing: Vec<&&str> = names
        .iter()
        .filter(|n| !run.contains(**n) && **n != "dim")
        .collect();
    assert!(
        missing.is_empty(),
        "ops no run file test exercises: {missing:?}"
    );
    assert!(keywords(&["specialize"]).contains("dim"));
    // And every op kind is in the table, named.
    assert_eq!(every_kind().len(), 50);
}

#[test]
fn the_language_reference_lists_every_op_and_intrinsic() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/language.md"))
            .unwrap();
    let mut names: Vec<String> = every_kind()
        .iter()
        .map(|k| k.info().name.to_string())
        .collect();
    names.extend(BinOp::ALL.iter().map(|b| b.name().to_string()));
    names.extend(UnOp::ALL.iter().map(|u| u.name().to_string()));
    names.extend(CmpOp::ALL.iter().map(|c| c.name().to_string()));
    names.extend(TileOp::keyword_ops().iter().map(|t| t.name().to_string()));
    names.extend(MathFn::ALL.iter().map(|f| f.name().to_string()));
    names.extend(
        eagle::ir::tile::INTRINSICS
            .iter()
            .map(|i| i.signature.to_string()),
    );
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !doc.contains(&format!("`{n}`")) && !doc.contains(&format!("`{n}(")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/language.md does not name: {missing:?}"
    );
}
