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
/// a `tp_ffn` launch on `sim` went there). Buffers of at least [`MIN_BYTES`](spare::MIN_BYTES)
/// come back to the process's [`Spare`](spare::Spare) when their job is dropped and are reused
/// by a later launch's arguments of a size they can hold, up to
/// [`MAX_BYTES`](spare::MAX_BYTES) in all (the largest kept ones make room for a newer one).
mod spare {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    /// The most bytes of buffers kept.
    pub(super) const MAX_BYTES: usize = 256 << 20;
    /// The smallest buffer kept, in bytes.
    pub(super) const MIN_BYTES: usize = 16 << 10;

    /// Kept buffers by capacity in words, and the bytes they hold.
    pub(super) struct Spare {
        by_words: BTreeMap<usize, Vec<Vec<u64>>>,
        held: usize,
    }

    /// The process's buffers.
    static SPARE: Mutex<Spare> = Mutex::new(Spare::new());

    impl Spare {
        pub(super) const fn new() -> Spare {
            Spare {
                by_words: BTreeMap::new(),
                held: 0,
            }
        }

        /// The smallest kept buffer of `words` to `2 * words` words, taken out.
        fn take(&mut self, words: usize) -> Option<Vec<u64>> {
            let (&w, list) = self.by_words.range_mut(words..=2 * words).next()?;
            let b = list.pop()?;
            if list.is_empty() {
                self.by_words.remove(&w);
            }
            self.held -= w * 8;
            Some(b)
        }

        /// Keeps `b` if it is at least [`MIN_BYTES`] and at most [`MAX_BYTES`], dropping the
        /// largest kept buffers while it would not fit.
        pub(super) fn keep(&mut self, b: Vec<u64>) {
            let bytes = b.capacity() * 8;
            if !(MIN_BYTES..=MAX_BYTES).contains(&bytes) {
                return;
            }
            while self.held + bytes > MAX_BYTES {
                let Some(mut last) = self.by_words.last_entry() else {
                    break;
                };
                let w = *last.key();
                last.get_mut().pop();
                if last.get().is_empty() {
                    last.remove();
                }
                self.held -= w * 8;
            }
            self.held += bytes;
            self.by_words.entry(b.capacity()).or_default().push(b);
        }

        /// A buffer of `src.len().div_ceil(8)` (at least 1) words holding `src`'s bytes, the
        /// rest of its last word zero: the smallest kept buffer that holds it (at most twice
        /// the words, and only for [`MIN_BYTES`] or more), else a new one.
        pub(super) fn filled_from(&mut self, src: &[u8]) -> Vec<u64> {
            let words = src.len().div_ceil(8).max(1);
            let kept = if words * 8 >= MIN_BYTES {
                self.take(words)
            } else {
                None
            };
            fill(kept.unwrap_or_default(), words, src)
        }
    }

    /// `buf` made `words` words long holding `src` (at most `words * 8` bytes) from its start,
    /// the rest zero-padded to the end of the last word.
    fn fill(mut buf: Vec<u64>, words: usize, src: &[u8]) -> Vec<u64> {
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

    /// [`Spare::filled_from`] on the process's buffers.
    pub(super) fn filled(src: &[u8]) -> Vec<u64> {
        SPARE
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .filled_from(src)
    }

    /// [`Spare::keep`] of each of `bufs` on the process's buffers.
    pub(super) fn give_back(bufs: Vec<Vec<u64>>) {
        if bufs.iter().all(|b| b.capacity() * 8 < MIN_BYTES) {
            return;
        }
        let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
        for b in bufs {
            spare.keep(b);
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_kept_buffer_is_reused_with_the_new_bytes_and_a_zero_tail() {
            let mut spare = Spare::new();
            let first: Vec<u8> = (0..MIN_BYTES + 13).map(|i| (i * 7) as u8).collect();
            let b = spare.filled_from(&first);
            assert_eq!(b.len(), (MIN_BYTES + 13).div_ceil(8));
            let at = b.as_ptr();
            spare.keep(b);
            // Three bytes fewer: the same words, so the kept buffer, holding the new bytes and
            // zeros after them in its last word.
            let second: Vec<u8> = (0..MIN_BYTES + 10).map(|i| (i * 3 + 1) as u8).collect();
            let c = spare.filled_from(&second);
            assert_eq!(c.as_ptr(), at, "the kept buffer is reused");
            let bytes: Vec<u8> = c.iter().flat_map(|w| w.to_ne_bytes()).collect();
            assert_eq!(&bytes[..second.len()], &second[..]);
            assert!(bytes[second.len()..].iter().all(|&x| x == 0), "{bytes:?}");
            // Less than half its words: a new buffer; below `MIN_BYTES`: never kept.
            spare.keep(c);
            let half = spare.filled_from(&vec![5u8; MIN_BYTES / 2]);
            assert_ne!(half.as_ptr(), at);
            assert_eq!(half[0], u64::from_ne_bytes([5; 8]));
            spare.keep(half);
            assert_eq!(spare.held, (MIN_BYTES + 16) / 8 * 8);
        }

        #[test]
        fn the_largest_kept_buffers_make_room_for_a_newer_one() {
            let mut spare = Spare::new();
            let big = MAX_BYTES / 8 / 2;
            spare.keep(Vec::with_capacity(big));
            spare.keep(Vec::with_capacity(big / 2));
            assert_eq!(spare.held, (big + big / 2) * 8);
            // Another half of `MAX_BYTES` does not fit: the largest goes.
            spare.keep(Vec::with_capacity(big));
            assert_eq!(spare.held, (big + big / 2) * 8);
            assert_eq!(
                spare
                    .by_words
                    .iter()
                    .map(|(&w, l)| (w, l.len()))
                    .collect::<Vec<_>>(),
                vec![(big / 2, 1), (big, 1)]
            );
            // Larger than `MAX_BYTES`: not kept, nothing dropped.
            spare.keep(Vec::with_capacity(MAX_BYTES / 8 + 1));
            assert_eq!(spare.held, (big + big / 2) * 8);
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

    /// Copies the tensor arguments of the job from the host into device buffers of its own
    /// (kept ones of earlier launches where they fit, [`spare`]); returns the bytes copied.
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
