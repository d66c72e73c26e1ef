// One WatchStatus stream: writes the job's status snapshot every `interval`, and once more (then
// ends) when the job finishes. The service's ticker polls every live watcher.
//
// Lifetime: owned by gRPC's call; it removes itself from the service's list and deletes itself
// in OnDone. Thread safety: Poll (ticker thread) and gRPC's callbacks synchronize on `mu_`.
#ifndef SLURM_DDP_COORDINATOR_RPC_STATUS_WATCHER_H_
#define SLURM_DDP_COORDINATOR_RPC_STATUS_WATCHER_H_

#include <grpcpp/grpcpp.h>

#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/ops/status_cache.h"
#include "proto/coordinator.pb.h"

namespace ddp {

class StatusWatcher final : public grpc::ServerWriteReactor<slurm_ddp::v1::JobStatus> {
 public:
  // `on_done` runs once, from OnDone, before the watcher deletes itself.
  StatusWatcher(absl::Duration interval, std::function<void(StatusWatcher*)> on_done);

  // Starts a write when one is due. The caller keeps the watcher alive meanwhile (the service
  // calls it with its watcher lock held, and on_done takes that lock).
  void Poll(const StatusSnapshot& snapshot, absl::Time now);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  const absl::Duration interval_;
  const std::function<void(StatusWatcher*)> on_done_;
  absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time next_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  slurm_ddp::v1::JobStatus msg_ ABSL_GUARDED_BY(mu_);
};

// A WatchStatus reactor that only finishes with `status` (a refused call).
class RefusedWatch final : public grpc::ServerWriteReactor<slurm_ddp::v1::JobStatus> {
 public:
  explicit RefusedWatch(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_RPC_STATUS_WATCHER_H_
