//! Agreement between ranks: before processes that each run the host program do anything
//! together (allocate windows, gather outputs, vote on success), they compare where they are
//! and what they hold, so that a difference is an error on every rank instead of a hang or a
//! silent wrong result.
//!
//! This module is the pure part: what one rank brings ([`Stance`]), its wire form, and the
//! rule that judges every rank's stance ([`judge`]). The transport that exchanges stances
//! (point-to-point messages with a timeout) is `mpi_rt::agree`; keeping the rule here lets it
//! be tested without MPI.
//!
//! The rule, in order (tested in `tests/mpi.rs`, and under `mpirun` by `.ci/run` with
//! `examples/mpi_faults.rs`):
//! 1. Every rank must be at the same *point* (e.g. "launch #2 of `ring_get`"); otherwise the
//!    ranks run different programs, or one skipped a step: [`RuntimeError::RanksDisagree`]
//!    naming both points.
//! 2. A rank that brings an error (it failed before the point: a bad argument, a compile
//!    error) makes every rank fail with [`RuntimeError::RankFailed`] naming the lowest such
//!    rank and its message.
//! 3. Every *fact* (a key and a value: an argument's shape and dtype, a program digest) must be
//!    equal on every rank; the first that differs is [`RuntimeError::RanksDisagree`] naming the
//!    key and both values.

use crate::RuntimeError;

/// What one rank brings to an agreement point.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stance {
    /// Where the rank is, in words ("launch #2 of `ring_get`").
    pub point: String,
    /// The error this rank met before reaching the point, if any.
    pub error: Option<String>,
    /// Facts every rank must share, as (key, value) in a fixed order: `("argument `x`",
    /// "shape [4, 8], f32")`.
    pub facts: Vec<(String, String)>,
}

impl Stance {
    /// A stance at `point` with no error and no facts.
    pub fn at(point: impl Into<String>) -> Stance {
        Stance {
            point: point.into(),
            ..Stance::default()
        }
    }
    /// Adds a fact.
    #[must_use]
    pub fn fact(mut self, key: impl Into<String>, value: impl Into<String>) -> Stance {
        self.facts.push((key.into(), value.into()));
        self
    }
    /// Sets the error this rank met before the point.
    #[must_use]
    pub fn failed(mut self, error: Option<String>) -> Stance {
        self.error = error;
        self
    }

    /// The wire form: length-prefixed UTF-8 fields (u32 little-endian lengths).
    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![];
        put(&mut v, self.point.as_bytes());
        match &self.error {
            Some(e) => {
                v.push(1);
                put(&mut v, e.as_bytes());
            }
            None => v.push(0),
        }
        v.extend_from_slice(&(self.facts.len() as u32).to_le_bytes());
        for (k, val) in &self.facts {
            put(&mut v, k.as_bytes());
            put(&mut v, val.as_bytes());
        }
        v
    }

    /// Reads [`Stance::encode`]'s form; `None` for bytes that are not one.
    pub fn decode(mut b: &[u8]) -> Option<Stance> {
        let point = text(&mut b)?;
        let (&flag, rest) = b.split_first()?;
        b = rest;
        let error = match flag {
            0 => None,
            1 => Some(text(&mut b)?),
            _ => return None,
        };
        let n = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
        b = &b[4..];
        let mut facts = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            facts.push((text(&mut b)?, text(&mut b)?));
        }
        b.is_empty().then_some(Stance {
            point,
            error,
            facts,
        })
    }
}

fn put(v: &mut Vec<u8>, s: &[u8]) {
    v.extend_from_slice(&(s.len() as u32).to_le_bytes());
    v.extend_from_slice(s);
}

fn text(b: &mut &[u8]) -> Option<String> {
    let n = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
    let s = b.get(4..4usize.checked_add(n)?)?;
    let out = String::from_utf8(s.to_vec()).ok()?;
    *b = &b[4 + n..];
    Some(out)
}

/// Judges every rank's stance (index = rank) from rank `me`'s side, by the rule in the module
/// docs. Every rank judges the same list, so every rank reaches the same verdict.
///
/// # Errors
/// [`RuntimeError::RanksDisagree`] for different points or facts, [`RuntimeError::RankFailed`]
/// for a rank that brought an error.
pub fn judge(me: usize, stances: &[Stance]) -> Result<(), RuntimeError> {
    let Some(mine) = stances.get(me) else {
        return Ok(());
    };
    if let Some((q, other)) = stances
        .iter()
        .enumerate()
        .find(|(_, s)| s.point != mine.point)
    {
        // A rank that brought its own error to another point (it failed before a launch the
        // others reached, and went on to the final vote) is the cause: name it and its error.
        if let Some((f, e)) = stances
            .iter()
            .enumerate()
            .find_map(|(f, s)| s.error.as_ref().map(|e| (f, e)))
        {
            // The lowest rank at another point than the failing one (the same on every rank).
            let o = stances
                .iter()
                .position(|s| s.point != stances[f].point)
                .unwrap_or(q);
            return Err(RuntimeError::RankFailed {
                rank: f,
                cause: crate::Cause::Peer(format!(
                    "{e} (rank {f} is at {} while rank {o} is at {}; every rank stops)",
                    stances[f].point, stances[o].point,
                )),
            });
        }
        let (a, b) = if q < me {
            ((q, other), (me, mine))
        } else {
            ((me, mine), (q, other))
        };
        return Err(RuntimeError::RanksDisagree {
            point: mine.point.clone(),
            message: format!(
                "rank {} is at {} while rank {} is at {}: the ranks run different programs or command lines, or one skipped a step; start every rank with the same program and arguments, and make every rank reach the same launches",
                a.0, a.1.point, b.0, b.1.point
            ),
        });
    }
    if let Some((q, e)) = stances
        .iter()
        .enumerate()
        .find_map(|(q, s)| s.error.as_ref().map(|e| (q, e)))
    {
        return Err(RuntimeError::RankFailed {
            rank: q,
            cause: crate::Cause::Peer(format!("{e} (before {}; every rank stops)", mine.point)),
        });
    }
    for (q, other) in stances.iter().enumerate() {
        if other.facts == mine.facts {
            continue;
        }
        let (lo, hi) = if q < me { (other, mine) } else { (mine, other) };
        let (rlo, rhi) = (q.min(me), q.max(me));
        let n = lo.facts.len().max(hi.facts.len());
        let none = (String::from("(nothing)"), String::from("(nothing)"));
        for i in 0..n {
            let a = lo.facts.get(i).unwrap_or(&none);
            let b = hi.facts.get(i).unwrap_or(&none);
            if a != b {
                // Facts of different names (a plane named `x` on one rank and `y` on another)
                // name themselves, so that the two sides never read the same.
                let (what, va, vb) = if a.0 == b.0 {
                    (a.0.clone(), a.1.clone(), b.1.clone())
                } else {
                    (
                        format!("{} / {}", a.0, b.0),
                        format!("{} ({})", a.0, a.1),
                        format!("{} ({})", b.0, b.1),
                    )
                };
                return Err(RuntimeError::RanksDisagree {
                    point: mine.point.clone(),
                    message: format!(
                        "{what} differs between ranks: rank {rlo} has {va}, rank {rhi} has {vb}; every rank must run the same program, with the same command line and the same argument shapes and dtypes",
                    ),
                });
            }
        }
    }
    Ok(())
}
