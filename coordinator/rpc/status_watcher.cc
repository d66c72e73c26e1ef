#include "coordinator/rpc/status_watcher.h"

#include <utility>

namespace ddp {

StatusWatcher::StatusWatcher(absl::Duration interval, std::function<void(StatusWatcher*)> on_done)
    : interval_(interval), on_done_(std::move(on_done)) {}

void StatusWatcher::Poll(const StatusSnapshot& snapshot, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (finishing_ || writing_) return;
  // Due every interval, and at once when the job finishes.
  if (now < next_ && !snapshot.status.finished) return;
  msg_ = snapshot.proto;
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
  if (!ok && !finishing_) {
    finishing_ = true;
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "watch ended"));
  }
}

void StatusWatcher::OnCancel() {
  absl::MutexLock lock(&mu_);
  if (!finishing_ && !writing_) {
    finishing_ = true;
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled"));
  }
}

void StatusWatcher::OnDone() {
  on_done_(this);
  delete this;
}

}  // namespace ddp
