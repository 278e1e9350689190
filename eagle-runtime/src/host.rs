//! Host-side execution: argument checking and the host-function interpreter, which turns a
//! host program into one list of dispatches per rank (a [`Launch`]) for the executor that
//! [`crate::executor::select`] picks.

use crate::error::{Cause, RuntimeError};
use crate::exec::Launch;
use crate::job::{Arg, RunReport};
use crate::job::{Job, JobArg};
use crate::options::RunOptions;
use eagle_codegen::Artifact;
use eagle_ir::entity::SecondaryMap;
use eagle_ir::eval::{self, Scalar};
use eagle_ir::{Block, Const, DType, Function, OpKind, Type, Value};
use std::time::Instant;

#[derive(Debug, Clone)]
enum Hv {
    C(Const, DType),
    Slice {
        arg: usize,
        off: usize,
        bytes: usize,
    },
    Buf(usize),
    Win(usize),
}

struct Interp<'a> {
    f: &'a Function,
    art: &'a Artifact,
    vals: SecondaryMap<Value, Hv>,
    windows: Vec<(usize, usize, String)>,
    jobs: Vec<Vec<Job>>,
    p: usize,
}

impl Interp<'_> {
    fn bad(&self, msg: impl Into<String>) -> RuntimeError {
        RuntimeError::RankFailed {
            rank: 0,
            cause: Cause::Host(format!("host function `{}`: {}", self.f.name, msg.into())),
        }
    }

    fn c(&self, v: Value) -> Result<(Const, DType), RuntimeError> {
        match self.vals.get(v) {
            Some(Hv::C(c, d)) => Ok((*c, *d)),
            _ => Err(self.bad(format!("value %{} is not a scalar", v.0))),
        }
    }

    fn int(&self, v: Value) -> Result<i128, RuntimeError> {
        match self.c(v)? {
            (Const::Int(i), _) => Ok(i),
            _ => Err(self.bad(format!("value %{} is not an integer", v.0))),
        }
    }

    /// An elementwise op (or a math-library call) on constants: the reference evaluator
    /// defines what it computes.
    fn elementwise(&self, op: &eagle_ir::Op, rd: Option<DType>) -> Result<Hv, RuntimeError> {
        let args = op
            .kind
            .operands()
            .into_iter()
            .map(|v| {
                let (c, d) = self.c(v)?;
                Scalar::from_const(c, d)
                    .ok_or_else(|| self.bad(format!("value %{} does not hold a `{d}`", v.0)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let d = rd.unwrap_or(DType::Index);
        let r = eval::elementwise(&op.kind, &args, d)
            .map_err(|e| self.bad(format!("`{}`: {e}", eagle_ir::print_op(self.f, op))))?;
        Ok(Hv::C(r.to_const(), r.dtype()))
    }

    /// `src[index]` of a tensor argument: the bytes of that row.
    fn slice(&self, op: &eagle_ir::Op, src: Value, index: Value) -> Result<Hv, RuntimeError> {
        let i = self.int(index)?;
        let extent = self
            .f
            .ty(src)
            .shape()
            .and_then(|s| s.0.first()?.as_const())
            .unwrap_or(0);
        if i < 0 || i >= extent as i128 {
            return Err(self.bad(format!("index {i} is outside 0..{extent}")));
        }
        let rt = op.result.map(|r| self.f.ty(r).clone());
        let bytes = rt
            .as_ref()
            .and_then(|t| Some(t.shape()?.numel()? as usize * t.dtype()?.size()))
            .unwrap_or(0);
        match self.vals.get(src) {
            Some(Hv::Slice { arg, off, .. }) => Ok(Hv::Slice {
                arg: *arg,
                off: off + i as usize * bytes,
                bytes,
            }),
            _ => Err(self.bad("slice of a non-tensor")),
        }
    }

    /// A window buffer of the result's type: one more window of the launch.
    fn alloc_window_buffer(&mut self, op: &eagle_ir::Op) -> Hv {
        let t = op.result.map(|r| self.f.ty(r).clone());
        let bytes = t
            .as_ref()
            .and_then(|t| Some(t.shape()?.numel()? as usize * t.dtype()?.size()))
            .unwrap_or(0);
        let elem = t.as_ref().and_then(Type::dtype).map_or(1, DType::size);
        let desc = t
            .map(|t| match t.shape() {
                Some(s) => format!("{s} {}", t.dtype().map_or("", DType::name)),
                None => t.to_string(),
            })
            .unwrap_or_default();
        self.windows.push((bytes, elem, desc));
        Hv::Buf(self.windows.len() - 1)
    }

    /// A dispatch of `callee` on `device`: one more job of that rank.
    /// Names window `w` in its description (`[4] f32; \`src\` of \`ring\``) after the first
    /// parameter it is passed as, so that race and deadlock reports name the user's window.
    fn name_window(&mut self, w: usize, param: &str, callee: &str) {
        if let Some((_, _, desc)) = self.windows.get_mut(w) {
            if !desc.contains('`') {
                desc.push_str(&format!("; `{param}` of `{callee}`"));
            }
        }
    }

    fn dispatch(
        &mut self,
        callee: &str,
        args: &[Value],
        device: Value,
    ) -> Result<(), RuntimeError> {
        let d = self.int(device)?;
        if d < 0 || d as usize >= self.p {
            return Err(self.bad(format!(
                "dispatch to device {d}, outside the world 0..{}",
                self.p
            )));
        }
        let cf = self
            .art
            .module
            .function(callee)
            .ok_or_else(|| self.bad(format!("unknown callee `{callee}`")))?;
        let mut it = args.iter();
        let mut jargs = vec![];
        for p in &cf.params {
            if *cf.ty(p.value) == Type::Ctx {
                jargs.push(JobArg::Ctx);
                continue;
            }
            let a = it
                .next()
                .ok_or_else(|| self.bad("too few dispatch arguments"))?;
            jargs.push(match self.vals.get(*a).cloned() {
                Some(Hv::Slice { arg, off, bytes }) => JobArg::Tensor {
                    arg,
                    off,
                    bytes,
                    out: p.out,
                },
                Some(Hv::Win(w)) => {
                    self.name_window(w, &p.name, callee);
                    JobArg::Window(w)
                }
                Some(Hv::C(c, dt)) => JobArg::Scalar(crate::job::const_bits(c, dt)),
                _ => {
                    return Err(self.bad(format!(
                        "argument `{}` of `{callee}` has no host value",
                        p.name
                    )))
                }
            });
        }
        self.jobs[d as usize].push(Job {
            callee: callee.to_string(),
            args: jargs,
            buffers: vec![],
            host: vec![],
        });
        Ok(())
    }

    fn block(&mut self, b: &Block) -> Result<(), RuntimeError> {
        let f = self.f;
        for op in b.iter(&f.ops) {
            let rd = op.result.and_then(|r| self.f.ty(r).dtype());
            let val = match &op.kind {
                OpKind::Const(c) => Some(Hv::C(*c, rd.unwrap_or(DType::Index))),
                OpKind::Binary(..)
                | OpKind::Unary(..)
                | OpKind::Fma(..)
                | OpKind::Cmp(..)
                | OpKind::Select(..)
                | OpKind::Cast(_)
                | OpKind::Bitcast(_)
                | OpKind::Math(..) => {
                    Some(self.elementwise(op, rd)?)
                }
                // A variable's value lives under the `var` op's result.
                OpKind::Var(init) => {
                    let (c, d) = self.c(*init)?;
                    Some(Hv::C(c, d))
                }
                OpKind::Read(var) => {
                    let (c, d) = self.c(*var)?;
                    Some(Hv::C(c, d))
                }
                OpKind::Write(var, v) => {
                    let (c, d) = self.c(*v)?;
                    self.vals.insert(*var, Hv::C(c, d));
                    None
                }
                OpKind::For { var, lo, hi, body } => {
                    let (lo, hi) = (self.int(*lo)?, self.int(*hi)?);
                    for i in lo..hi {
                        self.vals.insert(*var, Hv::C(Const::Int(i), DType::Index));
                        self.block(body)?;
                    }
                    None
                }
                OpKind::While { flag, cap, body } => {
                    let mut turns = 0u64;
                    while matches!(self.c(*flag)?.0, Const::Bool(true)) {
                        if turns >= *cap {
                            let at = eagle_ir::print_op(self.f, op);
                            let at = at.lines().next().unwrap_or_default();
                            let site = eagle_codegen::sites::name_op(at, op.loc.as_ref());
                            let msg = eagle_codegen::sites::while_cap(&self.f.name, &site);
                            let cap = i64::try_from(*cap).unwrap_or(i64::MAX);
                            let turns = i64::try_from(turns).unwrap_or(i64::MAX);
                            return Err(self.bad(eagle_codegen::sites::fill(&msg, turns, cap)));
                        }
                        turns += 1;
                        self.block(body)?;
                    }
                    None
                }
                OpKind::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    if matches!(self.c(*cond)?.0, Const::Bool(true)) {
                        self.block(then_body)?;
                    } else {
                        self.block(else_body)?;
                    }
                    None
                }
                OpKind::Slice { src, index } => Some(self.slice(op, *src, *index)?),
                OpKind::AllocWindowBuffer => Some(self.alloc_window_buffer(op)),
                OpKind::Window(b2) => match self.vals.get(*b2) {
                    Some(Hv::Buf(i)) => Some(Hv::Win(*i)),
                    _ => return Err(self.bad("window of a non-buffer")),
                },
                OpKind::Dispatch {
                    callee,
                    args,
                    device,
                } => {
                    self.dispatch(callee, args, *device)?;
                    None
                }
                // The verifier refuses device work in a host function (the op table's
                // levels) and specialization folds `dim` and `world_size` to constants.
                OpKind::Dim(_)
                | OpKind::WorldSize
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
                | OpKind::Call { .. }
                | OpKind::Rank(_)
                | OpKind::NRanks(_)
                | OpKind::Group { .. }
                | OpKind::Split { .. }
                | OpKind::WorldRank { .. }
                | OpKind::Put { .. }
                | OpKind::Get { .. }
                | OpKind::RemoteLoad { .. }
                | OpKind::RemoteStore { .. }
                | OpKind::Notify { .. }
                | OpKind::Wait { .. }
                | OpKind::Barrier(_)
                | OpKind::TrapIf { .. }
                | OpKind::LocalArray
                | OpKind::Tile(..) => {
                    return Err(self.bad(format!(
                        "`{}`{}: {} is not run by the host interpreter (the module was not verified and specialized)",
                        eagle_ir::print_op(self.f, op),
                        eagle_ir::at(op.loc.as_ref()),
                        op.kind.info().what
                    )))
                }
            };
            if let (Some(r), Some(v)) = (op.result, val) {
                self.vals.insert(r, v);
            }
        }
        Ok(())
    }
}

/// Checks `args` against the artifact's host function and returns them.
fn check_args(f: &Function, args: &[Arg<'_>]) -> Result<(), RuntimeError> {
    if args.len() != f.params.len() {
        return Err(RuntimeError::Argument {
            function: f.name.clone(),
            argument: "(all)".into(),
            expected: format!("{} argument(s)", f.params.len()),
            found: format!("{}", args.len()),
        });
    }
    for (p, a) in f.params.iter().zip(args) {
        let t = f.ty(p.value);
        let bad = |expected: String| RuntimeError::Argument {
            function: f.name.clone(),
            argument: p.name.clone(),
            expected,
            found: a.describe(),
        };
        a.check_len(&f.name, &p.name)?;
        match (t, a) {
            (Type::Tensor(s, d), Arg::In(..) | Arg::Out(..)) => {
                let want: Vec<usize> = s
                    .consts()
                    .unwrap_or_default()
                    .iter()
                    .map(|&x| x as usize)
                    .collect();
                let (shape, dt) = match a {
                    Arg::In(s, d, _) | Arg::Out(s, d, _) => (s, *d),
                    Arg::Scalar(..) => unreachable!("matched tensors above"),
                };
                if dt != *d || *shape != want {
                    return Err(bad(format!("a tensor {want:?} of {d}")));
                }
                if p.out && !matches!(a, Arg::Out(..)) {
                    return Err(bad(format!(
                        "a mutable tensor {want:?} of {d} (the parameter is `Out`; pass `&mut`)"
                    )));
                }
            }
            (Type::Scalar(d), Arg::Scalar(_, ad)) if d == ad => {}
            (t, _) => return Err(bad(format!("`{t}`"))),
        }
    }
    Ok(())
}

/// Runs the artifact's host function on a simulated world of `p` devices with `args`.
///
/// # Errors
/// [`RuntimeError::Argument`] for arguments that do not match the specialized signature;
/// [`RuntimeError::RankFailed`] with the first failing rank's error (the other ranks are
/// stopped); [`RuntimeError::Deadlock`] naming what every rank waits for;
/// [`RuntimeError::Env`] for an `EAGLE_*` variable it does not understand (see
/// [`RunOptions::from_env`]).
pub fn run(art: &Artifact, args: &mut [Arg<'_>], p: usize) -> Result<RunReport, RuntimeError> {
    run_with(art, args, p, &RunOptions::from_env()?)
}

/// [`run`] with explicit [`RunOptions`].
///
/// # Errors
/// As [`run`]; with `race_check`, a data race is [`RuntimeError::RankFailed`] on the reading
/// rank, naming both ranks, the window and the elements.
pub fn run_with(
    art: &Artifact,
    args: &mut [Arg<'_>],
    p: usize,
    opts: &RunOptions,
) -> Result<RunReport, RuntimeError> {
    let f = art
        .module
        .function(&art.root)
        .ok_or_else(|| RuntimeError::Argument {
            function: art.root.clone(),
            argument: "(root)".into(),
            expected: "a host function".into(),
            found: "nothing".into(),
        })?;
    check_args(f, args)?;
    let mut it = Interp {
        f,
        art,
        vals: SecondaryMap::with_capacity(f.values.len()),
        windows: vec![],
        jobs: (0..p).map(|_| vec![]).collect(),
        p,
    };
    for (i, (prm, a)) in f.params.iter().zip(args.iter()).enumerate() {
        let v = match a {
            Arg::Scalar(c, d) => Hv::C(*c, *d),
            _ => Hv::Slice {
                arg: i,
                off: 0,
                bytes: a.shape().map_or(0, |s| s.iter().product::<usize>())
                    * f.ty(prm.value).dtype().map_or(0, DType::size),
            },
        };
        it.vals.insert(prm.value, v);
    }
    it.block(&f.body)?;
    let t0 = Instant::now();
    let Interp { windows, jobs, .. } = it;
    crate::executor::select(opts)?
        .run(Launch {
            art,
            args,
            p,
            jobs,
            windows,
            opts,
            t0,
        })
        .map_err(|e| match e {
            // A rank of a program with rank groups is named by its place in their grids too.
            RuntimeError::RankFailed { rank, cause } => RuntimeError::RankFailed {
                rank,
                cause: match art.rank_place(rank) {
                    Some(at) => cause.map(|m| format!("{m} (rank {rank} is {at})")),
                    None => cause,
                },
            },
            other => other,
        })
}
