#include "trainer/app/progress_reporter.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "trainer/app/config.h"

namespace ddp {

ProgressReporter::ProgressReporter(CoordinatorApi* api, ProgressReporterOptions options)
    : api_(api), options_(std::move(options)) {
  {
    absl::MutexLock lock(&mu_);
    last_success_ = absl::Now();
  }
  thread_ = std::thread([this] { Loop(); });
}

ProgressReporter::~ProgressReporter() {
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
  }
  thread_.join();
}

void ProgressReporter::Update(const ProgressReport& report) {
  absl::MutexLock lock(&mu_);
  latest_ = report;
}

ProgressReport ProgressReporter::latest() const {
  absl::MutexLock lock(&mu_);
  return latest_;
}

void ProgressReporter::SetOwnGeneration(int64_t generation) { own_generation_.store(generation); }

void ProgressReporter::OnNewerGeneration(std::function<void()> callback) {
  absl::MutexLock lock(&callback_mu_);
  on_newer_generation_ = std::move(callback);
}

std::optional<std::string> ProgressReporter::abort_reason() const {
  absl::MutexLock lock(&mu_);
  if (!abort_cause_) return std::nullopt;
  return abort_cause_->text;
}

std::optional<FailureCause> ProgressReporter::abort_cause() const {
  absl::MutexLock lock(&mu_);
  return abort_cause_;
}

void ProgressReporter::Flush() { SendOnce(); }

void ProgressReporter::SendOnce() {
  absl::MutexLock send_lock(&send_mu_);
  ProgressReport report;
  {
    absl::MutexLock lock(&mu_);
    report = latest_;
  }
  absl::StatusOr<HeartbeatReply> reply = api_->Heartbeat(report);
  if (reply.ok()) {
    announced_generation_.store(reply->membership_generation);
    const int64_t own = own_generation_.load();
    absl::MutexLock lock(&callback_mu_);
    if (reply->membership_generation > own && reply->membership_generation > notified_generation_ &&
        on_newer_generation_) {
      notified_generation_ = reply->membership_generation;
      on_newer_generation_();
    }
  }
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  if (reply.ok()) {
    last_success_ = now;
    if (reply->command == Command::kCheckpointAndStop) stop_requested_.store(true);
    if (reply->command == Command::kAbort) {
      // The latest reason wins: the coordinator may re-attribute a failure to its root cause.
      if (!abort_cause_) abort_since_ = now;
      abort_cause_ = reply->cause;
      if (abort_cause_->text.empty()) abort_cause_->text = "the coordinator aborted the job";
    }
  } else if (now - last_success_ > options_.unreachable_timeout && !abort_cause_) {
    abort_cause_ = FailureCause{
        -1, FailureKind::kCoordinatorLost,
        absl::StrCat("coordinator unreachable for ", absl::FormatDuration(now - last_success_),
                     ": ", reply.status().message())};
    abort_since_ = now;
  }
}

void ProgressReporter::Loop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return shutdown_; };
      mu_.AwaitWithTimeout(absl::Condition(&wake), options_.period);
      if (shutdown_) return;
    }
    SendOnce();
    absl::MutexLock lock(&mu_);
    if (abort_cause_ && !abort_acknowledged_.load() &&
        absl::Now() - abort_since_ > options_.abort_grace) {
      std::fprintf(stderr, "%saborting: %s\n", options_.log_prefix.c_str(),
                   abort_cause_->text.c_str());
      std::fflush(stderr);
      _exit(kExitAborted);
    }
  }
}

}  // namespace ddp
