// The CUDA launches of the fused BatchNorm+ReLU kernels (bn_relu_kernels.cuh).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "trainer/models/bn_relu_kernels.cuh"

namespace ddp::models::bn_relu {
namespace {

struct StreamLauncher {
  cudaStream_t stream;
  int Memset(void* p, size_t bytes) {
    return static_cast<int>(cudaMemsetAsync(p, 0, bytes, stream));
  }
  template <typename... Params, typename... Args>
  int Launch(void (*kernel)(Params...), dim3 grid, dim3 block, Args&&... args) {
    kernel<<<grid, block, 0, stream>>>(static_cast<Params>(args)...);
    return static_cast<int>(cudaGetLastError());
  }
};

}  // namespace

int CudaTargetBlocks() {
  constexpr int kDevices = 64;
  static std::atomic<int> cached[kDevices];  // 0: not asked yet
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 512;
  if (device >= 0 && device < kDevices) {
    if (const int known = cached[device].load(std::memory_order_relaxed); known > 0) return known;
  }
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      sms <= 0) {
    return 512;
  }
  if (device >= 0 && device < kDevices) cached[device].store(4 * sms, std::memory_order_relaxed);
  return 4 * sms;
}

int LaunchBnReluForward(const ForwardArgs& args, const GridPlan& plan, void* cuda_stream) {
  StreamLauncher launcher{static_cast<cudaStream_t>(cuda_stream)};
  return kernels::LaunchForward(args, plan, launcher);
}

int LaunchBnReluBackward(const BackwardArgs& args, const GridPlan& plan, void* cuda_stream) {
  StreamLauncher launcher{static_cast<cudaStream_t>(cuda_stream)};
  return kernels::LaunchBackward(args, plan, launcher);
}

}  // namespace ddp::models::bn_relu
