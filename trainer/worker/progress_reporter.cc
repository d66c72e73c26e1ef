#include "trainer/worker/progress_reporter.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/exit_codes.h"

namespace ddp {

ProgressReporter::ProgressReporter(CoordinatorApi* api, ProgressReporterOptions options)
    : api_(api), options_(std::move(options)) {
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

bool ProgressReporter::CheckLostLocked(absl::Time now) const {
  // A call in flight past its deadline: this process was stopped meanwhile; its end decides.
  const bool suspended = in_flight_since_ && now - *in_flight_since_ > options_.heartbeat_deadline +
                                                                           options_.suspend_margin;
  if (!lost_since_ && !suspended && unanswered_since_ &&
      now - *unanswered_since_ > options_.coordinator_grace) {
    lost_since_ = now;
  }
  return lost_since_.has_value();
}

absl::Duration ProgressReporter::unanswered_for() const {
  absl::MutexLock lock(&mu_);
  return unanswered_since_ ? absl::Now() - *unanswered_since_ : absl::ZeroDuration();
}

namespace {
std::string Seconds(absl::Duration d) { return absl::StrFormat("%.1fs", absl::ToDoubleSeconds(d)); }
}  // namespace

std::string ProgressReporter::unanswered_text() const { return Seconds(unanswered_for()); }

bool ProgressReporter::coordinator_lost() const {
  absl::MutexLock lock(&mu_);
  return CheckLostLocked(absl::Now());
}

bool ProgressReporter::coordinator_silent() const {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  if (CheckLostLocked(now)) return true;
  const absl::Duration silence = std::min(options_.coordinator_grace, 3 * options_.period);
  return call_unreachable_ || (unanswered_since_ && now - *unanswered_since_ > silence);
}

void ProgressReporter::NoteUnreachable() {
  absl::MutexLock lock(&mu_);
  call_unreachable_ = true;
}

void ProgressReporter::MarkCoordinatorLost() {
  absl::MutexLock lock(&mu_);
  if (!lost_since_) lost_since_ = absl::Now();
}

namespace {
constexpr int kPhaseShift = 56;
constexpr uint64_t kTimeMask = (uint64_t{1} << kPhaseShift) - 1;

// The step section time in `phase` counts for; -1: none (checkpoint, eval, recovery).
int SectionOf(StepPhase phase) {
  switch (phase) {
    case StepPhase::kData:
      return static_cast<int>(StepSection::kData);
    case StepPhase::kForward:
    case StepPhase::kBackward:
      return static_cast<int>(StepSection::kCompute);
    case StepPhase::kAllreduce:
      return static_cast<int>(StepSection::kCommunication);
    case StepPhase::kOptimizer:
      return static_cast<int>(StepSection::kOptimizer);
    default:
      return -1;
  }
}
}  // namespace

int64_t ProgressReporter::NanosSinceStart() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              start_)
      .count();
}

void ProgressReporter::MarkPhase(StepPhase phase) { Mark(phase, /*new_step=*/true); }

void ProgressReporter::Mark(StepPhase phase, bool new_step) {
  const uint64_t at = static_cast<uint64_t>(NanosSinceStart()) & kTimeMask;
  const uint64_t previous = phase_mark_.exchange((static_cast<uint64_t>(phase) << kPhaseShift) | at,
                                                 std::memory_order_relaxed);
  if (previous == 0) return;
  const int section = SectionOf(static_cast<StepPhase>(previous >> kPhaseShift));
  const uint64_t since = previous & kTimeMask;
  if (section >= 0 && at > since) {
    section_nanos_[section].fetch_add(static_cast<int64_t>(at - since), std::memory_order_relaxed);
  }
  if (new_step && phase == StepPhase::kOptimizer) {
    section_steps_.fetch_add(1, std::memory_order_relaxed);
  }
}

SectionTotals ProgressReporter::sections() const {
  SectionTotals t;
  t.steps = section_steps_.load(std::memory_order_relaxed);
  for (int i = 0; i < kNumStepSections; ++i) {
    t.seconds[i] = static_cast<double>(section_nanos_[i].load(std::memory_order_relaxed)) * 1e-9;
  }
  return t;
}

StepPhase ProgressReporter::phase() const {
  return static_cast<StepPhase>(phase_mark_.load(std::memory_order_relaxed) >> kPhaseShift);
}

void ProgressReporter::MarkCollectiveWait(bool waiting) {
  if (waiting) {
    const uint64_t mark = phase_mark_.load(std::memory_order_relaxed);
    interrupted_.store(static_cast<StepPhase>(mark >> kPhaseShift), std::memory_order_relaxed);
    Mark(StepPhase::kAllreduce, /*new_step=*/false);
  } else {
    // Back to the interrupted phase: not a new step's optimizer.
    Mark(interrupted_.load(std::memory_order_relaxed), /*new_step=*/false);
  }
}

