//! The facts of an op kind (its keyword, where it may appear, its effects), stated in the
//! op's declaration (`op_kinds!`) and read through `OpKind::info`. The verifier's level rule,
//! dead-code elimination (`OpKind::is_pure`) and the host interpreter's dispatch derive from
//! them; what an elementwise op computes is `crate::eval::elementwise`.

use super::Level;

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
    /// The op's keyword in the text form (`add`, `load`, `for`, ...): its format's first word,
    /// or its first field's keyword (`OpKind::keyword`).
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
    /// It defines one value, its result (`%N = load ...`); an op without one defines none
    /// (`store ...`). The verifier holds every op to it.
    pub result: bool,
    /// It is a built-in collective (`broadcast`, `allgather`, `reduce_scatter`, `allreduce`,
    /// `all_to_all`): specialization lowers it into puts, gets and barriers for one world size,
    /// so no backend sees it.
    pub collective: bool,
}

/// The facts of an op that is `what` (as a level error names it) and may appear at `levels`,
/// with no effect yet. The keyword is the op's format's (`OpKind::keyword`).
pub(crate) const fn info(what: &'static str, levels: Levels) -> OpInfo {
    OpInfo {
        name: "",
        what,
        levels,
        pure: false,
        writes: false,
        elementwise: false,
        peers: false,
        result: false,
        collective: false,
    }
}

/// A built-in collective: device-only, writes its receive buffer, reaches peers.
pub(crate) const fn collective() -> OpInfo {
    let mut i = peers(writes(info("a collective", Levels::DEVICE)));
    i.collective = true;
    i
}

pub(crate) const fn pure(mut i: OpInfo) -> OpInfo {
    i.pure = true;
    i
}

/// The op defines one value, its result.
pub(crate) const fn value(mut i: OpInfo) -> OpInfo {
    i.result = true;
    i
}

pub(crate) const fn writes(mut i: OpInfo) -> OpInfo {
    i.writes = true;
    i
}

pub(crate) const fn peers(mut i: OpInfo) -> OpInfo {
    i.peers = true;
    i
}

/// A primitive elementwise op: anywhere, pure, arithmetic.
pub(crate) const fn elementwise() -> OpInfo {
    OpInfo {
        name: "",
        what: "arithmetic",
        levels: Levels::ALL,
        pure: true,
        writes: false,
        elementwise: true,
        peers: false,
        result: true,
        collective: false,
    }
}
