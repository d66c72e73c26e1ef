// Just enough of CUDA's device-side surface to compile a kernel file as C++ and run its kernels
// on the CPU: a launch runs the grid's blocks one after another, each with one std::thread per
// CUDA thread (so __syncthreads is a real barrier and every thread's view of memory is its own),
// and __shared__ variables are function statics (one block at a time uses them). What this
// checks is the kernels' logic (indexing, lanes, barriers, the last-block merge, vector loads and
// bit conversions), not timing, occupancy or the device's memory model.
//
//   #include "tests/testing/cuda_emulation.h"
//   #include "trainer/models/bn_relu_kernels.cuh"
//   ddp::testing::cuda::Launcher launcher;   // Memset / Launch, as a stream launcher
//
// Include this before any kernel source, in a test only. Thread safety: one launch at a time.
#ifndef SLURM_DDP_TESTS_TESTING_CUDA_EMULATION_H_
#define SLURM_DDP_TESTS_TESTING_CUDA_EMULATION_H_

#include <c10/util/Half.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __launch_bounds__(n)

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}  // NOLINT
};
struct uint3 {
  unsigned x, y, z;
};
struct uint4 {
  unsigned x, y, z, w;
};
struct float4 {
  float x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline dim3 blockDim;
inline dim3 gridDim;

namespace ddp::testing::cuda {

// A reusable barrier for the threads of one block.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const unsigned generation = generation_;
    if (++waiting_ == n_) {
      waiting_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != generation; });
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int n_;
  int waiting_ = 0;
  unsigned generation_ = 0;
};

inline Barrier*& CurrentBarrier() {
  static Barrier* barrier = nullptr;
  return barrier;
}

// Memset and Launch as a stream launcher (bn_relu_kernels.cuh's Launcher): synchronous.
struct Launcher {
  int launches = 0;
  int Memset(void* p, size_t bytes) {
    std::memset(p, 0, bytes);
    return 0;
  }
  template <typename... Params, typename... Args>
  int Launch(void (*kernel)(Params...), dim3 grid, dim3 block, Args&&... args) {
    ++launches;
    gridDim = grid;
    blockDim = block;
    const int n = static_cast<int>(block.x * block.y * block.z);
    Barrier barrier(n);
    CurrentBarrier() = &barrier;
    const std::tuple<Params...> params(static_cast<Params>(args)...);
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(n));
    for (int t = 0; t < n; ++t) {
      threads.emplace_back([&, t] {
        const unsigned u = static_cast<unsigned>(t);
        threadIdx = {u % block.x, (u / block.x) % block.y, u / (block.x * block.y)};
        for (unsigned bz = 0; bz < grid.z; ++bz) {
          for (unsigned by = 0; by < grid.y; ++by) {
            for (unsigned bx = 0; bx < grid.x; ++bx) {
              blockIdx = {bx, by, bz};
              std::apply(kernel, params);
              barrier.Wait();  // the block ends for every thread before the next begins
            }
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    CurrentBarrier() = nullptr;
    return 0;
  }
};

}  // namespace ddp::testing::cuda

inline void __syncthreads() { ddp::testing::cuda::CurrentBarrier()->Wait(); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
template <typename T>
T __ldg(const T* p) {
  return *p;
}
template <typename T>
T __ldcg(const T* p) {
  return *p;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
// __half as its bits; conversions as c10::Half's (IEEE round to nearest even).
struct __half {
  unsigned short bits;
};
inline __half __ushort_as_half(unsigned short h) { return {h}; }
inline unsigned short __half_as_ushort(__half h) { return h.bits; }
inline float __half2float(__half h) {
  return static_cast<float>(c10::Half(h.bits, c10::Half::from_bits()));
}
inline __half __float2half_rn(float f) { return {c10::Half(f).x}; }

#endif  // SLURM_DDP_TESTS_TESTING_CUDA_EMULATION_H_
