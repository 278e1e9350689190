//! Host-side execution: argument checking, the host-function interpreter, dispatch of
//! per-device programs to device threads, and copy-back of outputs.

use crate::error::{Cause, RuntimeError};
use crate::job::{dispatch_span, forward_host, Job, JobArg};
use crate::job::{Arg, RunReport};
use crate::options::RunOptions;
use crate::sim::{self, Failure, RankEnv, WindowMem, World};
use eagle_codegen::Artifact;
use eagle_ir::eval::{self, Scalar};
use eagle_ir::{Block, Const, DType, Function, OpKind, Type, Value};
use std::collections::HashMap;
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
    vals: HashMap<Value, Hv>,
    windows: Vec<(usize, usize, String)>,
    jobs: Vec<Vec<Job>>,
    p: usize,
}

/// The ABI slot of scalar `c` of dtype `d`: a float's bits, an integer sign- or
/// zero-extended to 64 bits, a bool 0 or 1.
fn const_bits(c: Const, d: DType) -> u64 {
    // A 16-bit float is held as the `f32` of its value; its argument is its pattern.
    if let Some(s) = eagle_ir::eval::Scalar::from_const(c, d) {
        return s.bits();
    }
    match c {
        Const::F32(x) => x.to_bits() as u64,
        Const::F64(x) => x.to_bits(),
        Const::Int(i) => i as u64,
        Const::Bool(b) => b as u64,
    }
}

