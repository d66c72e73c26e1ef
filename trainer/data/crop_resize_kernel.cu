// The batched crop/resize/flip/normalize kernel of crop_resize.h: one thread per output pixel,
// all three channels (the footprint and weights are shared by them).
#include <cuda_runtime.h>

#include "trainer/data/crop_resize.h"

namespace ddp::data {
namespace {

__global__ void CropResizeKernel(const CropResizeJob* jobs, int n, int size, ChannelAffine affine,
                                 float* out) {
  const int64_t plane = static_cast<int64_t>(size) * size;
  const int64_t total = plane * n;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int b = static_cast<int>(k / plane);
    const int pixel = static_cast<int>(k % plane);
    const int y = pixel / size;
    const int x = pixel % size;
    float v[3];
    CropResizePixel(jobs[b], size, y, x, affine, v);
    float* dst = out + static_cast<int64_t>(b) * 3 * plane + pixel;
    dst[0] = v[0];
    dst[plane] = v[1];
    dst[2 * plane] = v[2];
  }
}

}  // namespace

int LaunchCropResize(const CropResizeJob* jobs, int n, int size, const ChannelAffine& affine,
                     float* out, void* cuda_stream) {
  if (n <= 0) return 0;
  const int64_t total = static_cast<int64_t>(size) * size * n;
  constexpr int kThreads = 256;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  const int grid = static_cast<int>(blocks < 65535 * 32 ? blocks : 65535 * 32);
  CropResizeKernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(cuda_stream)>>>(jobs, n, size,
                                                                                  affine, out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace ddp::data
