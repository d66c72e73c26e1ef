// The device-side building blocks of the fused BatchNorm+ReLU kernels (bn_relu_kernels.cuh,
// which includes this file and is its only includer): 16-byte vector loads and stores per
// element type, as floats, and the fixed-order merges inside a block and across the blocks of a
// column. Compiled by nvcc, or as C++ over tests/testing/cuda_emulation.h.
#ifndef SLURM_DDP_TRAINER_MODELS_BN_RELU_DEVICE_CUH_
#define SLURM_DDP_TRAINER_MODELS_BN_RELU_DEVICE_CUH_

#include <cstdint>

#include "trainer/models/bn_relu_math.h"

namespace ddp::models::bn_relu::kernels {
// 16-byte vectors of each element type, as floats.
template <ElementType E>
struct Io;

template <>
struct Io<ElementType::kFloat> {
  static constexpr int kN = 4;
  __device__ static void Load(const void* base, int64_t i, float* out) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(base) + i);
    out[0] = v.x;
    out[1] = v.y;
    out[2] = v.z;
    out[3] = v.w;
  }
  __device__ static void Store(void* base, int64_t i, const float* in) {
    reinterpret_cast<float4*>(base)[i] = make_float4(in[0], in[1], in[2], in[3]);
  }
};

// bfloat16 <-> float by bits; float -> bfloat16 rounds to nearest even (as c10::BFloat16), NaN
// kept quiet.
__device__ inline unsigned BFloat16Bits(float v) {
  const unsigned u = __float_as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

template <>
struct Io<ElementType::kBFloat16> {
  static constexpr int kN = 8;
  __device__ static void Load(const void* base, int64_t i, float* out) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(base) + i);
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
    DDP_UNROLL
    for (int k = 0; k < 4; ++k) {
      out[2 * k] = __uint_as_float(w[k] << 16);
      out[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
    }
  }
  __device__ static void Store(void* base, int64_t i, const float* in) {
    unsigned w[4];
    DDP_UNROLL
    for (int k = 0; k < 4; ++k)
      w[k] = BFloat16Bits(in[2 * k]) | (BFloat16Bits(in[2 * k + 1]) << 16);
    reinterpret_cast<uint4*>(base)[i] = make_uint4(w[0], w[1], w[2], w[3]);
  }
};

template <>
struct Io<ElementType::kHalf> {
  static constexpr int kN = 8;
  __device__ static float FromBits(unsigned short h) { return __half2float(__ushort_as_half(h)); }
  __device__ static unsigned ToBits(float f) { return __half_as_ushort(__float2half_rn(f)); }
  __device__ static void Load(const void* base, int64_t i, float* out) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(base) + i);
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
    DDP_UNROLL
    for (int k = 0; k < 4; ++k) {
      out[2 * k] = FromBits(static_cast<unsigned short>(w[k] & 0xffffu));
      out[2 * k + 1] = FromBits(static_cast<unsigned short>(w[k] >> 16));
    }
  }
  __device__ static void Store(void* base, int64_t i, const float* in) {
    unsigned w[4];
    DDP_UNROLL
    for (int k = 0; k < 4; ++k) w[k] = ToBits(in[2 * k]) | (ToBits(in[2 * k + 1]) << 16);
    reinterpret_cast<uint4*>(base)[i] = make_uint4(w[0], w[1], w[2], w[3]);
  }
};

// Lane 0 (threadIdx.y == 0) of each column merges the Welford states of lanes 1..ty-1, in order.
template <int N>
__device__ void MergeLanes(float& count, float (&mean)[N], float (&m2)[N], float* s_mean,
                           float* s_m2, float* s_count) {
  const int t = threadIdx.y * blockDim.x + threadIdx.x;
  DDP_UNROLL
  for (int k = 0; k < N; ++k) {
    s_mean[t * N + k] = mean[k];
    s_m2[t * N + k] = m2[k];
  }
  if (threadIdx.x == 0) s_count[threadIdx.y] = count;
  __syncthreads();
  if (threadIdx.y == 0) {
    for (int y = 1; y < static_cast<int>(blockDim.y); ++y) {
      const int u = y * blockDim.x + threadIdx.x;
      const float n = s_count[y];
      DDP_UNROLL
      for (int k = 0; k < N; ++k) {
        const Welford m = WelfordMerge(Welford{count, mean[k], m2[k]},
                                       Welford{n, s_mean[u * N + k], s_m2[u * N + k]});
        mean[k] = m.mean;
        m2[k] = m.m2;
      }
      count = count + n;
    }
  }
  __syncthreads();
}

// Lane 0 of each column sums lanes 1..ty-1 of two per-thread arrays, in order.
template <typename A, int N>
__device__ void SumLanes(A (&p)[N], A (&q)[N], A* s_p, A* s_q) {
  const int t = threadIdx.y * blockDim.x + threadIdx.x;
  DDP_UNROLL
  for (int k = 0; k < N; ++k) {
    s_p[t * N + k] = p[k];
    s_q[t * N + k] = q[k];
  }
  __syncthreads();
  if (threadIdx.y == 0) {
    for (int y = 1; y < static_cast<int>(blockDim.y); ++y) {
      const int u = y * blockDim.x + threadIdx.x;
      DDP_UNROLL
      for (int k = 0; k < N; ++k) {
        p[k] = p[k] + s_p[u * N + k];
        q[k] = q[k] + s_q[u * N + k];
      }
    }
  }
  __syncthreads();
}

// True in every thread of the block that arrived last of its column of gridDim.y blocks (after
// each has published its partials); that block then reads all of them and resets the counter.
__device__ inline bool LastOfColumn(unsigned* counters) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    last = atomicAdd(&counters[blockIdx.x], 1u) == gridDim.y - 1;
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

}  // namespace ddp::models::bn_relu::kernels

#endif  // SLURM_DDP_TRAINER_MODELS_BN_RELU_DEVICE_CUH_
