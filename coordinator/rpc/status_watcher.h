// One WatchStatus stream: writes the job's status snapshot every `interval` (the request's
// interval_ms, 0 = 1 s, clamped to 100 ms .. 1 h), and once more (then ends) when the job
// finishes. Like every call it passes the CallGate on its headers (view or control token) before
// its request is read (unary_call.h), and holds a slot of the operators' budget until it ends; a
// stream whose request does not arrive within the gate's first-message timeout is cancelled
// (call_gate.h). The service's ticker then polls every started watcher.
//
// Lifetime: owned by gRPC's call; deletes itself in OnDone. Thread safety: Poll (ticker thread)
// and gRPC's callbacks synchronize on `mu_`. Lock order: the service's watcher lock, then `mu_`;
// the callbacks to the service run without `mu_`.
#ifndef SLURM_DDP_COORDINATOR_RPC_STATUS_WATCHER_H_
#define SLURM_DDP_COORDINATOR_RPC_STATUS_WATCHER_H_

#include <grpcpp/grpcpp.h>

#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/ops/status_cache.h"
#include "coordinator/rpc/call_gate.h"

namespace ddp {

class StatusWatcher final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  using Callback = std::function<void(StatusWatcher*)>;
  // `on_started` runs once the request was read (the service starts polling the watcher);
  // `on_done` runs from OnDone, before the watcher deletes itself, only if `on_started` ran.
  StatusWatcher(grpc::CallbackServerContext* ctx, CallGate* gate, Callback on_started,
                Callback on_done);

  // Starts a write when one is due. The caller keeps the watcher alive meanwhile (the service
  // calls it with its watcher lock held, and on_done takes that lock).
  void Poll(const StatusSnapshot& snapshot, absl::Time now);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // Finishes once (later calls do nothing).
  void FinishOnceLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  grpc::CallbackServerContext* const ctx_;
  CallGate* const gate_;
  const Callback on_started_;
  const Callback on_done_;
  GateTicket ticket_;
  bool started_ = false;  // written before on_started runs; read in OnDone
  grpc::ByteBuffer request_;
  absl::Mutex mu_;
  absl::Duration interval_ ABSL_GUARDED_BY(mu_) = absl::Seconds(1);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time next_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  grpc::ByteBuffer msg_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_RPC_STATUS_WATCHER_H_