impl Interp<'_> {
    fn bad(&self, msg: impl Into<String>) -> RuntimeError {
        RuntimeError::RankFailed {
            rank: 0,
            cause: Cause::Host(format!("host function `{}`: {}", self.f.name, msg.into())),
        }
    }

    fn c(&self, v: Value) -> Result<(Const, DType), RuntimeError> {
        match self.vals.get(&v) {
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

    fn block(&mut self, b: &Block) -> Result<(), RuntimeError> {
        for op in &b.ops {
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
                    // The reference evaluator defines what the op computes.
                    let args = op
                        .kind
                        .operands()
                        .into_iter()
                        .map(|v| {
                            let (c, d) = self.c(v)?;
                            Scalar::from_const(c, d).ok_or_else(|| {
                                self.bad(format!("value %{} does not hold a `{d}`", v.0))
                            })
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    let d = rd.unwrap_or(DType::Index);
                    let r = eval::elementwise(&op.kind, &args, d).map_err(|e| {
                        self.bad(format!("`{}`: {e}", eagle_ir::print_op(self.f, op)))
                    })?;
                    Some(Hv::C(r.to_const(), r.dtype()))
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
                OpKind::Slice { src, index } => {
                    let i = self.int(*index)?;
                    let st = self.f.ty(*src);
                    let extent = st
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
                        Some(Hv::Slice { arg, off, .. }) => Some(Hv::Slice {
                            arg: *arg,
                            off: off + i as usize * bytes,
                            bytes,
                        }),
                        _ => return Err(self.bad("slice of a non-tensor")),
                    }
                }
                OpKind::AllocWindowBuffer => {
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
                    Some(Hv::Buf(self.windows.len() - 1))
                }
                OpKind::Window(b2) => match self.vals.get(b2) {
                    Some(Hv::Buf(i)) => Some(Hv::Win(*i)),
                    _ => return Err(self.bad("window of a non-buffer")),
                },
                OpKind::Dispatch {
                    callee,
                    args,
                    device,
                } => {
                    let d = self.int(*device)?;
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
                        jargs.push(match self.vals.get(a).cloned() {
                            Some(Hv::Slice { arg, off, bytes }) => JobArg::Tensor {
                                arg,
                                off,
                                bytes,
                                out: p.out,
                            },
                            Some(Hv::Win(w)) => JobArg::Window(w),
                            Some(Hv::C(c, dt)) => JobArg::Scalar(const_bits(c, dt)),
                            _ => {
                                return Err(self.bad(format!(
                                    "argument `{}` of `{callee}` has no host value",
                                    p.name
                                )))
                            }
                        });
                    }
                    self.jobs[d as usize].push(Job {
                        callee: callee.clone(),
                        args: jargs,
                        buffers: vec![],
                        host: vec![],
                    });
                    None
                }
                // The verifier refuses device work in a host function (the op table's
                // levels) and specialization folds `dim` and `world_size` to constants.
                OpKind::Dim(_)
                | OpKind::WorldSize
                | OpKind::Subview { .. }
                | OpKind::Broadcast { .. }
                | OpKind::AllGather { .. }
                | OpKind::ReduceScatter { .. }
                | OpKind::AllReduce { .. }
                | OpKind::AllToAll { .. }
                | OpKind::Elem { .. }
                | OpKind::SetElem { .. }
                | OpKind::Load { .. }
                | OpKind::Store { .. }
                | OpKind::Call { .. }
                | OpKind::Rank(_)
                | OpKind::NRanks(_)
                | OpKind::Put { .. }
                | OpKind::Get { .. }
                | OpKind::RemoteLoad { .. }
                | OpKind::RemoteStore { .. }
                | OpKind::Notify { .. }
                | OpKind::Wait { .. }
                | OpKind::Barrier(_)
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
        vals: HashMap::new(),
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
    let Interp {
        windows, mut jobs, ..
    } = it;
    if opts.platform == crate::Platform::Cuda {
        #[cfg(feature = "cuda")]
        return crate::cuda::run(art, args, p, jobs, windows, opts);
        #[cfg(not(feature = "cuda"))]
        return Err(RuntimeError::PlatformUnavailable {
            platform: "cuda".into(),
            reason: "this build has no `cuda` feature; rebuild with `--features cuda`".into(),
        });
    }
    #[cfg(feature = "mpi")]
    if crate::mpi_rt::active() {
        return run_mpi(art, args, p, jobs, windows, opts, t0);
    }
    let dispatches: usize = jobs.iter().map(Vec::len).sum();
    if dispatches == 0 {
        // Nothing runs on any device: no world, no device thread, nothing to copy back.
        return Ok(RunReport {
            run_time: t0.elapsed(),
            dispatches,
            copied_bytes: 0,
        });
    }
    // Platform `cpu` runs device code on the host tensors in place where that gives the same
    // results as private copies; `sim` always copies (separate per-device memories catch
    // programs that rely on sharing).
    let base = |i: usize| match &args[i] {
        Arg::In(_, _, b) => b.as_ptr() as u64,
        Arg::Out(_, _, b) => b.as_ptr() as u64,
        Arg::Scalar(..) => 0,
    };
    let in_place =
        opts.platform == crate::Platform::Cpu && crate::job::host_memory_shareable(&jobs, &base);
    let mut copied_bytes = 0;
    for js in &mut jobs {
        for j in js.iter_mut() {
            if in_place {
                j.host = j
                    .args
                    .iter()
                    .filter_map(|a| match a {
                        JobArg::Tensor { arg, off, .. } => Some(base(*arg) + *off as u64),
                        _ => None,
                    })
                    .collect();
            } else {
                copied_bytes += copy_in(j, args);
            }
        }
    }
    // Ranks that dispatch nothing have no task; the world counts only the ranks that run.
    let ranks: Vec<usize> = (0..p).filter(|&r| !jobs[r].is_empty()).collect();
    let live = ranks.len();
    // Ranks whose programs reach no other rank (no collective, remote movement, signal or
    // barrier) cannot observe each other: they run one after another on one thread, in rank
    // order, instead of one thread each (one hand-off per launch instead of P).
    let isolated = jobs
        .iter()
        .flatten()
        .all(|j| art.isolated.contains(&j.callee));
    let wins = windows
        .into_iter()
        .map(|(bytes, elem, desc)| WindowMem::new(p, bytes, elem, desc))
        .collect();
    let world = World::new(p, wins, art, live, opts);
    let world_ref = &world;
    // Device threads run each dispatch in a span whose parent is the caller's (the launch).
    let parent = tracing::Span::current();
    let parent = &parent;
    let mut jobs: Vec<Option<Vec<Job>>> = jobs.into_iter().map(Some).collect();
    let tasks: Vec<DeviceTask<'_>> = if isolated {
        let all: Vec<(usize, Vec<Job>)> = ranks
            .iter()
            .map(|&r| (r, jobs[r].take().unwrap_or_default()))
            .collect();
        vec![Box::new(move || {
            all.into_iter()
                .map(|(rank, js)| device_main(world_ref, rank, js, parent))
                .collect()
        })]
    } else {
        ranks
            .iter()
            .map(|&rank| {
                let js = jobs[rank].take().unwrap_or_default();
                let t: DeviceTask<'_> =
                    Box::new(move || vec![device_main(world_ref, rank, js, parent)]);
                t
            })
            .collect()
    };
    let per_task = if isolated { live } else { 1 };
    let results: Vec<(usize, Outcome)> = crate::pool::run_all(tasks, 16 << 20)
        .into_iter()
        .flat_map(|r| match r {
            Ok(v) => v,
            Err(m) => (0..per_task)
                .map(|_| (vec![], Some(Failure::Error(Cause::Device(m.clone())))))
                .collect(),
        })
        .zip(ranks.iter().copied())
        .map(|(o, rank)| (rank, o))
        .collect();
    for (rank, (_, fail)) in &results {
        if let Some(Failure::Error(m)) = fail {
            return Err(RuntimeError::RankFailed {
                rank: *rank,
                cause: m.clone(),
            });
        }
    }
    if let Some(report) = world.deadlock.lock().ok().and_then(|d| d.clone()) {
        return Err(RuntimeError::Deadlock { report });
    }
    if results.iter().any(|(_, (_, f))| f.is_some()) {
        return Err(RuntimeError::RankFailed {
            rank: 0,
            cause: Cause::Device("the run was aborted".into()),
        });
    }
    // Copy outputs back (none when the run used the host tensors in place).
    for (_, (js, _)) in results.iter().filter(|_| !in_place) {
        for j in js {
            let mut k = 0;
            for a in &j.args {
                if let JobArg::Tensor {
                    arg,
                    off,
                    bytes,
                    out,
                } = a
                {
                    if *out {
                        if let Arg::Out(_, _, dst) = &mut args[*arg] {
                            // SAFETY: the buffer holds at least `bytes` bytes.
                            let src = unsafe {
                                std::slice::from_raw_parts(
                                    j.buffers[k].as_ptr().cast::<u8>(),
                                    *bytes,
                                )
                            };
                            dst[*off..off + bytes].copy_from_slice(src);
                            copied_bytes += *bytes;
                        }
                    }
                    k += 1;
                }
            }
        }
    }
    Ok(RunReport {
        run_time: t0.elapsed(),
        dispatches,
        copied_bytes,
    })
}

/// One device's run: its jobs back (with their buffers) and how it ended.
type Outcome = (Vec<Job>, Option<Failure>);

/// A pool task: the outcomes of the devices it runs, in rank order.
type DeviceTask<'a> = Box<dyn FnOnce() -> Vec<Outcome> + Send + 'a>;

fn device_main(
    world: &World<'_>,
    rank: usize,
    mut jobs: Vec<Job>,
    parent: &tracing::Span,
) -> (Vec<Job>, Option<Failure>) {
    let mut failure = None;
    for ji in 0..jobs.len() {
        if jobs[ji].host.is_empty() {
            forward_host(&mut jobs, ji);
        }
        let j = &mut jobs[ji];
        let _dispatch = dispatch_span(parent, rank, &j.callee).entered();
        let Some(entry) = world.artifact.code.entries.get(&j.callee).copied() else {
            failure = Some(Failure::Error(Cause::Device(format!(
                "no compiled code for `{}`",
                j.callee
            ))));
            break;
        };
        let mut k = 0;
        let mut slots = vec![];
        for a in &j.args {
            slots.push(match a {
                JobArg::Tensor { .. } => {
                    let p = match j.host.get(k) {
                        Some(&h) => h,
                        None => j.buffers[k].as_mut_ptr() as u64,
                    };
                    k += 1;
                    p
                }
                JobArg::Window(w) => *w as u64,
                JobArg::Scalar(b) => *b,
                JobArg::Ctx => 0,
            });
        }
        let mut env = RankEnv {
            world,
            rank,
            error: None,
        };
        let mut ctx = sim::device_ctx(&mut env, world.p);
        // SAFETY: `entry` was compiled with the `EntryFn` ABI for this callee; `slots` has one
        // slot per parameter as the ABI requires, tensor slots point to live buffers of the
        // parameter's size, and `ctx` outlives the call.
        let st = unsafe { entry(&mut ctx, slots.as_ptr()) };
        if st != 0 {
            failure = Some(
                env.error
                    .take()
                    .unwrap_or(Failure::Error(Cause::Device(format!(
                        "`{}` returned status {st}",
                        j.callee
                    )))),
            );
            break;
        }
    }
    if matches!(failure, Some(Failure::Error(_))) {
        world.abort_all();
    }
    world.retire(rank);
    (jobs, failure)
}

/// A compiled function of an artifact, called on one device of a one-rank world with no
/// window buffers (what an execution plan does for each share of samples), on behalf of
/// `rank` (the rank its errors name). Build one per worker thread and call it as often as
/// needed: a call reads no environment variable and allocates nothing.
pub struct EntryCaller<'a> {
    world: World<'a>,
    entry: eagle_codegen::abi::EntryFn,
    name: &'a str,
    rank: usize,
}

impl<'a> EntryCaller<'a> {
    /// The caller of function `name` of `art`.
    ///
    /// # Errors
    /// [`RuntimeError::RankFailed`] (naming `rank`) when the function has no compiled code.
    pub fn new(art: &'a Artifact, name: &'a str, rank: usize) -> Result<Self, RuntimeError> {
        let entry =
            art.code
                .entries
                .get(name)
                .copied()
                .ok_or_else(|| RuntimeError::RankFailed {
                    rank,
                    cause: Cause::Device(format!("no compiled code for `{name}`")),
                })?;
        // A one-rank world without windows: no wait can block and no peer can race, so the
        // options (timeouts, the race detector) do not apply.
        let opts = RunOptions {
            race_check: false,
            ..RunOptions::default()
        };
        Ok(EntryCaller {
            world: World::new(1, vec![], art, 1, &opts),
            entry,
            name,
            rank,
        })
    }

    /// Calls the function with `slots`: one ABI slot per parameter (pointers for tensors, bits
    /// for scalars).
    ///
    /// # Safety
    /// Every tensor slot points to a live buffer of at least its parameter's size, which
    /// nothing else writes during the call (nor reads, for an output).
    ///
    /// # Errors
    /// [`RuntimeError::RankFailed`] (naming the rank) when a run-time check fails: the message
    /// names the function, the op and the values.
    pub unsafe fn call(&self, slots: &[u64]) -> Result<(), RuntimeError> {
        let mut env = RankEnv {
            world: &self.world,
            rank: 0,
            error: None,
        };
        let mut ctx = sim::device_ctx(&mut env, 1);
        // SAFETY: `entry` was compiled with the `EntryFn` ABI; the caller passes one slot per
        // parameter, tensor slots pointing to live buffers of the parameter's size.
        let st = unsafe { (self.entry)(&mut ctx, slots.as_ptr()) };
        if st != 0 {
            let cause = match env.error.take() {
                Some(Failure::Error(m)) => m,
                _ => Cause::Device(format!("`{}` returned status {st}", self.name)),
            };
            return Err(RuntimeError::RankFailed {
                rank: self.rank,
                cause,
            });
        }
        Ok(())
    }
}

/// Copies the tensor arguments of `j` from the host into fresh device buffers; returns the
/// bytes copied.
fn copy_in(j: &mut Job, args: &[Arg<'_>]) -> usize {
    let mut copied = 0;
    for a in &j.args {
        if let JobArg::Tensor {
            arg, off, bytes, ..
        } = a
        {
            let mut buf = vec![0u64; bytes.div_ceil(8).max(1)];
            let src = match &args[*arg] {
                Arg::In(_, _, b) => &b[*off..off + bytes],
                Arg::Out(_, _, b) => &b[*off..off + bytes],
                Arg::Scalar(..) => &[][..],
            };
            // SAFETY: `buf` holds at least `bytes` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src.as_ptr(),
                    buf.as_mut_ptr().cast::<u8>(),
                    src.len(),
                )
            };
            j.buffers.push(buf);
            copied += bytes;
        }
    }
    copied
}

