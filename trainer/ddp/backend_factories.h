// The two translation units that include c10d's backend headers. Kept apart from everything
// else because ProcessGroupGloo.hpp needs gloo headers the LibTorch wheel does not ship (we
// compile against Debian's for declarations only; docs/development.md, "Gloo from C++ with the pip
// wheel"), and ProcessGroupNCCL.hpp needs nccl.h. Both throw c10::Error on failure;
// process_group.cc converts to Status.
#ifndef SLURM_DDP_TRAINER_DDP_BACKEND_FACTORIES_H_
#define SLURM_DDP_TRAINER_DDP_BACKEND_FACTORIES_H_

#include <chrono>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace ddp::internal {

c10::intrusive_ptr<c10d::Backend> NewGlooBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                 int rank, int world_size,
                                                 std::chrono::milliseconds timeout,
                                                 const std::string& hostname, int threads);

// Returns nullptr when NCCL is not compiled in.
c10::intrusive_ptr<c10d::Backend> NewNcclBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                 int rank, int world_size,
                                                 std::chrono::milliseconds timeout,
                                                 int cuda_device);
bool NcclBackendCompiledIn();

}  // namespace ddp::internal

#endif  // SLURM_DDP_TRAINER_DDP_BACKEND_FACTORIES_H_
