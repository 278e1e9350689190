//! The op table: the facts every stage needs about an op kind, stated once per op.
//!
//! [`OpKind::info`] is one exhaustive match: a new op kind does not compile until it says its
//! name, where it may appear, whether it is pure, whether it writes memory and whether it is
//! elementwise. The verifier's level rule, dead-code elimination ([`OpKind::is_pure`]) and the
//! host interpreter's dispatch derive from it; what an elementwise op computes is
//! [`crate::eval::elementwise`].

use crate::ir::{BinOp, Level, OpKind};

/// The levels an op may appear at (design.md, "three levels"). `device` covers per-device
/// programs, compute kernels and sample kernels: everything that runs on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Levels {
    /// Allowed in an `#[eagle::host]` function (run by the host interpreter).
    pub host: bool,
    /// Allowed in device code (per-device programs, compute and sample kernels).
    pub device: bool,
}

impl Levels {
    /// Anywhere.
    pub const ALL: Levels = Levels {
        host: true,
        device: true,
    };
    /// Only in a host function.
    pub const HOST: Levels = Levels {
        host: true,
        device: false,
    };
    /// Only in device code.
    pub const DEVICE: Levels = Levels {
        host: false,
        device: true,
    };

    /// Whether an op with these levels may appear in a function of level `l`.
    pub fn allows(self, l: Level) -> bool {
        match l {
            Level::Host => self.host,
            Level::Device | Level::Compute | Level::Sample => self.device,
        }
    }
}

/// The facts of one op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpInfo {
    /// The op's keyword in the text form (`add`, `load`, `for`, ...).
    pub name: &'static str,
    /// What the op is, as a level error names it (`a tile load or store`).
    pub what: &'static str,
    /// Where it may appear. Elementwise ops are allowed on the host on scalars only (tiles
    /// live on a device); the verifier checks that too.
    pub levels: Levels,
    /// It has no effect beyond its result and cannot fail at run time: dead-code elimination
    /// removes it when its result is unused.
    pub pure: bool,
    /// It may write memory (a tensor, a window or a peer's window, a signal, a variable).
    pub writes: bool,
    /// It computes each element of its result from the same element of its operands, by
    /// [`crate::eval::elementwise`]; backends may fuse and vectorise it.
    pub elementwise: bool,
    /// It reaches another rank: a collective, a remote data movement, a signal or a barrier.
    /// Ranks whose programs hold none ([`crate::Module::reaches_peers`]) cannot observe each
    /// other, so the runtime may run them one after another.
    pub peers: bool,
}

const fn info(name: &'static str, what: &'static str, levels: Levels) -> OpInfo {
    OpInfo {
        name,
        what,
        levels,
        pure: false,
        writes: false,
        elementwise: false,
        peers: false,
    }
}

const fn pure(mut i: OpInfo) -> OpInfo {
    i.pure = true;
    i
}

const fn writes(mut i: OpInfo) -> OpInfo {
    i.writes = true;
    i
}

const fn peer(mut i: OpInfo) -> OpInfo {
    i.peers = true;
    i
}

const fn elementwise(name: &'static str) -> OpInfo {
    OpInfo {
        name,
        what: "arithmetic",
        levels: Levels::ALL,
        pure: true,
        writes: false,
        elementwise: true,
        peers: false,
    }
}

impl OpKind {
    /// The facts of this op (see the module docs). Integer `div` and `rem` are not pure: they
    /// fail on a zero divisor.
    pub fn info(&self) -> OpInfo {
        use OpKind::*;
        const COLLECTIVE: &str = "a collective";
        const REMOTE: &str = "a remote data movement";
        match self {
            Const(_) => pure(info("const", "a constant", Levels::ALL)),
            Dim(_) => pure(info("dim", "a dimension", Levels::ALL)),
            Binary(op @ (BinOp::Div | BinOp::Rem), ..) => OpInfo {
                pure: false,
                ..elementwise(op.name())
            },
            Binary(op, ..) => elementwise(op.name()),
            Unary(op, _) => elementwise(op.name()),
            Fma(..) => elementwise("fma"),
            Cmp(..) => elementwise("cmp"),
            Select(..) => elementwise("select"),
            Cast(_) => elementwise("cast"),
            Bitcast(_) => elementwise("bitcast"),
            Slice { .. } => pure(info("slice", "a slice (`x[i]`)", Levels::ALL)),
            Subview { .. } => pure(info("subview", "a sub-view (`x[a..b]`)", Levels::DEVICE)),
            Broadcast { .. } => peer(writes(info("broadcast", COLLECTIVE, Levels::DEVICE))),
            AllGather { .. } => peer(writes(info("allgather", COLLECTIVE, Levels::DEVICE))),
            ReduceScatter { .. } => {
                peer(writes(info("reduce_scatter", COLLECTIVE, Levels::DEVICE)))
            }
            AllReduce { .. } => peer(writes(info("allreduce", COLLECTIVE, Levels::DEVICE))),
            AllToAll { .. } => peer(writes(info("all_to_all", COLLECTIVE, Levels::DEVICE))),
            Elem { .. } => info("elem", "element access (`x[i]`)", Levels::DEVICE),
            SetElem { .. } => writes(info("set_elem", "element access (`x[i]`)", Levels::DEVICE)),
            Load { .. } => info("load", "a tile load or store", Levels::DEVICE),
            Store { .. } => writes(info("store", "a tile load or store", Levels::DEVICE)),
            Var(_) => info("var", "a variable", Levels::ALL),
            Read(_) => info("read", "a variable", Levels::ALL),
            Write(..) => writes(info("write", "a variable", Levels::ALL)),
            For { .. } => info("for", "a loop", Levels::ALL),
            If { .. } => info("if", "a branch", Levels::ALL),
            Call { .. } => writes(info("call", "a call of a compute kernel", Levels::DEVICE)),
            Dispatch { .. } => writes(info("dispatch", "a dispatch", Levels::HOST)),
            Rank(_) => pure(info("rank", "a device-context operation", Levels::DEVICE)),
            NRanks(_) => pure(info("nranks", "a device-context operation", Levels::DEVICE)),
            WorldSize => pure(info("world_size", "`world_size()`", Levels::HOST)),
            AllocWindowBuffer => info(
                "alloc_window_buffer",
                "a window-buffer allocation",
                Levels::HOST,
            ),
            Window(_) => pure(info("window", "a window view", Levels::HOST)),
            Put { .. } => peer(writes(info("put", REMOTE, Levels::DEVICE))),
            Get { .. } => peer(writes(info("get", REMOTE, Levels::DEVICE))),
            RemoteLoad { .. } => peer(info("remote_load", REMOTE, Levels::DEVICE)),
            RemoteStore { .. } => peer(writes(info("remote_store", REMOTE, Levels::DEVICE))),
            Notify { .. } => peer(writes(info("notify", "a signal operation", Levels::DEVICE))),
            Wait { .. } => peer(info("wait", "a signal operation", Levels::DEVICE)),
            Barrier(_) => peer(info(
                "barrier",
                "a device-context operation",
                Levels::DEVICE,
            )),
            Tile(op, _) => pure(info(op.name(), "a tile op", Levels::DEVICE)),
            Math(f, _) => elementwise(f.name()),
        }
    }