/// The host program under MPI: this process runs the dispatches of its own rank, then the
/// ranks exchange the output slices they wrote so that every rank holds the whole output.
#[cfg(feature = "mpi")]
fn run_mpi(
    art: &Artifact,
    args: &mut [Arg<'_>],
    p: usize,
    mut jobs: Vec<Vec<Job>>,
    windows: Vec<(usize, usize, String)>,
    opts: &RunOptions,
    t0: Instant,
) -> Result<RunReport, RuntimeError> {
    use crate::mpi_rt;
    let (rank, size) = mpi_rt::world();
    if p != size {
        return Err(RuntimeError::Devices(format!(
            "mpirun started {size} process(es) but the device list has {p} device(s); give one device per process, e.g. `mpirun -np {p} eagle -d ...` with {p} ids"
        )));
    }
    // Every rank must allocate the same windows: compare the lists before allocating.
    let list = |ws: &[(usize, usize, String)]| {
        format!(
            "{} window(s) of {:?} bytes",
            ws.len(),
            ws.iter().map(|w| w.0).collect::<Vec<_>>()
        )
    };
    let stance = crate::agree::Stance::at(format!("the windows of `{}`", art.root))
        .fact("the window list", list(&windows));
    mpi_rt::agree(&stance, opts.wait_timeout)?;
    let wins = mpi_rt::Windows::allocate(
        &windows.iter().map(|w| w.0).collect::<Vec<_>>(),
        opts.wait_timeout,
    );
    let dispatches = jobs.iter().map(Vec::len).sum();
    let mut copied_bytes = 0;
    for ji in 0..jobs[rank].len() {
        copied_bytes += copy_in(&mut jobs[rank][ji], args);
        forward_host(&mut jobs[rank], ji);
        let j = &mut jobs[rank][ji];
        let _dispatch = dispatch_span(&tracing::Span::current(), rank, &j.callee).entered();
        let Some(entry) = art.code.entries.get(&j.callee).copied() else {
            mpi_rt::fail_job(
                rank,
                &RuntimeError::RankFailed {
                    rank,
                    cause: Cause::Device(format!("no compiled code for `{}`", j.callee)),
                },
            );
        };
        let mut k = 0;
        let mut slots = vec![];
        for a in &j.args {
            slots.push(match a {
                JobArg::Tensor { .. } => {
                    let p = j.buffers[k].as_mut_ptr() as u64;
                    k += 1;
                    p
                }
                JobArg::Window(w) => *w as u64,
                JobArg::Scalar(b) => *b,
                JobArg::Ctx => 0,
            });
        }
        let mut env = mpi_rt::MpiEnv {
            wins: &wins,
            art,
            rank,
            size,
            timeout: opts.wait_timeout,
            error: None,
            pending: vec![],
            pending_bytes: 0,
        };
        let mut ctx = mpi_rt::device_ctx(&mut env);
        // SAFETY: as in `device_main`: the ABI slots match the callee's parameters.
        let st = unsafe { entry(&mut ctx, slots.as_ptr()) };
        // The dispatch's puts are complete before anything reads them (invariant 2).
        env.complete_puts();
        if st != 0 {
            let cause = env
                .error
                .take()
                .unwrap_or_else(|| Cause::Device(format!("`{}` returned status {st}", j.callee)));
            mpi_rt::fail_job(rank, &RuntimeError::RankFailed { rank, cause });
        }
    }
    // Every rank has run its dispatches (a failure in one aborted the job) before any output
    // is gathered; a rank that never gets here is named when the timeout runs out. A peer may
    // still be in a wait or a barrier that times out itself, with a more precise message:
    // give it 2 s more to report first.
    mpi_rt::agree(
        &crate::agree::Stance::at(format!("the end of the run of `{}`", art.root)),
        opts.wait_timeout
            .saturating_add(std::time::Duration::from_secs(2)),
    )?;
    // Every rank knows which output slices every rank wrote (all ran the same host program).
    let outs: Vec<usize> = (0..args.len())
        .filter(|&a| matches!(args[a], Arg::Out(..)))
        .collect();
    for a in outs {
        let ranges = |q: usize| -> Vec<(usize, usize, usize, usize)> {
            // (job, buffer index, offset, bytes)
            let mut v = vec![];
            for (ji, j) in jobs[q].iter().enumerate() {
                let mut k = 0;
                for ja in &j.args {
                    if let JobArg::Tensor {
                        arg,
                        off,
                        bytes,
                        out,
                    } = ja
                    {
                        if *arg == a && *out {
                            v.push((ji, k, *off, *bytes));
                        }
                        k += 1;
                    }
                }
            }
            v
        };
        let counts: Vec<usize> = (0..size)
            .map(|q| ranges(q).iter().map(|r| r.3).sum())
            .collect();
        let mut mine = Vec::with_capacity(counts[rank]);
        for (ji, k, _, bytes) in ranges(rank) {
            // SAFETY: the buffer holds at least `bytes` bytes.
            let b = unsafe {
                std::slice::from_raw_parts(jobs[rank][ji].buffers[k].as_ptr().cast::<u8>(), bytes)
            };
            mine.extend_from_slice(b);
        }
        let all = mpi_rt::allgather_bytes(&mine, &counts);
        let mut at = 0;
        if let Arg::Out(_, _, dst) = &mut args[a] {
            for q in 0..size {
                for (_, _, off, bytes) in ranges(q) {
                    dst[off..off + bytes].copy_from_slice(&all[at..at + bytes]);
                    at += bytes;
                    copied_bytes += bytes;
                }
            }
        }
    }
    wins.keep();
    let _ = &mut jobs;
    Ok(RunReport {
        run_time: t0.elapsed(),
        dispatches,
        copied_bytes,
    })
}
