// The GPU pipeline's fused transform: for a whole batch of decoded images, crop, resize
// (bilinear with antialiasing, as torch's _upsample_bilinear2d_aa), flip, round to the 0..255
// grid and normalize, in one CUDA kernel launch. One output pixel is a pure function of its job
// (CropResizePixel), compiled for both host and device, so the CPU unit tests check the exact
// arithmetic the kernel runs against tensor_transforms.h's reference path.
//
// Thread safety: pure functions; LaunchCropResize enqueues on the given stream.
#ifndef SLURM_DDP_TRAINER_DATA_CROP_RESIZE_H_
#define SLURM_DDP_TRAINER_DATA_CROP_RESIZE_H_

#include <cstdint>

#include "common/host_device.h"

namespace ddp::data {

// Where output image b comes from (a TransformPlan, flattened for the device).
struct CropResizeJob {
  const uint8_t* src = nullptr;  // decoded image, [src_h, src_w, 3] uint8, rows packed
  int src_h = 0;
  int src_w = 0;
  int box_top = 0;  // source crop
  int box_left = 0;
  int box_h = 0;
  int box_w = 0;
  int resize_h = 0;  // the crop is resized to this size...
  int resize_w = 0;
  int out_top = 0;  // ...and the output is the size x size window at this offset of it
  int out_left = 0;
  int flip = 0;  // horizontal flip of the output
};

// x * scale[c] + shift[c] per channel (x on the 0..255 grid).
struct ChannelAffine {
  float scale[3] = {1, 1, 1};
  float shift[3] = {0, 0, 0};
};

namespace crop_resize_internal {

DDP_HOST_DEVICE inline float Triangle(float x) {
  x = x < 0 ? -x : x;
  return x < 1.0f ? 1.0f - x : 0.0f;
}

// torch's antialiased bilinear footprint of output index i: [first, first + count) in the input,
// center and the filter's inverse scale.
struct Footprint {
  int first;
  int count;
  float center;
  float invscale;
};

DDP_HOST_DEVICE inline Footprint FootprintOf(int i, int in_size, int out_size) {
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  const float support = scale >= 1.0f ? scale : 1.0f;
  Footprint f;
  f.center = scale * (static_cast<float>(i) + 0.5f);
  f.invscale = scale >= 1.0f ? 1.0f / scale : 1.0f;
  int first = static_cast<int>(f.center - support + 0.5f);
  first = first < 0 ? 0 : first;
  int last = static_cast<int>(f.center + support + 0.5f);
  last = last > in_size ? in_size : last;
  f.first = first;
  f.count = last - first;
  return f;
}

DDP_HOST_DEVICE inline float Weight(const Footprint& f, int j) {
  return Triangle((static_cast<float>(j + f.first) - f.center + 0.5f) * f.invscale);
}

DDP_HOST_DEVICE inline float MulRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);  // no fused multiply-add: the same rounding as the host
#else
  return a * b;
#endif
}

DDP_HOST_DEVICE inline float AddRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

}  // namespace crop_resize_internal

// The three normalized channel values of output pixel (y, x) of `job`, for an output of
// size x size.
DDP_HOST_DEVICE inline void CropResizePixel(const CropResizeJob& job, int size, int y, int x,
                                            const ChannelAffine& affine, float out[3]) {
  namespace in = crop_resize_internal;
  const int xo = job.flip ? size - 1 - x : x;
  const in::Footprint fy = in::FootprintOf(y + job.out_top, job.box_h, job.resize_h);
  const in::Footprint fx = in::FootprintOf(xo + job.out_left, job.box_w, job.resize_w);
  float total_x = 0;
  for (int j = 0; j < fx.count; ++j) total_x += in::Weight(fx, j);
  float total_y = 0;
  for (int i = 0; i < fy.count; ++i) total_y += in::Weight(fy, i);
  float acc[3] = {0, 0, 0};
  for (int i = 0; i < fy.count; ++i) {
    const float wy = in::Weight(fy, i) / total_y;
    const uint8_t* row = job.src + (static_cast<int64_t>(job.box_top + fy.first + i) * job.src_w +
                                    job.box_left + fx.first) *
                                       3;
    float line[3] = {0, 0, 0};  // the horizontal pass first, as torch's separable filter
    for (int j = 0; j < fx.count; ++j) {
      const float wx = in::Weight(fx, j) / total_x;
      for (int c = 0; c < 3; ++c) line[c] += wx * static_cast<float>(row[j * 3 + c]);
    }
    for (int c = 0; c < 3; ++c) acc[c] += wy * line[c];
  }
  for (int c = 0; c < 3; ++c) {
    float v = acc[c];
#ifdef __CUDA_ARCH__
    v = rintf(v);
#else
    v = __builtin_rintf(v);
#endif
    v = v < 0 ? 0 : (v > 255 ? 255 : v);  // the CPU pipeline resizes in uint8
    out[c] = in::AddRn(in::MulRn(v, affine.scale[c]), affine.shift[c]);
  }
}

// [n, 3, size, size] float32 output; `jobs` is an array of n jobs in device memory. Returns a
// cudaError_t as int (0: launched).
int LaunchCropResize(const CropResizeJob* jobs, int n, int size, const ChannelAffine& affine,
                     float* out, void* cuda_stream);

}  // namespace ddp::data

#endif  // SLURM_DDP_TRAINER_DATA_CROP_RESIZE_H_
