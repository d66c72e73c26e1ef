#include "trainer/launcher/warm_workers.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "trainer/launcher/warm_link.h"

namespace ddp {

WarmWorkers::WarmWorkers(Supervisor& supervisor, absl::Duration stop_grace, Hooks hooks)
    : supervisor_(supervisor), stop_grace_(stop_grace), hooks_(std::move(hooks)) {}

WarmWorkers::~WarmWorkers() {
  EndSettling();
  if (ready_) ::close(ready_->task_end);
}

void WarmWorkers::Start() {
  absl::StatusOr<WarmLinkEnds> link = MakeWarmLink();
  if (!link.ok()) {
    hooks_.log(absl::StrCat("no warm worker: ", link.status().message()));
    return;
  }
  absl::StatusOr<int> id = hooks_.start(link->worker_end);
  ::close(link->worker_end);  // the warm worker has its own
  if (!id.ok()) {
    ::close(link->task_end);
    hooks_.log(absl::StrCat("no warm worker: cannot start ", id.status().message()));
    return;
  }
  ready_ = Ready{*id, link->task_end};
  started_.push_back(*id);
}

std::optional<int> WarmWorkers::Activate(int local_rank, int relay_fd) {
  if (settling_link_ >= 0) Poll();  // the last one may have settled since the last look
  if (!ready_ || !supervisor_.running(ready_->id)) return std::nullopt;
  const Ready warm = *ready_;
  ready_.reset();
  if (const absl::Status sent = SendWarmActivation(warm.task_end, local_rank, relay_fd);
      !sent.ok()) {
    ::close(warm.task_end);
    hooks_.log(absl::StrCat("warm worker (pid ", supervisor_.pid(warm.id),
                            ") cannot take the slot: ", sent.message(), "; starting one"));
    supervisor_.Stop(warm.id, stop_grace_);
    return std::nullopt;
  }
  EndSettling();
  settling_ = warm.id;
  settling_link_ = warm.task_end;
  next_poll_ = absl::Now() + kSettlePoll;
  return warm.id;
}

void WarmWorkers::Poll() {
  if (settling_link_ < 0) return;
  if (!WarmLinkClosed(settling_link_)) {
    next_poll_ = absl::Now() + kSettlePoll;
    return;
  }
  const int settled = settling_;
  EndSettling();
  if (!hooks_.may_respawn() || ready_) return;
  hooks_.log(absl::StrCat("the warm worker (pid ", supervisor_.pid(settled), ") ",
                          supervisor_.running(settled) ? "committed its first step" : "ended",
                          "; starting the next warm worker"));
  Start();
}

void WarmWorkers::OnReadyExit(const ExitStatus& status) {
  hooks_.log(absl::StrCat("warm worker (pid ", supervisor_.pid(ready_->id), ") ", status.Describe(),
                          " before it was needed; replacements start cold"));
  ::close(ready_->task_end);
  ready_.reset();
}

bool WarmWorkers::StartedWarm(int id) const {
  return std::find(started_.begin(), started_.end(), id) != started_.end();
}

void WarmWorkers::Stop() {
  EndSettling();
  if (ready_ && supervisor_.running(ready_->id)) supervisor_.Stop(ready_->id, stop_grace_);
}

void WarmWorkers::EndSettling() {
  if (settling_link_ >= 0) ::close(settling_link_);
  settling_link_ = -1;
  next_poll_ = absl::InfiniteFuture();
}

}  // namespace ddp
