//! Run-time checks of the CUDA C: fault sites (`eg_fail` with the site's message, filled in
//! with two values by the runtime), the peer check, and `trap_if`.

use super::*;

impl Emitter<'_> {
    /// Registers a fault site and emits `if (cond) fail`. The condition is uniform (scalar).
    pub(super) fn fault_if(&mut self, cond: &str, msg: String, a: &str, b: &str) {
        if self.checked.iter().any(|c| c.contains(cond)) {
            return;
        }
        if let Some(top) = self.checked.last_mut() {
            top.insert(cond.to_string());
        }
        let site = self.sites.len();
        self.sites.push(self.placed(msg));
        match self.mode {
            Mode::Block => self.line(format!(
                "if ({cond}) {{ if (threadIdx.x == 0) eg_fail(rt, {site}, (long long)({a}), (long long)({b})); return 1; }}"
            )),
            Mode::Thread => self.line(format!(
                "if ({cond}) return eg_fail(rt, {site}, (long long)({a}), (long long)({b}));"
            )),
        }
    }

    /// Checks that `peer` is a rank of the world (no check for `rank(ctx)` itself).
    pub(super) fn check_peer(&mut self, op: &Op, peer: Value) {
        // This rank is always in the world.
        if matches!(self.def_of(peer), Some(OpKind::Rank(_))) {
            return;
        }
        let p = self.v(peer);
        let msg = crate::sites::peer(&self.f.name, &self.site_op(op));
        self.fault_if(
            &format!("(unsigned long long){p} >= (unsigned long long)rt->nranks"),
            msg,
            &p,
            "rt->nranks",
        );
    }

    /// `trap_if cond, a, b, kind`: stops the rank with `kind`'s message.
    pub(super) fn emit_trap(&mut self, op: &Op) {
        if let OpKind::TrapIf { cond, a, b, kind } = &op.kind {
            let msg = crate::sites::trap(&self.f.name, &self.site_op(op), *kind);
            let (c, av, bv) = (self.v(*cond), self.v(*a), self.v(*b));
            self.fault_if(&c, msg, &av, &bv);
        }
    }
}
