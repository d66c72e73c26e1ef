#include "coordinator/rpc/status_watcher.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "coordinator/rpc/unary_call.h"
#include "proto/convert.h"
#include "proto/coordinator.pb.h"

namespace ddp {

StatusWatcher::StatusWatcher(grpc::CallbackServerContext* ctx, CallGate* gate, Callback on_started,
                             Callback on_done)
    : ctx_(ctx), gate_(gate), on_started_(std::move(on_started)), on_done_(std::move(on_done)) {
  absl::Status admitted = gate_->Enter(*ctx, "WatchStatus", kViewRoles, &ticket_);
  if (!admitted.ok()) {
    absl::MutexLock lock(&mu_);
    FinishOnceLocked(ToGrpc(admitted));  // the request is never read
    return;
  }
  gate_->AwaitRequest(ctx_, ticket_, "WatchStatus");  // before the read can complete
  StartRead(&request_);
}

void StatusWatcher::FinishOnceLocked(const grpc::Status& status) {
  if (finishing_) return;
  finishing_ = true;
  Finish(status);
}

void StatusWatcher::OnReadDone(bool ok) {
  gate_->RequestArrived(ctx_);
  slurm_ddp::v1::WatchStatusRequest req;
  absl::Status parsed = ok ? ParseRequest("WatchStatus", &request_, &req)
                           : absl::InvalidArgumentError("WatchStatus: no request message");
  {
    absl::MutexLock lock(&mu_);
    if (!parsed.ok() || finishing_) {
      FinishOnceLocked(ToGrpc(parsed));
      return;
    }
    const int64_t ms = req.interval_ms() == 0 ? 1000 : std::max<int64_t>(req.interval_ms(), 100);
    interval_ = absl::Milliseconds(std::min<int64_t>(ms, 3600000));
  }
  started_ = true;
  on_started_(this);
}

void StatusWatcher::Poll(const StatusSnapshot& snapshot, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (finishing_ || writing_) return;
  // Due every interval, and at once when the job finishes.
  if (now < next_ && !snapshot.status.finished) return;
  grpc::Slice slice(snapshot.proto_bytes);
  msg_ = grpc::ByteBuffer(&slice, 1);
  writing_ = true;
  next_ = now + interval_;
  if (snapshot.status.finished) {
    finishing_ = true;
    StartWriteAndFinish(&msg_, grpc::WriteOptions(), grpc::Status::OK);
  } else {
    StartWrite(&msg_);
  }
}

void StatusWatcher::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  writing_ = false;
  if (!ok) FinishOnceLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watch ended"));
}

void StatusWatcher::OnCancel() {
  absl::MutexLock lock(&mu_);
  if (!writing_) FinishOnceLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled"));
}

void StatusWatcher::OnDone() {
  if (started_) on_done_(this);
  gate_->Leave(&ticket_);
  delete this;
}

}  // namespace ddp
