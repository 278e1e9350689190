//! What the op table says beyond the declaration: which operands an op hands on
//! ([`OpKind::handed_on_mut`]) and purity for dead-code elimination ([`OpKind::is_pure`]). The
//! facts of each op kind ([`OpKind::info`]: keyword, levels, effects) are part of its
//! declaration in `crate::ir` (`op_kinds!`).

use crate::ir::OpKind;

impl OpKind {
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
            | View { .. }
            | Broadcast { .. }
            | AllGather { .. }
            | ReduceScatter { .. }
            | AllReduce { .. }
            | AllToAll { .. }
            | AllToAllV { .. }
            | AllGatherV { .. }
            | Elem { .. }
            | Load { .. }
            | LocalArray
            | Var(_)
            | Read(_)
            | Write(..)
            | For { .. }
            | While { .. }
            | If { .. }
            | Dispatch { .. }
            | Rank(_)
            | NRanks(_)
            | Group { .. }
            | Split { .. }
            | WorldRank { .. }
            | WorldSize
            | AllocWindowBuffer
            | Window(_)
            | Put { .. }
            | Get { .. }
            | RemoteLoad { .. }
            | Notify { .. }
            | Wait { .. }
            | Barrier(_)
            | TrapIf { .. }
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
    use crate::ir::{BinOp, Level, UnOp, Value};

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
