// The device code of the fused BatchNorm+ReLU op (bn_relu_math.h): the kernels (over the vector
// loads and in-block merges of bn_relu_device.cuh) and the order in
// which a forward or backward launches them, over a `Launcher` (bn_relu_kernel.cu launches on a
// CUDA stream; tests/trainer/models/bn_relu_emulated_test.cc runs the same code on the CPU, one
// block at a time with a thread per CUDA thread). Included by those two files only.
//
// A channels-last activation is an [M, C] matrix; a thread owns a 16-byte group of channels (8
// bf16/fp16 or 4 fp32) and strides over rows, so every load and store is a coalesced 16-byte
// vector. The statistics and the backward's sums are reduced in a fixed order (lanes of a block,
// then the slabs' partials, merged by the last block of each column of blocks to finish): the
// result does not depend on block scheduling. Per BatchNorm a forward is one reduction kernel and
// one elementwise kernel; the backward likewise.
#ifndef SLURM_DDP_TRAINER_MODELS_BN_RELU_KERNELS_CUH_
#define SLURM_DDP_TRAINER_MODELS_BN_RELU_KERNELS_CUH_

#include <cstdint>

#include "trainer/models/bn_relu_device.cuh"
#include "trainer/models/bn_relu_math.h"

namespace ddp::models::bn_relu::kernels {

constexpr int kMaxThreads = 256;

template <ElementType E>
__global__ void __launch_bounds__(kMaxThreads) StatsKernel(ForwardArgs a, GridPlan p) {
  constexpr int N = Io<E>::kN;
  __shared__ float s_mean[kMaxThreads * N];
  __shared__ float s_m2[kMaxThreads * N];
  __shared__ float s_count[32];
  const int C = a.channels;
  float* ws = static_cast<float*>(a.workspace);
  float* part_count = ws;
  float* part_mean = ws + p.slabs;
  float* part_m2 = part_mean + static_cast<int64_t>(p.slabs) * C;
  unsigned* counters = reinterpret_cast<unsigned*>(ws + ForwardWorkspaceFloats(p, C));

  const int g = blockIdx.x * p.tx + threadIdx.x;
  const bool active = g < p.groups;
  const int64_t begin = blockIdx.y * p.slab_rows;
  const int64_t end = begin + p.slab_rows < a.rows ? begin + p.slab_rows : a.rows;
  float count = 0, mean[N] = {}, m2[N] = {};
  if (active) {
    for (int64_t r = begin + threadIdx.y; r < end; r += p.ty) {
      float v[N];
      Io<E>::Load(a.x, r * p.groups + g, v);
      count += 1.0f;
      const float inv = 1.0f / count;
      DDP_UNROLL
      for (int k = 0; k < N; ++k) WelfordAdd(mean[k], m2[k], v[k], inv);
    }
  }
  MergeLanes(count, mean, m2, s_mean, s_m2, s_count);
  if (threadIdx.y == 0 && active) {
    DDP_UNROLL
    for (int k = 0; k < N; ++k) {
      const int64_t i = static_cast<int64_t>(blockIdx.y) * C + g * N + k;
      part_mean[i] = mean[k];
      part_m2[i] = m2[k];
    }
    if (threadIdx.x == 0) part_count[blockIdx.y] = count;
  }
  if (!LastOfColumn(counters)) return;

  count = 0;
  DDP_UNROLL
  for (int k = 0; k < N; ++k) mean[k] = m2[k] = 0;
  if (active) {
    for (int s = threadIdx.y; s < p.slabs; s += p.ty) {
      const float n = __ldcg(part_count + s);
      DDP_UNROLL
      for (int k = 0; k < N; ++k) {
        const int64_t i = static_cast<int64_t>(s) * C + g * N + k;
        const Welford m = WelfordMerge(Welford{count, mean[k], m2[k]},
                                       Welford{n, __ldcg(part_mean + i), __ldcg(part_m2 + i)});
        mean[k] = m.mean;
        m2[k] = m.m2;
      }
      count = count + n;
    }
  }
  MergeLanes(count, mean, m2, s_mean, s_m2, s_count);
  if (threadIdx.y == 0 && active) {
    DDP_UNROLL
    for (int k = 0; k < N; ++k) {
      const int c = g * N + k;
      const Welford w{count, mean[k], m2[k]};
      StoreChannel(a.saved, C, c, FinalizeForward(w, a.weight[c], a.bias[c], a.eps));
      if (a.running_mean != nullptr) {
        UpdateRunning(w, a.momentum, a.running_mean[c], a.running_var[c]);
      }
    }
  }
  if (threadIdx.x == 0 && threadIdx.y == 0) counters[blockIdx.x] = 0;
}

template <ElementType E, bool kResidual>
__global__ void __launch_bounds__(kMaxThreads) ApplyKernel(ForwardArgs a, GridPlan p) {
  constexpr int N = Io<E>::kN;
  const int g = blockIdx.x * p.tx + threadIdx.x;
  if (g >= p.groups) return;
  const int C = a.channels;
  ChannelForward f[N];
  DDP_UNROLL
  for (int k = 0; k < N; ++k) f[k] = LoadChannel(a.saved, C, g * N + k);
  const int64_t step = static_cast<int64_t>(gridDim.y) * p.ty;
  for (int64_t r = static_cast<int64_t>(blockIdx.y) * p.ty + threadIdx.y; r < a.rows; r += step) {
    const int64_t i = r * p.groups + g;
    float v[N], res[N] = {};
    Io<E>::Load(a.x, i, v);
    if (kResidual) Io<E>::Load(a.residual, i, res);
    DDP_UNROLL
    for (int k = 0; k < N; ++k) v[k] = Relu(PreActivation(v[k], f[k], res[k]));
    Io<E>::Store(a.y, i, v);
  }
}

// The masked gradient of one vector: from y (with a residual) or from x's recomputed z.
template <ElementType E, bool kResidual, int N>
__device__ void MaskedVector(const BackwardArgs& a, int64_t i, const ChannelForward (&f)[N],
                             float (&x)[N], float (&g)[N]) {
  float m[N];
  Io<E>::Load(a.dy, i, g);
  Io<E>::Load(a.x, i, x);
  if (kResidual) {
    Io<E>::Load(a.y, i, m);
  } else {
    DDP_UNROLL
    for (int k = 0; k < N; ++k) m[k] = PreActivation(x[k], f[k], 0.0f);
  }
  DDP_UNROLL
  for (int k = 0; k < N; ++k) g[k] = MaskedGrad(g[k], m[k]);
}

template <ElementType E, bool kResidual>
__global__ void __launch_bounds__(kMaxThreads) ReduceKernel(BackwardArgs a, GridPlan p) {
  constexpr int N = Io<E>::kN;
  __shared__ double s_buf[2 * kMaxThreads * N];
  const int C = a.channels;
  float* ws = static_cast<float*>(a.workspace);
  float* part_g = ws;
  float* part_gc = ws + static_cast<int64_t>(p.slabs) * C;
  float* coef = part_gc + static_cast<int64_t>(p.slabs) * C;
  unsigned* counters = reinterpret_cast<unsigned*>(ws + BackwardWorkspaceFloats(p, C));

  const int g = blockIdx.x * p.tx + threadIdx.x;
  const bool active = g < p.groups;
  ChannelForward f[N] = {};
  if (active) {
    DDP_UNROLL
    for (int k = 0; k < N; ++k) f[k] = LoadChannel(a.saved, C, g * N + k);
  }
  const int64_t begin = blockIdx.y * p.slab_rows;
  const int64_t end = begin + p.slab_rows < a.rows ? begin + p.slab_rows : a.rows;
  float sg[N] = {}, sgc[N] = {};
  if (active) {
    for (int64_t r = begin + threadIdx.y; r < end; r += p.ty) {
      float x[N], gr[N];
      MaskedVector<E, kResidual>(a, r * p.groups + g, f, x, gr);
      DDP_UNROLL
      for (int k = 0; k < N; ++k) {
        sg[k] += gr[k];
        sgc[k] += gr[k] * (x[k] - f[k].mean);
      }
    }
  }
  float* s_f = reinterpret_cast<float*>(s_buf);
  SumLanes(sg, sgc, s_f, s_f + kMaxThreads * N);
  if (threadIdx.y == 0 && active) {
    DDP_UNROLL
    for (int k = 0; k < N; ++k) {
      const int64_t i = static_cast<int64_t>(blockIdx.y) * C + g * N + k;
      part_g[i] = sg[k];
      part_gc[i] = sgc[k];
    }
  }
  if (!LastOfColumn(counters)) return;

  double dg[N] = {}, dgc[N] = {};
  if (active) {
    for (int s = threadIdx.y; s < p.slabs; s += p.ty) {
      DDP_UNROLL
      for (int k = 0; k < N; ++k) {
        const int64_t i = static_cast<int64_t>(s) * C + g * N + k;
        dg[k] += __ldcg(part_g + i);
        dgc[k] += __ldcg(part_gc + i);
      }
    }
  }
  SumLanes(dg, dgc, s_buf, s_buf + kMaxThreads * N);
  if (threadIdx.y == 0 && active) {
    DDP_UNROLL
    for (int k = 0; k < N; ++k) {
      const int c = g * N + k;
      const ChannelBackward kb =
          FinalizeBackward(dg[k], dgc[k], static_cast<float>(a.rows), a.saved[C + c], a.weight[c]);
      a.dweight[c] = kb.dweight;
      a.dbias[c] = kb.dbias;
      coef[c] = kb.a;
      coef[C + c] = kb.b;
      coef[2 * C + c] = kb.c;
    }
  }
  if (threadIdx.x == 0 && threadIdx.y == 0) counters[blockIdx.x] = 0;
}

template <ElementType E, bool kResidual>
__global__ void __launch_bounds__(kMaxThreads) InputGradKernel(BackwardArgs a, GridPlan p) {
  constexpr int N = Io<E>::kN;
  const int g = blockIdx.x * p.tx + threadIdx.x;
  if (g >= p.groups) return;
  const int C = a.channels;
  const float* coef =
      static_cast<const float*>(a.workspace) + 2 * static_cast<int64_t>(p.slabs) * C;
  ChannelForward f[N];
  ChannelBackward kb[N];
  DDP_UNROLL
  for (int k = 0; k < N; ++k) {
    const int c = g * N + k;
    f[k] = LoadChannel(a.saved, C, c);
    kb[k].a = coef[c];
    kb[k].b = coef[C + c];
    kb[k].c = coef[2 * C + c];
  }
  const int64_t step = static_cast<int64_t>(gridDim.y) * p.ty;
  for (int64_t r = static_cast<int64_t>(blockIdx.y) * p.ty + threadIdx.y; r < a.rows; r += step) {
    const int64_t i = r * p.groups + g;
    float x[N], gr[N], dx[N];
    MaskedVector<E, kResidual>(a, i, f, x, gr);
    DDP_UNROLL
    for (int k = 0; k < N; ++k) dx[k] = InputGrad(gr[k], x[k], f[k].mean, kb[k]);
    Io<E>::Store(a.dx, i, dx);
    if (kResidual) Io<E>::Store(a.dresidual, i, gr);
  }
}

inline dim3 ElementwiseGrid(const GridPlan& p) {
  return dim3(static_cast<unsigned>(p.grid_x), static_cast<unsigned>(p.apply_blocks_y));
}

// The launches of a forward or a backward (kResidual: with the residual add). Launcher:
// Memset(void*, bytes) -> error code, and Launch(kernel, grid, block, args...) -> error code (0:
// success). The counters of the last-block merge are zeroed first.
template <ElementType E, bool kResidual, typename Launcher>
int ForwardAs(const ForwardArgs& a, const GridPlan& p, Launcher& launcher) {
  const dim3 block(static_cast<unsigned>(p.tx), static_cast<unsigned>(p.ty));
  int err =
      launcher.Memset(static_cast<float*>(a.workspace) + ForwardWorkspaceFloats(p, a.channels),
                      sizeof(unsigned) * p.grid_x);
  if (err == 0) err = launcher.Launch(StatsKernel<E>, dim3(p.grid_x, p.slabs), block, a, p);
  if (err == 0) err = launcher.Launch(ApplyKernel<E, kResidual>, ElementwiseGrid(p), block, a, p);
  return err;
}

template <ElementType E, bool kResidual, typename Launcher>
int BackwardAs(const BackwardArgs& a, const GridPlan& p, Launcher& launcher) {
  const dim3 block(static_cast<unsigned>(p.tx), static_cast<unsigned>(p.ty));
  int err =
      launcher.Memset(static_cast<float*>(a.workspace) + BackwardWorkspaceFloats(p, a.channels),
                      sizeof(unsigned) * p.grid_x);
  if (err == 0) {
    err = launcher.Launch(ReduceKernel<E, kResidual>, dim3(p.grid_x, p.slabs), block, a, p);
  }
  if (err == 0) {
    err = launcher.Launch(InputGradKernel<E, kResidual>, ElementwiseGrid(p), block, a, p);
  }
  return err;
}

template <ElementType E, typename Launcher>
int Forward(const ForwardArgs& a, const GridPlan& p, Launcher& launcher) {
  return a.residual != nullptr ? ForwardAs<E, true>(a, p, launcher)
                               : ForwardAs<E, false>(a, p, launcher);
}

template <ElementType E, typename Launcher>
int Backward(const BackwardArgs& a, const GridPlan& p, Launcher& launcher) {
  return a.dresidual != nullptr ? BackwardAs<E, true>(a, p, launcher)
                                : BackwardAs<E, false>(a, p, launcher);
}

// Dispatch on the element type.
template <typename Launcher>
int LaunchForward(const ForwardArgs& a, const GridPlan& p, Launcher& launcher) {
  return a.type == ElementType::kFloat  ? Forward<ElementType::kFloat>(a, p, launcher)
         : a.type == ElementType::kHalf ? Forward<ElementType::kHalf>(a, p, launcher)
                                        : Forward<ElementType::kBFloat16>(a, p, launcher);
}

template <typename Launcher>
int LaunchBackward(const BackwardArgs& a, const GridPlan& p, Launcher& launcher) {
  return a.type == ElementType::kFloat  ? Backward<ElementType::kFloat>(a, p, launcher)
         : a.type == ElementType::kHalf ? Backward<ElementType::kHalf>(a, p, launcher)
                                        : Backward<ElementType::kBFloat16>(a, p, launcher);
}

}  // namespace ddp::models::bn_relu::kernels

#endif  // SLURM_DDP_TRAINER_MODELS_BN_RELU_KERNELS_CUH_
