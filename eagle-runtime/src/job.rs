//! A launch as the host interpreter produces it and the executors (sim, MPI, CUDA) run it:
//! the caller's arguments ([`Arg`]), one list of [`Job`]s (dispatches) per rank with their
//! arguments, the forwarding of bytes between a rank's jobs, and what a run did ([`RunReport`]).

use crate::error::RuntimeError;
use crate::tensor::{Element, Tensor};
use eagle_ir::{Const, DType};
use std::borrow::Cow;
use std::time::Duration;

/// A host-function argument.
#[derive(Debug)]
pub enum Arg<'a> {
    /// An input tensor: shape, dtype and bytes (row-major), borrowed from the caller's
    /// storage (a [`Tensor`], a standard-layout `ndarray` array) or, for a layout that had to
    /// be copied into row-major order, owned.
    In(Vec<usize>, DType, Cow<'a, [u8]>),
    /// An output tensor (read and written), always the caller's own storage.
    Out(Vec<usize>, DType, &'a mut [u8]),
    /// A scalar.
    Scalar(Const, DType),
}

impl<'a, T: Element> From<&'a Tensor<T>> for Arg<'a> {
    fn from(t: &'a Tensor<T>) -> Self {
        Arg::In(t.shape().to_vec(), T::DTYPE, Cow::Borrowed(t.bytes()))
    }
}
impl<'a, T: Element> From<&'a mut Tensor<T>> for Arg<'a> {
    fn from(t: &'a mut Tensor<T>) -> Self {
        Arg::Out(t.shape().to_vec(), T::DTYPE, t.bytes_mut())
    }
}

