// The arithmetic of the fused training-mode BatchNorm + ReLU (+ residual add) of fused_bn_relu.h,
// compiled for both the host and the device: the CUDA kernels (bn_relu_kernels.cuh) and the CPU
// implementation (bn_relu_cpu.cc) call these same functions, so the CPU unit tests check every
// formula the kernels run. Also the launch interface of the kernels (raw pointers, no LibTorch).
//
// Per channel c over the M = N*H*W positions of a channels-last [M, C] activation x:
//   forward   mean, biased var (Welford partials merged in a fixed order: deterministic)
//             invstd = 1 / sqrt(var + eps), scale = w * invstd
//             y = relu((x - mean) * scale + b [+ r])   (centred first: no cancellation
//             against a large mean)
//             running_mean/var as torch.nn.BatchNorm2d (momentum; unbiased var)
//   backward  g = dy where the ReLU passed (z > 0) else 0
//             db = sum(g), dw = sum(g * (x - mean)) * invstd
//             dx = w * invstd * (g - db / M - (x - mean) * invstd * dw / M),  dr = g
// The mask is recomputed from x (no residual) or read from y (with one): the same z > 0 test the
// forward made, without a saved mask.
//
// Thread safety: pure functions; the Launch* functions enqueue on the given stream.
#ifndef SLURM_DDP_TRAINER_MODELS_BN_RELU_MATH_H_
#define SLURM_DDP_TRAINER_MODELS_BN_RELU_MATH_H_

#include <cmath>
#include <cstdint>

#include "common/host_device.h"

