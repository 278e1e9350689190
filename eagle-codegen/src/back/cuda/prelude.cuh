// eagle CUDA C prelude: the fixed head of every translation unit eagle emits (source: eagle-codegen/src/back/cuda/prelude.cuh)
#ifndef EG_SPIN
#define EG_SPIN()
#endif
// Threads of the block that runs a per-device program; a tile of n elements keeps
// EG_SLOTS(n) of them in each thread (element i in thread i % EG_NT, slot i / EG_NT).
#ifndef EG_NT
#define EG_NT 128
#endif
#define EG_SLOTS(n) (((n) + EG_NT - 1) / EG_NT)
struct eg_err { int status; int site; int rank; int pad; long long a; long long b; };
// One per rank: its rank, the world size, its own failure record, the run's abort flag, the
// run's arrival counters (rank r alone writes arrive[r]) and the wait timeout.
struct eg_rt {
  long long rank; long long nranks;
  eg_err* err; volatile int* abort;
  volatile unsigned int* arrive;
  unsigned long long timeout_ns;
};
struct eg_win { char* const* t; long long off; };
#define EG_WAIT_TIMEOUT (-1)
#define EG_BARRIER_TIMEOUT (-2)
#define EG_ABORTED (-3)
#ifdef EG_HOST_EMULATION
__device__ __forceinline__ unsigned long long eg_now() { return eg_host_now(); }
#else
__device__ __forceinline__ unsigned long long eg_now() {
  unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}
#endif
// Records the first failure of this rank (threads of one rank race only with each other) and
// raises the run's abort flag, which every wait and barrier polls.
__device__ __noinline__ int eg_fail(const eg_rt* rt, int site, long long a, long long b) {
  if (atomicCAS(&rt->err->status, 0, 1) == 0) {
    rt->err->site = site; rt->err->rank = (int)rt->rank; rt->err->a = a; rt->err->b = b;
  }
  __threadfence_system();
  if (site != EG_ABORTED) *rt->abort = 1;
  __threadfence_system();
  return 1;
}
template <typename T> __device__ __forceinline__ T* eg_at(eg_win w, long long rank) {
  return (T*)(w.t[rank] + w.off);
}
template <typename T> __device__ __forceinline__ bool eg_holds(int cmp, T a, T b) {
  switch (cmp) {
    case EG_CMP_EQ: return a == b; case EG_CMP_NE: return a != b; case EG_CMP_LT: return a < b;
    case EG_CMP_LE: return a <= b; case EG_CMP_GT: return a > b; default: return a >= b;
  }
}
template <typename T> __device__ int eg_wait(const eg_rt* rt, T* p, T expected, int cmp) {
  volatile T* v = p; unsigned long long t0 = eg_now();
  while (!eg_holds<T>(cmp, *v, expected)) {
    EG_SPIN();
    if (*rt->abort) return eg_fail(rt, EG_ABORTED, 0, 0);
    if (eg_now() - t0 > rt->timeout_ns) return eg_fail(rt, EG_WAIT_TIMEOUT, (long long)*v, (long long)expected);
  }
  __threadfence_system();
  return 0;
}
__device__ __forceinline__ void eg_signal(unsigned int* p, unsigned int v, bool add) {
  __threadfence_system(); if (add) atomicAdd_system(p, v); else atomicExch_system(p, v);
}
__device__ __forceinline__ void eg_signal(unsigned long long* p, unsigned long long v, bool add) {
  __threadfence_system(); if (add) atomicAdd_system(p, v); else atomicExch_system(p, v);
}
// A barrier without atomics (atomics on host memory are not atomic across GPUs): rank r counts
// its arrivals in arrive[r], then waits until every rank has arrived as often.
__device__ int eg_barrier(const eg_rt* rt) {
  __threadfence_system();
  const unsigned int epoch = rt->arrive[rt->rank] + 1u;
  rt->arrive[rt->rank] = epoch;
  __threadfence_system();
  unsigned long long t0 = eg_now();
  for (long long q = 0; q < rt->nranks; ++q) {
    while ((int)(rt->arrive[q] - epoch) < 0) {
      EG_SPIN();
      if (*rt->abort) return eg_fail(rt, EG_ABORTED, 0, 0);
      if (eg_now() - t0 > rt->timeout_ns) return eg_fail(rt, EG_BARRIER_TIMEOUT, q, (long long)epoch);
    }
  }
  __threadfence_system();
  return 0;
}
// Shared scratch of the tile ops of a per-device program (eagle-codegen back/cuda/tile.rs):
// on a GPU one static shared buffer per translation unit, `eg_sh_block` (declared after the
// prelude, sized for the function that stages most), which a caller and its callees reuse (a
// tile op's staging is dead once the op has synchronised); in the emulation, the block's own
// buffer.
#ifdef EG_HOST_EMULATION
#define EG_SHARED(n) unsigned char* eg_sh = eg_this_block->shared; (void)eg_sh
#define EG_SHARED_BLOCK(n)
#else
#define EG_SHARED(n) unsigned char* eg_sh = eg_sh_block; (void)eg_sh
#define EG_SHARED_BLOCK(n) __shared__ __align__(16) unsigned char eg_sh_block[n];
#endif

// Float-to-integer conversions as Rust's `as` (eg_f2i32, eg_f2i64, eg_f2u32, eg_f2u64:
// saturating, NaN to 0: eagle_ir::prim::float_to_int), float min/max (eg_fmin, eg_fmax) and
// signed division as Rust's wrapping ops (eg_div,
// eg_rem: x / -1 is -x wrapping, x % -1 is 0) follow the prelude: eagle_ir::prim::fmin/fmax
// and idiv/irem, written out as C by the emitter (eagle_codegen's cuda::CPrim).
