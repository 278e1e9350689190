// eagle CUDA emulation shim: lets a host C++ compiler build eagle's CUDA C (source: eagle-codegen/src/back/cuda/host_shim.h)
#include <math.h>
#include <string.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#define EG_HOST_EMULATION 1
#define __device__
#define __global__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(x)
#define EG_SPIN() std::this_thread::yield()
struct eg_dim3 { unsigned int x, y, z; };
struct eg_block_sync {
  std::mutex m; std::condition_variable cv;
  unsigned int n = 0, arrived = 0, gen = 0; int acc = 0, result = 0;
  alignas(16) unsigned char shared[48 << 10];  // EG_SHARED: the block's shared memory
};
static thread_local eg_dim3 threadIdx, blockIdx, blockDim, gridDim;
static thread_local eg_block_sync* eg_this_block;
inline int __syncthreads_or(int p) {
  eg_block_sync* b = eg_this_block;
  std::unique_lock<std::mutex> l(b->m);
  unsigned int g = b->gen;
  b->acc |= (p != 0);
  if (++b->arrived == b->n) {
    b->result = b->acc; b->acc = 0; b->arrived = 0; b->gen++;
    b->cv.notify_all();
    return b->result;
  }
  b->cv.wait(l, [&] { return b->gen != g; });
  return b->result;
}
inline void __syncthreads() { (void)__syncthreads_or(0); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline int atomicCAS(int* p, int cmp, int v) {
  __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return cmp;
}
inline unsigned int atomicAdd_system(unsigned int* p, unsigned int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd_system(unsigned long long* p, unsigned long long v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned int atomicExch_system(unsigned int* p, unsigned int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicExch_system(unsigned long long* p, unsigned long long v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
inline int __float_as_int(float f) { int x; memcpy(&x, &f, 4); return x; }
inline double __longlong_as_double(long long x) { double d; memcpy(&d, &x, 8); return d; }
inline long long __double_as_longlong(double d) { long long x; memcpy(&x, &d, 8); return x; }
inline unsigned long long eg_host_now() {
  return (unsigned long long)std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now().time_since_epoch()).count();
}
struct eg_rt;
typedef void (*eg_kernel)(const eg_rt*, const unsigned long long*);
extern "C" int eg_emu_launch(eg_kernel k, unsigned int grid, unsigned int block, const eg_rt* rt, const unsigned long long* slots) {
  std::unique_ptr<eg_block_sync[]> blocks(new eg_block_sync[grid]);
  std::vector<std::thread> ts;
  for (unsigned int b = 0; b < grid; ++b) {
    blocks[b].n = block;
    for (unsigned int t = 0; t < block; ++t) {
      eg_block_sync* bs = &blocks[b];
      ts.emplace_back([=] {
        threadIdx = {t, 0, 0}; blockIdx = {b, 0, 0};
        blockDim = {block, 1, 1}; gridDim = {grid, 1, 1};
        eg_this_block = bs;
        k(rt, slots);
      });
    }
  }
  for (auto& t : ts) t.join();
  return 0;
}
