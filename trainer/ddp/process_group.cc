#include "trainer/ddp/process_group.h"

#include <torch/cuda.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "trainer/ddp/backend_factories.h"
#include "trainer/ddp/status_from_exception.h"

namespace ddp {

absl::StatusOr<BackendKind> ParseBackendKind(absl::string_view name) {
  if (name == "auto") return BackendKind::kAuto;
  if (name == "nccl") return BackendKind::kNccl;
  if (name == "gloo") return BackendKind::kGloo;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown backend '", name, "' (expected auto, nccl or gloo)"));
}

std::string BackendKindName(BackendKind kind) {
  switch (kind) {
    case BackendKind::kAuto:
      return "auto";
    case BackendKind::kNccl:
      return "nccl";
    case BackendKind::kGloo:
      return "gloo";
  }
  return "unknown";
}

bool NcclCompiledIn() { return internal::NcclBackendCompiledIn(); }

BackendKind ResolveBackendKind(BackendKind kind) {
  if (kind != BackendKind::kAuto) return kind;
  return NcclCompiledIn() && torch::cuda::is_available() ? BackendKind::kNccl : BackendKind::kGloo;
}

absl::StatusOr<c10::intrusive_ptr<c10d::Backend>> CreateProcessGroup(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
    const ProcessGroupOptions& options) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is outside world of size ", world_size));
  }
  const BackendKind kind = ResolveBackendKind(options.backend);
  try {
    if (kind == BackendKind::kNccl) {
      if (!NcclCompiledIn()) {
        return absl::FailedPreconditionError(
            "backend nccl requested but this build has no NCCL (LibTorch without CUDA)");
      }
      if (!torch::cuda::is_available()) {
        return absl::FailedPreconditionError(
            "backend nccl requested but no CUDA device is visible");
      }
      if (options.cuda_device < 0 ||
          options.cuda_device >= static_cast<int>(torch::cuda::device_count())) {
        return absl::FailedPreconditionError(absl::StrCat("CUDA device ", options.cuda_device,
                                                          " requested but only ",
                                                          torch::cuda::device_count(), " visible"));
      }
      return internal::NewNcclBackend(store, rank, world_size, options.timeout,
                                      options.cuda_device);
    }
    return internal::NewGlooBackend(store, rank, world_size, options.timeout, options.gloo_hostname,
                                    options.gloo_threads);
  } catch (...) {
    return StatusFromException(
        std::current_exception(),
        absl::StrCat("creating the ", BackendKindName(kind), " process group for rank ", rank,
                     " of ", world_size, " failed"));
  }
}

absl::Status ShutdownProcessGroup(c10d::Backend& pg) {
  return RunGuarded("shutting down the process group failed", [&] {
    pg.shutdown();
    return absl::OkStatus();
  });
}

absl::Status AbortProcessGroup(c10d::Backend& pg) {
  return RunGuarded("aborting the process group failed", [&] {
    pg.abort();
    return absl::OkStatus();
  });
}

}  // namespace ddp
