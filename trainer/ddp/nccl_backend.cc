// The only translation unit that includes ProcessGroupNCCL.hpp. Compiled in every CUDA build
// of LibTorch (also in CI, which has no GPU: the build is the proof that it links); runs only
// where a GPU is present.
#ifdef DDP_WITH_NCCL
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL
#endif
#include <c10/cuda/CUDAFunctions.h>

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cstdlib>

#include "trainer/ddp/backend_factories.h"

namespace ddp::internal {

bool NcclBackendCompiledIn() {
#ifdef DDP_WITH_NCCL
  return true;
#else
  return false;
#endif
}

c10::intrusive_ptr<c10d::Backend> NewNcclBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                 int rank, int world_size,
                                                 std::chrono::milliseconds timeout,
                                                 int cuda_device) {
#ifdef DDP_WITH_NCCL
  // Async error handling, mode 2 (CleanUpOnly): a failed or timed-out collective aborts the
  // communicator and surfaces as an error in the worker, which recovers in place (in-job
  // recovery) or exits naming the failure itself. Mode 1 (TearDown, torch's usual choice) would
  // let the watchdog kill the process, and with it a survivor that was about to rejoin. Respect
  // a user's explicit choice.
  setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2", /*overwrite=*/0);
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(cuda_device));
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  auto backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
  // Binding the device lets NCCL create its communicator eagerly, with the device known.
  backend->setBoundDeviceId(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(cuda_device)));
  return backend;
#else
  (void)store, (void)rank, (void)world_size, (void)timeout, (void)cuda_device;
  return {};
#endif
}

}  // namespace ddp::internal
