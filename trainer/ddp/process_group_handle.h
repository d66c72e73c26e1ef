// Owns one c10d process group for its lifetime: built under its own key prefix of a store, and
// ended exactly once — shut down (pending collectives finish, communicators are released) when
// it ends normally, aborted (in-flight collectives fail at once instead of waiting for their
// timeout) when a collective failed (MarkFailed) or an exception is unwinding through its owner.
// Rebuilding a group after a failure is: destroy the handle, Create a new one under a new prefix
// (e.g. one per membership generation), so the two rendezvous never meet in the store.
//
//   ASSIGN_OR_RETURN(ProcessGroupHandle pg, ProcessGroupHandle::Create(store, "gen3", r, w, o));
//   if (!RunCollectives(pg.backend()).ok()) pg.MarkFailed();
//   // ~ProcessGroupHandle: abort if marked failed, else shutdown
//
// Gloo keeps no abort or shutdown of its own: its group closes its connections when the last
// reference goes, which this handle drops at its end (other holders, such as the DDP engine, must
// be gone first to close it then). That end waits for the collectives its threads still run,
// which can take up to the group's timeout when one waits on a live peer that never sends: the
// wait is reported through the collective-wait hook (dist_errors.h), as any collective wait.
//
// Thread safety: owned by one thread (the training thread); backend() follows c10d's contract.
#ifndef SLURM_DDP_TRAINER_DDP_PROCESS_GROUP_HANDLE_H_
#define SLURM_DDP_TRAINER_DDP_PROCESS_GROUP_HANDLE_H_

#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/ddp/process_group.h"

namespace ddp {

class ProcessGroupHandle {
 public:
  // Builds and connects the group with every key under `prefix` (c10d::PrefixStore; empty: the
  // store's own keys). Errors as CreateProcessGroup.
  static absl::StatusOr<ProcessGroupHandle> Create(const c10::intrusive_ptr<c10d::Store>& store,
                                                   const std::string& prefix, int rank,
                                                   int world_size,
                                                   const ProcessGroupOptions& options);

  // Takes over a backend built by other means (a test double, a group made by hand).
  static ProcessGroupHandle Adopt(c10::intrusive_ptr<c10d::Backend> backend, std::string prefix) {
    return ProcessGroupHandle(std::move(backend), std::move(prefix));
  }

  ProcessGroupHandle() = default;  // holds nothing
  ProcessGroupHandle(ProcessGroupHandle&& other) noexcept;
  ProcessGroupHandle& operator=(ProcessGroupHandle&& other) noexcept;
  ProcessGroupHandle(const ProcessGroupHandle&) = delete;
  ProcessGroupHandle& operator=(const ProcessGroupHandle&) = delete;
  ~ProcessGroupHandle();

  // A collective of this group failed: its end will be an abort.
  void MarkFailed() { failed_ = true; }
  bool failed() const { return failed_; }

  // Ends the group now (shutdown, or abort when failed) and drops it. Idempotent; OK when empty.
  absl::Status Close();
  // Ends the group now with an abort, whatever its state.
  absl::Status Abort();

  bool valid() const { return backend_ != nullptr; }
  c10d::Backend& backend() const { return *backend_; }
  const c10::intrusive_ptr<c10d::Backend>& shared() const { return backend_; }
  const std::string& prefix() const { return prefix_; }

 private:
  ProcessGroupHandle(c10::intrusive_ptr<c10d::Backend> backend, std::string prefix);

  c10::intrusive_ptr<c10d::Backend> backend_;
  std::string prefix_;
  bool failed_ = false;
  int uncaught_at_start_ = 0;  // std::uncaught_exceptions() when built
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_DDP_PROCESS_GROUP_HANDLE_H_