    /// The operands whose values the op hands on beyond its own result: the value a store,
    /// an element store or a remote store writes to memory, and the arguments of a call (so
    /// a storage dtype's value is narrowed before it leaves the function: `narrow`).
    /// Exhaustive on purpose: a new op must say what it hands on.
    pub fn handed_on_mut(&mut self) -> Vec<&mut crate::ir::Value> {
        use OpKind::*;
        match self {
            SetElem { value, .. } | Store { value, .. } | RemoteStore { value, .. } => {
                vec![value]
            }
            Call { args, .. } => args.iter_mut().collect(),
            // Values that stay in registers or variables (a variable holds the compute
            // dtype), memory moved as bytes (put, get, collectives), signals, and control.
            Const(_)
            | Dim(_)
            | Binary(..)
            | Unary(..)
            | Fma(..)
            | Cmp(..)
            | Select(..)
            | Cast(_)
            | Bitcast(_)
            | Slice { .. }
            | Subview { .. }
            | Broadcast { .. }
            | AllGather { .. }
            | ReduceScatter { .. }
            | AllReduce { .. }
            | AllToAll { .. }
            | Elem { .. }
            | Load { .. }
            | Var(_)
            | Read(_)
            | Write(..)
            | For { .. }
            | If { .. }
            | Dispatch { .. }
            | Rank(_)
            | NRanks(_)
            | WorldSize
            | AllocWindowBuffer
            | Window(_)
            | Put { .. }
            | Get { .. }
            | RemoteLoad { .. }
            | Notify { .. }
            | Wait { .. }
            | Barrier(_)
            | Tile(..)
            | Math(..) => vec![],
        }
    }

    /// Whether the op has no effect beyond its result (safe to remove when unused): the
    /// table's `pure`.
    pub fn is_pure(&self) -> bool {
        self.info().pure
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{UnOp, Value};

    #[test]
    fn the_table_says_what_the_verifier_and_dce_use() {
        let v = Value(0);
        let div = OpKind::Binary(BinOp::Div, v, v);
        assert!(div.info().elementwise && !div.info().pure);
        assert!(OpKind::Binary(BinOp::Add, v, v).is_pure());
        assert!(OpKind::Unary(UnOp::Sqrt, v)
            .info()
            .levels
            .allows(Level::Host));
        let load = OpKind::Load {
            src: v,
            offsets: vec![],
        };
        assert!(!load.info().levels.allows(Level::Host));
        assert!(load.info().levels.allows(Level::Sample));
        assert!(!OpKind::WorldSize.info().levels.allows(Level::Device));
        assert_eq!(OpKind::Barrier(v).info().name, "barrier");
    }

    #[test]
    fn reaches_peers_follows_calls_and_is_safe_for_unknown_functions() {
        let m = crate::parse_module(
            "compute @idle(%0 x: tensor<[4], f32>) {
}

compute @sync(%0 c: ctx) {
  barrier %0
}

device @plain(%0 ctx: ctx, %1 x: tensor<[4], f32>) {
  call @idle(%1)
}

device @through(%0 ctx: ctx, %1 x: tensor<[4], f32>) {
  call @sync(%0)
}
",
        )
        .expect("parses");
        assert!(!m.reaches_peers("plain"));
        assert!(!m.reaches_peers("idle"));
        assert!(m.reaches_peers("sync"));
        assert!(m.reaches_peers("through"));
        assert!(m.reaches_peers("missing"));
        assert!(OpKind::Barrier(Value(0)).info().peers);
        assert!(!OpKind::Binary(BinOp::Add, Value(0), Value(0)).info().peers);
    }
}
