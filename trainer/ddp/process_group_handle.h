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
// reference goes. That drop waits for the collectives its threads still run, which can take up to
// the group's timeout (a wait on a live peer that never sends, or a receive that a dying peer cut
// off in the middle, which Gloo's TCP transport does not end). So a failed Gloo group is dropped
// on a thread of its own, once that thread holds its last reference (other holders, such as the
// DDP engine, let go when they end): Close returns at once, and the group's connections close as
// soon as its collectives end. GroupsEnding() counts the groups still being dropped. A healthy
// group (or a failed NCCL one, aborted) ends on the caller's thread.
//
// A build can be given up from another thread (GroupBuildCancel): building a Gloo group waits for
// every peer's address in the store, then connects to each, and a peer that dies after it
// published its address leaves the others inside Gloo's connect until the group's timeout, where
// nothing but that timeout ends the wait. With a GroupBuildCancel, the Gloo build runs on a
// thread of its own and the caller waits for it or for Cancel(), whichever comes first: a
// cancelled build is left to end by itself (at the latest at the group's timeout; a group it
// still builds is then dropped), and Create returns UNAVAILABLE at once.
//
//   GroupBuildCancel cancel;                       // Cancel() from the heartbeat thread
//   auto pg = ProcessGroupHandle::Create(store, "gen3", r, w, o, &cancel);
//
// Thread safety: owned by one thread (the training thread); backend() follows c10d's contract.
// GroupBuildCancel::Cancel may be called from any thread.
#ifndef SLURM_DDP_TRAINER_DDP_PROCESS_GROUP_HANDLE_H_
#define SLURM_DDP_TRAINER_DDP_PROCESS_GROUP_HANDLE_H_

#include <memory>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "trainer/ddp/process_group.h"

namespace ddp {

namespace internal {
struct PendingBuild;
}  // namespace internal

// Gives up a group build that waits now, and every later one until Reset() (see above).
class GroupBuildCancel {
 public:
  // Any thread. `why` becomes the message of the builds it ends.
  void Cancel(absl::string_view why);
  // Builds from now on wait again (the training thread, before a new build).
  void Reset();
  bool cancelled() const;

 private:
  friend class ProcessGroupHandle;
  absl::Status Cancelled() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::optional<std::string> why_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<internal::PendingBuild> waiting_ ABSL_GUARDED_BY(mu_);
};

class ProcessGroupHandle {
 public:
  // Builds and connects the group with every key under `prefix` (c10d::PrefixStore; empty: the
  // store's own keys). Errors as CreateProcessGroup; UNAVAILABLE when `cancel` (may be null)
  // gives the build up.
  static absl::StatusOr<ProcessGroupHandle> Create(const c10::intrusive_ptr<c10d::Store>& store,
                                                   const std::string& prefix, int rank,
                                                   int world_size,
                                                   const ProcessGroupOptions& options,
                                                   GroupBuildCancel* cancel = nullptr);

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

  // Failed Gloo groups of this process still being dropped in the background (see above): a
  // process that exits with some left should not run static destructors under their threads.
  static int GroupsEnding();

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