impl<'a> Arg<'a> {
    /// An input of shape `shape` whose elements, in row-major order, are `data` (borrowed: no
    /// copy). The length is checked against the shape at launch ([`Arg::check_len`]).
    pub fn input<T: Element>(shape: &[usize], data: &'a [T]) -> Arg<'a> {
        Arg::In(
            shape.to_vec(),
            T::DTYPE,
            Cow::Borrowed(crate::tensor::as_bytes(data)),
        )
    }
    /// An input that owns its row-major elements (what a copied, non-standard layout becomes).
    pub fn input_owned<T: Element>(shape: &[usize], data: Vec<T>) -> Arg<'static> {
        Arg::In(
            shape.to_vec(),
            T::DTYPE,
            Cow::Owned(crate::tensor::as_bytes(&data).to_vec()),
        )
    }
    /// An output of shape `shape` written into `data` in row-major order (no copy).
    pub fn output<T: Element>(shape: &[usize], data: &'a mut [T]) -> Arg<'a> {
        Arg::Out(shape.to_vec(), T::DTYPE, crate::tensor::as_bytes_mut(data))
    }
    /// A scalar's ABI slot (a float's bits, an integer sign- or zero-extended to 64 bits, a
    /// bool 0 or 1, a 16-bit float its pattern); `None` for a tensor.
    pub fn slot(&self) -> Option<u64> {
        match self {
            Arg::Scalar(c, d) => Some(const_bits(*c, *d)),
            _ => None,
        }
    }
    /// The address of a tensor argument's first byte (what the runtime reads or writes): equal
    /// to the caller's storage when nothing was copied.
    pub fn data_ptr(&self) -> Option<*const u8> {
        match self {
            Arg::In(_, _, b) => Some(b.as_ptr()),
            Arg::Out(_, _, b) => Some(b.as_ptr()),
            Arg::Scalar(..) => None,
        }
    }
}
/// The ABI slot of scalar `c` of dtype `d`: a float's bits, an integer sign- or
/// zero-extended to 64 bits, a bool 0 or 1.
pub(crate) fn const_bits(c: Const, d: DType) -> u64 {
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

/// A Rust scalar type an [`Arg::Scalar`] is made of: `f32`, `f64`, the integers of
/// `docs/language.md` (`usize` is the IR's `index`), `bool`, `f16` and `bf16`.
pub trait ScalarArg: Copy + for<'a> Into<Arg<'a>> {}

macro_rules! scalar_arg {
    ($($t:ty => $d:expr, $c:expr),*) => {$(
        impl ScalarArg for $t {}
        impl From<$t> for Arg<'_> {
            fn from(v: $t) -> Self {
                #[allow(clippy::redundant_closure_call)]
                Arg::Scalar(($c)(v), $d)
            }
        }
    )*};
}
scalar_arg!(
    f32 => DType::F32, Const::F32,
    f64 => DType::F64, Const::F64,
    i32 => DType::I32, |v: i32| Const::Int(v as i128),
    i64 => DType::I64, |v: i64| Const::Int(v as i128),
    u32 => DType::U32, |v: u32| Const::Int(v as i128),
    u64 => DType::U64, |v: u64| Const::Int(v as i128),
    usize => DType::Index, |v: usize| Const::Int(v as i128),
    bool => DType::Bool, Const::Bool,
    i8 => DType::I8, |v: i8| Const::Int(v as i128),
    u8 => DType::U8, |v: u8| Const::Int(v as i128),
    i16 => DType::I16, |v: i16| Const::Int(v as i128),
    u16 => DType::U16, |v: u16| Const::Int(v as i128),
    half::f16 => DType::F16, |v: half::f16| Const::F32(v.to_f32()),
    half::bf16 => DType::BF16, |v: half::bf16| Const::F32(v.to_f32()),
    float8::F8E4M3 => DType::F8E4M3, |v: float8::F8E4M3| Const::F32(v.to_f32()),
    float8::F8E5M2 => DType::F8E5M2, |v: float8::F8E5M2| Const::F32(v.to_f32()),
    crate::E8M0 => DType::E8M0, |v: crate::E8M0| Const::F32(v.to_f32())
);

impl Arg<'_> {
    /// Checks that a tensor argument carries as many bytes as its shape and dtype say (always
    /// true for arguments made from a [`Tensor`]; scalars always pass).
    ///
    /// # Errors
    /// [`RuntimeError::Argument`] naming `function` and `argument` when the byte length differs
    /// from the shape's, or the shape's size overflows `usize`.
    pub fn check_len(&self, function: &str, argument: &str) -> Result<(), RuntimeError> {
        let (shape, dtype, len) = match self {
            Arg::In(s, d, b) => (s, *d, b.len()),
            Arg::Out(s, d, b) => (s, *d, b.len()),
            Arg::Scalar(..) => return Ok(()),
        };
        let want = crate::tensor::checked_numel(shape).and_then(|n| n.checked_mul(dtype.size()));
        if want == Some(len) {
            return Ok(());
        }
        Err(RuntimeError::Argument {
            function: function.into(),
            argument: argument.into(),
            expected: match want {
                Some(w) => format!(
                    "{w} bytes for shape {shape:?} of {dtype}; build the argument from a `Tensor` (`Arg::from(&t)`)"
                ),
                None => format!(
                    "a shape whose size fits in memory; the product of {shape:?} elements of {dtype} overflows usize"
                ),
            },
            found: format!("{len} bytes"),
        })
    }
    /// The argument as errors describe it ("an input tensor [2, 8] of f32").
    pub(crate) fn describe(&self) -> String {
        match self {
            Arg::In(s, d, _) => format!("an input tensor {s:?} of {d}"),
            Arg::Out(s, d, _) => format!("a mutable tensor {s:?} of {d}"),
            Arg::Scalar(_, d) => format!("a {d} scalar"),
        }
    }
    /// The shape of a tensor argument.
    pub(crate) fn shape(&self) -> Option<&[usize]> {
        match self {
            Arg::In(s, ..) | Arg::Out(s, ..) => Some(s),
            Arg::Scalar(..) => None,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    /// Wall time from the first dispatch to the last copy-back.
    pub run_time: Duration,
    /// Per-device program dispatches executed.
    pub dispatches: usize,
    /// Bytes of tensor arguments copied between host tensors and device memory, in and out
    /// (0 on platform `cpu` when the run uses the host tensors in place).
    pub copied_bytes: usize,
}

pub(crate) enum JobArg {
    Tensor {
        arg: usize,
        off: usize,
        bytes: usize,
        out: bool,
    },
    Window(usize),
    Scalar(u64),
    Ctx,
}

pub(crate) struct Job {
    pub(crate) callee: String,
    pub(crate) args: Vec<JobArg>,
    /// Device copies of tensor args (aligned to 8 bytes), in arg order.
    pub(crate) buffers: Vec<Vec<u64>>,
    /// Or, when the run uses the host tensors in place (platform `cpu`), the host address of
    /// each tensor arg, in arg order (`buffers` is then empty).
    pub(crate) host: Vec<u64>,
}

impl Drop for Job {
    /// The device buffers go back to [`spare`] for the next launch.
    fn drop(&mut self) {
        spare::give_back(std::mem::take(&mut self.buffers));
    }
}

/// Device buffers kept between launches: a launch on `sim` (and each rank under MPI) copies its
/// tensor arguments into buffers of its own, and a fresh allocation of a large buffer is
/// fresh pages from the kernel, each faulted in and zeroed on first touch (more than half of
/// a `tp_ffn` launch on `sim` went there). Buffers of at least [`MIN_BYTES`] come back here
/// when their job is dropped and are reused by a later launch's arguments of a size they can
/// hold, up to [`MAX_BYTES`] in all; smaller ones are malloc's business.
mod spare {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    /// The most bytes of buffers kept (more are freed).
    pub(super) const MAX_BYTES: usize = 256 << 20;
    /// The smallest buffer kept, in bytes.
    pub(super) const MIN_BYTES: usize = 16 << 10;

    /// Kept buffers by capacity in words, and the bytes they hold.
    struct Spare {
        by_words: BTreeMap<usize, Vec<Vec<u64>>>,
        held: usize,
    }

    static SPARE: Mutex<Spare> = Mutex::new(Spare {
        by_words: BTreeMap::new(),
        held: 0,
    });

    /// A buffer of `src.len().div_ceil(8)` (at least 1) words holding `src`'s bytes, the rest
    /// of its last word zero: the smallest kept buffer that holds it (and at most twice the
    /// words), else a new one.
    pub(super) fn filled(src: &[u8]) -> Vec<u64> {
        let words = src.len().div_ceil(8).max(1);
        let kept = if words * 8 >= MIN_BYTES {
            let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
            let fit = spare
                .by_words
                .range(words..=2 * words)
                .next()
                .map(|(&w, _)| w);
            fit.and_then(|w| {
                let list = spare.by_words.get_mut(&w)?;
                let b = list.pop()?;
                if list.is_empty() {
                    spare.by_words.remove(&w);
                }
                spare.held -= w * 8;
                Some(b)
            })
        } else {
            None
        };
        let mut buf = kept.unwrap_or_default();
        buf.clear();
        buf.reserve_exact(words);
        // SAFETY: `buf` has capacity for `words` words; the last is zeroed, then `src`'s bytes
        // (at most `words * 8`) written from the start, so all `words` are initialised before
        // the length is set.
        unsafe {
            buf.as_mut_ptr().add(words - 1).write(0);
            std::ptr::copy_nonoverlapping(src.as_ptr(), buf.as_mut_ptr().cast::<u8>(), src.len());
            buf.set_len(words);
        }
        buf
    }

    /// Keeps `bufs` of at least [`MIN_BYTES`] for later launches while [`MAX_BYTES`] allows;
    /// frees the rest.
    pub(super) fn give_back(bufs: Vec<Vec<u64>>) {
        let mut spare = None;
        for b in bufs {
            let words = b.capacity();
            if words * 8 < MIN_BYTES {
                continue;
            }
            let spare =
                spare.get_or_insert_with(|| SPARE.lock().unwrap_or_else(|e| e.into_inner()));
            if spare.held + words * 8 <= MAX_BYTES {
                spare.held += words * 8;
                spare.by_words.entry(words).or_default().push(b);
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_kept_buffer_is_reused_with_the_new_bytes_and_a_zero_tail() {
            // Sizes no other test uses, so that the process-wide list holds only these.
            let first: Vec<u8> = (0..MIN_BYTES + 13).map(|i| (i * 7) as u8).collect();
            let b = filled(&first);
            assert_eq!(b.len(), (MIN_BYTES + 13).div_ceil(8));
            let at = b.as_ptr();
            give_back(vec![b]);
            // Three bytes fewer: the same words, so the kept buffer, holding the new bytes and
            // zeros after them in its last word.
            let second: Vec<u8> = (0..MIN_BYTES + 10).map(|i| (i * 3 + 1) as u8).collect();
            let c = filled(&second);
            assert_eq!(c.as_ptr(), at, "the kept buffer is reused");
            let bytes: Vec<u8> = c.iter().flat_map(|w| w.to_ne_bytes()).collect();
            assert_eq!(&bytes[..second.len()], &second[..]);
            assert!(bytes[second.len()..].iter().all(|&x| x == 0), "{bytes:?}");
            // Below `MIN_BYTES`: never from the list.
            give_back(vec![c]);
            let small = filled(&[5u8; MIN_BYTES / 4]);
            assert_ne!(small.as_ptr(), at);
            assert_eq!(small[0], u64::from_ne_bytes([5; 8]));
        }
    }
}

impl Job {
    /// Copies the job's output tensors from its device buffers into the caller's outputs;
    /// returns the bytes copied.
    pub(crate) fn copy_out(&self, args: &mut [Arg<'_>]) -> usize {
        let mut copied = 0;
        let mut k = 0;
        for a in &self.args {
            let JobArg::Tensor {
                arg,
                off,
                bytes,
                out,
            } = a
            else {
                continue;
            };
            if let (true, Arg::Out(_, _, dst)) = (*out, &mut args[*arg]) {
                // SAFETY: the buffer holds at least `bytes` bytes.
                let src = unsafe {
                    std::slice::from_raw_parts(self.buffers[k].as_ptr().cast::<u8>(), *bytes)
                };
                dst[*off..off + bytes].copy_from_slice(src);
                copied += *bytes;
            }
            k += 1;
        }
        copied
    }

    /// The ABI slots of the call (one per parameter): a tensor's host address where the job
    /// runs on the host tensors in place (`host`), else its device buffer; a window's id; a
    /// scalar's bits; 0 for the context (the executor passes it separately).
    pub(crate) fn slots(&mut self) -> Vec<u64> {
        let mut k = 0;
        let mut slots = Vec::with_capacity(self.args.len());
        for a in &self.args {
            slots.push(match a {
                JobArg::Tensor { .. } => {
                    let p = match self.host.get(k) {
                        Some(&h) => h,
                        None => self.buffers[k].as_mut_ptr() as u64,
                    };
                    k += 1;
                    p
                }
                JobArg::Window(w) => *w as u64,
                JobArg::Scalar(b) => *b,
                JobArg::Ctx => 0,
            });
        }
        slots
    }

    /// Copies the tensor arguments of the job from the host into fresh device buffers;
    /// returns the bytes copied.
    pub(crate) fn copy_in(&mut self, args: &[Arg<'_>]) -> usize {
        let mut copied = 0;
        for a in &self.args {
            if let JobArg::Tensor {
                arg, off, bytes, ..
            } = a
            {
                let src = match &args[*arg] {
                    Arg::In(_, _, b) => &b[*off..off + bytes],
                    Arg::Out(_, _, b) => &b[*off..off + bytes],
                    Arg::Scalar(..) => &[][..],
                };
                self.buffers.push(spare::filled(src));
                copied += bytes;
            }
        }
        copied
    }
}

/// Whether the jobs of a run (`jobs[rank]`, each rank's in order) can use the host tensors in
/// place with the same results as private device copies: no two tensor ranges of the same
/// host argument overlap where one is written, unless they belong to different jobs of the
/// same rank (which run in order, as the copies' forwards model), and every range starts
/// 16-byte aligned (`base(arg)` is the argument's host address), as device code assumes.
/// Empty ranges are ignored. After a failed run the host outputs hold whatever the ranks wrote
/// before the failure (with copies they are left untouched): the error is the same.
pub(crate) fn host_memory_shareable(jobs: &[Vec<Job>], base: &dyn Fn(usize) -> u64) -> bool {
    let mut ranges = vec![];
    for (rank, js) in jobs.iter().enumerate() {
        for (ji, j) in js.iter().enumerate() {
            for a in &j.args {
                if let JobArg::Tensor {
                    arg,
                    off,
                    bytes,
                    out,
                } = *a
                {
                    if bytes == 0 {
                        continue; // nothing read or written (an empty tensor's address is arbitrary)
                    }
                    if !(base(arg) + off as u64).is_multiple_of(16) {
                        return false;
                    }
                    ranges.push((rank, ji, arg, off, off + bytes, out));
                }
            }
        }
    }
    for (i, &(r1, j1, a1, lo1, hi1, o1)) in ranges.iter().enumerate() {
        for &(r2, j2, a2, lo2, hi2, o2) in &ranges[i + 1..] {
            let overlap = a1 == a2 && lo1.max(lo2) < hi1.min(hi2);
            if overlap && (o1 || o2) && !(r1 == r2 && j1 != j2) {
                return false;
            }
        }
    }
    true
}

/// Bytes that an earlier dispatch on the same rank wrote into a host tensor range that a later
/// dispatch reads: a rank's dispatches run in order, so the later one must see them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Forward {
    /// The earlier job, and the index of its tensor buffer that holds the bytes.
    pub(crate) from_job: usize,
    pub(crate) from_buf: usize,
    /// Byte offset in that buffer.
    pub(crate) from_off: usize,
    /// The index of the later job's tensor buffer, and the byte offset in it.
    pub(crate) to_buf: usize,
    pub(crate) to_off: usize,
    /// Bytes copied.
    pub(crate) len: usize,
}

/// The forwards into job `j` of `jobs` (one rank's jobs, in order), to apply in order just
/// before `j` runs.
pub(crate) fn forwards(jobs: &[Job], j: usize) -> Vec<Forward> {
    if j == 0 {
        // The common case (one dispatch per rank) costs nothing.
        return vec![];
    }
    let tensors = |job: &Job| -> Vec<(usize, usize, usize, bool)> {
        job.args
            .iter()
            .filter_map(|a| match a {
                JobArg::Tensor {
                    arg,
                    off,
                    bytes,
                    out,
                } => Some((*arg, *off, *bytes, *out)),
                _ => None,
            })
            .collect()
    };
    let mine = tensors(&jobs[j]);
    let mut v = vec![];
    for (to_buf, &(arg, off, bytes, _)) in mine.iter().enumerate() {
        for (from_job, earlier) in jobs[..j].iter().enumerate() {
            for (from_buf, &(a2, o2, b2, out)) in tensors(earlier).iter().enumerate() {
                let (lo, hi) = (off.max(o2), (off + bytes).min(o2 + b2));
                if out && a2 == arg && lo < hi {
                    v.push(Forward {
                        from_job,
                        from_buf,
                        from_off: lo - o2,
                        to_buf,
                        to_off: lo - off,
                        len: hi - lo,
                    });
                }
            }
        }
    }
    v
}

/// Applies the forwards into job `j` between host-memory job buffers.
pub(crate) fn forward_host(jobs: &mut [Job], j: usize) {
    for f in forwards(jobs, j) {
        let (before, rest) = jobs.split_at_mut(j);
        let src = &before[f.from_job].buffers[f.from_buf];
        let dst = &mut rest[0].buffers[f.to_buf];
        // SAFETY: both buffers hold at least `off + len` bytes (the ranges lie inside the
        // tensor slices the buffers were sized for), and they are distinct allocations.
        unsafe {
            std::ptr::copy_nonoverlapping(
                src.as_ptr().cast::<u8>().add(f.from_off),
                dst.as_mut_ptr().cast::<u8>().add(f.to_off),
                f.len,
            );
        }
    }
}

/// The span of one dispatch: `dispatch {rank, function}` under `parent` (every platform's
/// executor opens one per dispatch it runs).
pub(crate) fn dispatch_span(parent: &tracing::Span, rank: usize, function: &str) -> tracing::Span {
    tracing::debug_span!(target: "eagle", parent: parent, "dispatch", rank, function)
}
