// Builds the c10d communication backend for one worker: NCCL for CUDA (one rank per GPU) or Gloo
// for CPU. Bootstraps through any c10d::Store (in production the coordinator's, see
// grpc_store.h), so no MASTER_ADDR/MASTER_PORT or file store is ever needed.
//
// Thread safety: the functions are reentrant; the returned backend is owned by the caller and
// follows c10d's contract (collectives issued from one thread, in the same order on every rank).
#ifndef SLURM_DDP_TRAINER_DDP_PROCESS_GROUP_H_
#define SLURM_DDP_TRAINER_DDP_PROCESS_GROUP_H_

#include <chrono>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddp {

enum class BackendKind { kAuto, kNccl, kGloo };

// "auto" | "nccl" | "gloo"  ->  BackendKind; INVALID_ARGUMENT otherwise.
absl::StatusOr<BackendKind> ParseBackendKind(absl::string_view name);
std::string BackendKindName(BackendKind kind);

// kAuto resolves to kNccl when CUDA devices are visible and NCCL was compiled in, else kGloo.
BackendKind ResolveBackendKind(BackendKind kind);

// True when this build constructs ProcessGroupNCCL (LibTorch with CUDA).
bool NcclCompiledIn();

struct ProcessGroupOptions {
  BackendKind backend = BackendKind::kAuto;
  // Every collective fails after this long instead of hanging (NCCL: watchdog + async error
  // handling; Gloo: per-operation timeout).
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // CUDA device of this rank (NCCL); set as the current device before the first collective.
  int cuda_device = 0;
  // Address Gloo binds to. Empty: GLOO_SOCKET_IFNAME if set, else this host's name, falling back
  // to loopback (c10d's default device).
  std::string gloo_hostname;
  int gloo_threads = 2;
  // Gloo also reduces CUDA tensors (staged through host memory) when LibTorch is a CUDA build;
  // choose kGloo with CUDA tensors to debug NCCL issues.
};

// Creates and connects the backend. Fails (never hangs past options.timeout) if a peer never
// shows up. Errors from c10d are returned as Status (status_from_exception.h: a peer that never
// showed up in the store is DEADLINE_EXCEEDED). Most callers want ProcessGroupHandle
// (process_group_handle.h), which also ends the group.
absl::StatusOr<c10::intrusive_ptr<c10d::Backend>> CreateProcessGroup(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
    const ProcessGroupOptions& options);

// Normal end: waits for queued collectives and releases communicators (NCCL: destroys them so
// the process can exit without the watchdog complaining). Errors from c10d become Status.
absl::Status ShutdownProcessGroup(c10d::Backend& pg);

// Abnormal end (a peer failed, the coordinator said abort): aborts in-flight collectives without
// waiting, so threads blocked in them return with an error instead of hanging.
absl::Status AbortProcessGroup(c10d::Backend& pg);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_DDP_PROCESS_GROUP_H_