namespace ddp::models::bn_relu {

// Count, mean and sum of squared deviations of a set of values (Welford / Chan et al.). Counts
// are floats, exact below 2^24 positions (kMaxRows).
struct Welford {
  float count = 0;
  float mean = 0;
  float m2 = 0;
};

inline constexpr int64_t kMaxRows = int64_t{1} << 24;

// Adds v to (mean, m2) whose count has just become 1 / inv_count.
DDP_HOST_DEVICE inline void WelfordAdd(float& mean, float& m2, float v, float inv_count) {
  const float delta = v - mean;
  mean += delta * inv_count;
  m2 += delta * (v - mean);
}

DDP_HOST_DEVICE inline Welford WelfordMerge(Welford a, Welford b) {
  if (b.count == 0) return a;
  if (a.count == 0) return b;
  const float n = a.count + b.count;
  const float delta = b.mean - a.mean;
  const float f = b.count / n;
  Welford out;
  out.count = n;
  out.mean = a.mean + delta * f;
  out.m2 = a.m2 + b.m2 + delta * delta * a.count * f;
  return out;
}

// What the forward keeps per channel, for its elementwise pass and the backward (bias is kept
// too: the backward's ReLU mask must be the forward's).
struct ChannelForward {
  float mean;
  float invstd;
  float scale;
  float bias;
};

DDP_HOST_DEVICE inline ChannelForward FinalizeForward(Welford w, float weight, float bias,
                                                      float eps) {
  const float var = w.m2 / w.count;
  ChannelForward f;
  f.mean = w.mean;
  f.invstd = 1.0f / sqrtf(var + eps);
  f.scale = weight * f.invstd;
  f.bias = bias;
  return f;
}

// The forward's saved [4, C] rows (mean, invstd, scale, bias) for channel c.
DDP_HOST_DEVICE inline void StoreChannel(float* saved, int channels, int c,
                                         const ChannelForward& f) {
  saved[c] = f.mean;
  saved[channels + c] = f.invstd;
  saved[2 * channels + c] = f.scale;
  saved[3 * channels + c] = f.bias;
}
DDP_HOST_DEVICE inline ChannelForward LoadChannel(const float* saved, int channels, int c) {
  return ChannelForward{saved[c], saved[channels + c], saved[2 * channels + c],
                        saved[3 * channels + c]};
}

// torch.nn.BatchNorm2d's running statistics update (the unbiased variance, as ATen's).
DDP_HOST_DEVICE inline void UpdateRunning(Welford w, float momentum, float& running_mean,
                                          float& running_var) {
  const float unbiased = w.count > 1 ? w.m2 / (w.count - 1) : w.m2 / w.count;
  running_mean = (1.0f - momentum) * running_mean + momentum * w.mean;
  running_var = (1.0f - momentum) * running_var + momentum * unbiased;
}

// z = (x - mean) * scale + bias + r, the value the ReLU sees (r = 0 without a residual).
DDP_HOST_DEVICE inline float PreActivation(float x, const ChannelForward& f, float r) {
  return fmaf(x - f.mean, f.scale, f.bias) + r;
}

// ReLU that keeps NaN, as torch.relu.
DDP_HOST_DEVICE inline float Relu(float z) { return z <= 0.0f ? 0.0f : z; }

// The gradient through the ReLU: dy where it passed (its output > 0), else 0 (threshold_backward).
DDP_HOST_DEVICE inline float MaskedGrad(float dy, float relu_input_or_output) {
  return relu_input_or_output > 0.0f ? dy : 0.0f;
}

// Per-channel coefficients of the backward: dx = a * g + b * (x - mean) + c.
struct ChannelBackward {
  float a;
  float b;
  float c;
  float dweight;
  float dbias;
};

// sum_g = sum(g), sum_gc = sum(g * (x - mean)) over the channel's `count` positions.
DDP_HOST_DEVICE inline ChannelBackward FinalizeBackward(double sum_g, double sum_gc, float count,
                                                        float invstd, float weight) {
  ChannelBackward k;
  k.dbias = static_cast<float>(sum_g);
  k.dweight = static_cast<float>(sum_gc * invstd);
  const float mean_g = static_cast<float>(sum_g / count);
  const float mean_gxhat = static_cast<float>(sum_gc * invstd / count);
  k.a = weight * invstd;
  k.b = -k.a * invstd * mean_gxhat;
  k.c = -k.a * mean_g;
  return k;
}

DDP_HOST_DEVICE inline float InputGrad(float g, float x, float mean, const ChannelBackward& k) {
  return fmaf(k.b, x - mean, fmaf(k.a, g, k.c));
}

// How the kernels split an [M, C] activation: blocks of tx * ty threads; a thread owns one group
// of `vec` channels (16 bytes of x) and every ty-th row of its block's slab of rows. grid_x
// blocks cover the channels, `slabs` blocks the rows (a slab is slab_rows rows).
struct GridPlan {
  int vec = 8;
  int groups = 0;  // C / vec
  int tx = 0;
  int ty = 0;
  int grid_x = 0;
  int slabs = 0;
  int64_t slab_rows = 0;
  int apply_blocks_y = 0;  // the elementwise kernels' grid: grid_x x this (they stride over rows)
};

// rows = M, element_size in bytes (2 or 4); target_blocks ~ a few blocks per multiprocessor.
// channels must be a multiple of 16 / element_size.
inline GridPlan PlanGrid(int64_t rows, int channels, int element_size, int target_blocks) {
  GridPlan p;
  p.vec = 16 / element_size;
  p.groups = channels / p.vec;
  p.tx = p.groups < 32 ? p.groups : 32;
  p.ty = 256 / p.tx;
  if (p.ty > 32) p.ty = 32;
  p.grid_x = (p.groups + p.tx - 1) / p.tx;
  // At least 8 rows per thread in a slab, at most 65535 slabs (the grid's y limit).
  const int64_t min_slab = static_cast<int64_t>(p.ty) * 8;
  int64_t slabs = target_blocks / p.grid_x;
  if (slabs < 1) slabs = 1;
  const int64_t most = (rows + min_slab - 1) / min_slab;
  if (slabs > most) slabs = most;
  if (slabs > 65535) slabs = 65535;
  if (slabs < 1) slabs = 1;
  p.slab_rows = (rows + slabs - 1) / slabs;
  p.slabs = static_cast<int>((rows + p.slab_rows - 1) / p.slab_rows);
  // The elementwise kernels load each thread's per-channel constants once (up to 56 floats for
  // 8 channels): about 2 * target_blocks blocks in all, so that a thread strides over many rows
  // rather than loading them for one.
  const int64_t row_blocks = (rows + p.ty - 1) / p.ty;
  int64_t apply = 2 * static_cast<int64_t>(target_blocks) / p.grid_x;
  if (apply < 1) apply = 1;
  if (apply > row_blocks) apply = row_blocks;
  if (apply > 65535) apply = 65535;
  p.apply_blocks_y = static_cast<int>(apply);
  return p;
}

// ---- CUDA launch interface (bn_relu_kernel.cu) -------------------------------------------------

enum class ElementType { kFloat = 0, kHalf = 1, kBFloat16 = 2 };

// Workspace layouts (floats, then one uint32 counter per column of blocks, which the launch
// zeroes itself). Forward: count[slabs], mean[slabs][C], m2[slabs][C]. Backward: sum_g[slabs][C],
// sum_gc[slabs][C], then a, b, c [3][C].
DDP_HOST_DEVICE inline int64_t ForwardWorkspaceFloats(const GridPlan& plan, int channels) {
  return plan.slabs + 2 * static_cast<int64_t>(plan.slabs) * channels;
}
DDP_HOST_DEVICE inline int64_t BackwardWorkspaceFloats(const GridPlan& plan, int channels) {
  return 2 * static_cast<int64_t>(plan.slabs) * channels + 3 * static_cast<int64_t>(channels);
}
inline int64_t ForwardWorkspaceBytes(const GridPlan& plan, int channels) {
  return 4 * (ForwardWorkspaceFloats(plan, channels) + plan.grid_x);
}
inline int64_t BackwardWorkspaceBytes(const GridPlan& plan, int channels) {
  return 4 * (BackwardWorkspaceFloats(plan, channels) + plan.grid_x);
}

struct ForwardArgs {
  ElementType type = ElementType::kBFloat16;
  const void* x = nullptr;         // [rows, channels]
  const void* residual = nullptr;  // [rows, channels] or null
  void* y = nullptr;               // [rows, channels]
  int64_t rows = 0;
  int channels = 0;
  const float* weight = nullptr;  // [channels]
  const float* bias = nullptr;
  float* running_mean = nullptr;  // updated in place; null: not tracked
  float* running_var = nullptr;
  float* saved = nullptr;  // [4, channels]: mean, invstd, scale, bias (ChannelForward; written)
  float eps = 1e-5f;
  float momentum = 0.1f;
  void* workspace = nullptr;  // ForwardWorkspaceBytes
};

struct BackwardArgs {
  ElementType type = ElementType::kBFloat16;
  const void* dy = nullptr;  // [rows, channels]
  const void* x = nullptr;
  const void* y = nullptr;  // the forward's output: the mask when there was a residual
  void* dx = nullptr;
  void* dresidual = nullptr;  // null without a residual
  int64_t rows = 0;
  int channels = 0;
  const float* weight = nullptr;
  const float* saved = nullptr;  // the forward's [4, channels]
  float* dweight = nullptr;      // [channels] (written)
  float* dbias = nullptr;
  void* workspace = nullptr;  // BackwardWorkspaceBytes
};

// The same computation on the CPU, in the kernels' order for `plan` (bn_relu_cpu.cc): the
// reference the kernels are tested against. workspace is not used.
void CpuForward(const ForwardArgs& args, const GridPlan& plan);
void CpuBackward(const BackwardArgs& args, const GridPlan& plan);

// 4 blocks per multiprocessor of the current CUDA device: PlanGrid's target_blocks on the GPU.
int CudaTargetBlocks();

// Return a cudaError_t (0: success). plan from PlanGrid for the same rows/channels/type.
int LaunchBnReluForward(const ForwardArgs& args, const GridPlan& plan, void* cuda_stream);
int LaunchBnReluBackward(const BackwardArgs& args, const GridPlan& plan, void* cuda_stream);

}  // namespace ddp::models::bn_relu

#endif  // SLURM_DDP_TRAINER_MODELS_BN_RELU_MATH_H_