void ProgressReporter::AddPhase(ProgressReport* report) const {
  report->sections = sections();
  const uint64_t mark = phase_mark_.load(std::memory_order_relaxed);
  if (mark == 0) return;
  const int64_t since = static_cast<int64_t>(mark & kTimeMask);
  report->step_phase = static_cast<StepPhase>(mark >> kPhaseShift);
  report->phase_seconds = std::max(0.0, static_cast<double>(NanosSinceStart() - since) * 1e-9);
}

void ProgressReporter::SendOnce(bool wait_on_it) {
  absl::MutexLock send_lock(&send_mu_);
  ProgressReport report;
  absl::Time sent;
  {
    absl::MutexLock lock(&mu_);
    // Once the coordinator is lost, nothing more is sent: a call could only wait.
    if (CheckLostLocked(absl::Now())) return;
    report = latest_;
    sent = absl::Now();
    in_flight_since_ = sent;
    if (!unanswered_since_) unanswered_since_ = sent;
  }
  AddPhase(&report);
  if (const std::atomic<bool>* flag = stop_signal_.load(); flag != nullptr && flag->load()) {
    report.stop_signaled = true;
  }
  absl::StatusOr<HeartbeatReply> reply =
      wait_on_it ? api_->HeartbeatNow(report) : api_->Heartbeat(report);
  if (reply.ok() && reply->command == Command::kExit) {
    std::fprintf(stderr, "%sexiting (code %d): %s\n", options_.log_prefix.c_str(), reply->exit_code,
                 reply->reason.c_str());
    std::fflush(stderr);  // not stdout: a stuck training thread may hold its lock
    _exit(reply->exit_code);
  }
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
  in_flight_since_.reset();
  if (reply.ok()) {
    unanswered_since_.reset();
    call_unreachable_ = false;
    if (reply->command == Command::kCheckpointAndStop) stop_requested_.store(true);
    if (reply->command == Command::kAbort) {
      // The latest reason wins: the coordinator may re-attribute a failure to its root cause.
      if (!abort_cause_) abort_since_ = now;
      abort_cause_ = reply->cause;
      if (abort_cause_->text.empty()) abort_cause_->text = "the coordinator aborted the job";
    }
  } else {
    if (now - sent > options_.heartbeat_deadline + options_.suspend_margin) {
      unanswered_since_ = now;  // the call outlived its deadline: this process was stopped
    }
    CheckLostLocked(now);
  }
}

void ProgressReporter::EnforceLostStopDeadline() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  if (!CheckLostLocked(now) || now - *lost_since_ <= options_.lost_stop_timeout) return;
  const absl::Duration unanswered =
      unanswered_since_ ? now - *unanswered_since_ : now - *lost_since_;
  std::fprintf(stderr,
               "%saborting: the coordinator was lost (unreachable for %s) and the stop did not "
               "complete within --stop-timeout %s\n",
               options_.log_prefix.c_str(), Seconds(unanswered).c_str(),
               Seconds(options_.lost_stop_timeout).c_str());
  std::fflush(stderr);
  _exit(kExitAborted);
}

void ProgressReporter::EnforceRejoinDeadline() {
  const int64_t announced = announced_generation();
  absl::MutexLock lock(&mu_);
  if (!newer_generation()) {
    newer_since_.reset();
    return;
  }
  const absl::Time now = absl::Now();
  if (!newer_since_) newer_since_ = now;
  if (phase() != StepPhase::kAllreduce || now - *newer_since_ <= options_.rejoin_grace) return;
  std::fprintf(stderr,
               "%sexiting: still waiting in a collective %s after membership generation %ld was "
               "announced (the lost peer was fenced); the launcher replaces this worker\n",
               options_.log_prefix.c_str(), Seconds(now - *newer_since_).c_str(),
               static_cast<long>(announced));
  std::fflush(stderr);
  _exit(kExitFailed);
}

void ProgressReporter::Loop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return shutdown_; };
      const absl::Time waited = absl::Now();
      mu_.AwaitWithTimeout(absl::Condition(&wake), options_.period);
      if (shutdown_) return;
      // Woken far too late: this process was stopped; that time is not the coordinator's.
      const absl::Time now = absl::Now();
      if (unanswered_since_ && !lost_since_ &&
          now - waited > options_.period + options_.suspend_margin) {
        unanswered_since_ = now;
      }
    }
    SendOnce();
    EnforceLostStopDeadline();
    EnforceRejoinDeadline();
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
