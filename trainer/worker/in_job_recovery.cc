#include "trainer/worker/in_job_recovery.h"

#include <cstdio>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace ddp {
namespace {

using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

// "Rejoin: <the coordinator's reason>" -> the reason.
std::string WithoutMethod(absl::string_view message) {
  absl::ConsumePrefix(&message, "Rejoin: ");
  return std::string(message);
}

}  // namespace

InJobRecovery::InJobRecovery(CommunicationStage& comm, CoordinatorSession& session,
                             TrainingPosition& position, Options options)
    : comm_(comm), session_(session), position_(position), options_(std::move(options)) {
  session_.reporter().OnNewerGeneration([this] { comm_.Interrupt(); });
  // An announcement that came after the rejoin was answered but before the build began.
  comm_.SetSupersededCheck([this] { return session_.reporter().newer_generation(); });
}

InJobRecovery::~InJobRecovery() {
  comm_.SetSupersededCheck(nullptr);
  session_.reporter().OnNewerGeneration(nullptr);
}

bool InJobRecovery::Recoverable(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

absl::Status InJobRecovery::Connect() {
  const RankAssignment& a = session_.rank();
  if (a.membership_generation > 0) {
    // A replacement joining a job that recovers: it saw no failure of its own.
    Pending p;
    p.index = 1;
    p.cause = a.recovery_cause;
    p.restarts = a.restarts;
    p.coordinator_seconds = a.recovery_seconds;
    p.since = SteadyClock::now();
    p.replacement = true;
    pending_ = p;
  }
  absl::Status st = ConnectOnce();
  if (st.ok() || !Recoverable(st)) return st;
  return Recover(st);
}

absl::Status InJobRecovery::ConnectOnce() {
  const RankAssignment& a = session_.rank();
  absl::StatusOr<int> root = comm_.Connect(a.store_prefix, a.rank, a.world_size);
  if (!root.ok()) return root.status();
  if (pending_) {
    pending_->root = *root;
    pending_->root_step = position_.step;
    pending_->connect = comm_.last_connect();
  }
  return absl::OkStatus();
}

absl::Status InJobRecovery::Recover(const absl::Status& why) {
  const SteadyClock::time_point since = SteadyClock::now();
  const absl::Time deadline = absl::Now() + options_.rejoin_timeout;
  ProgressReporter& reporter = session_.reporter();
  absl::Status reason = why;
  for (;;) {
    reporter.MarkPhase(StepPhase::kRecovery);  // a waiting phase: never judged stalled
    // Abort the failed group first: its connections close (a Gloo group's in the background, as
    // soon as its collectives end), so peers still blocked on this rank fail now too.
    comm_.MarkFailed();
    comm_.Disconnect().IgnoreError();
    if (options_.hold != nullptr) {
      options_.hold->At(TestHold::Point::kRejoin, session_.rank().rank, position_.step);
    }
    absl::StatusOr<RankAssignment> next =
        session_.Rejoin(position_.step, std::string(reason.message()), options_.rejoin_timeout);
    if (!next.ok()) {
      if (absl::IsAborted(next.status())) {
        reporter.AcknowledgeAbort();  // acted on here: the job failed
        return absl::AbortedError(WithoutMethod(next.status().message()));
      }
      return absl::Status(next.status().code(),
                          absl::StrCat("rejoining after \"", reason.message(),
                                       "\" failed: ", next.status().message()));
    }
    Pending p;
    p.index = ++recoveries_;
    p.cause = next->recovery_cause;
    p.restarts = next->restarts;
    p.coordinator_seconds = next->recovery_seconds;
    p.since = since;
    p.rejoin_seconds = SecondsSince(since);
    pending_ = p;
    if (options_.hold != nullptr) {
      options_.hold->At(TestHold::Point::kConnect, session_.rank().rank, position_.step);
    }
    absl::Status st = ConnectOnce();
    if (st.ok()) reporter.SendNow();
    if (st.ok() || !Recoverable(st) || absl::Now() >= deadline) return st;
    reason = st;
  }
}

void InJobRecovery::OnStepCommitted(std::optional<double> data_seconds) {
  if (options_.on_first_step) std::exchange(options_.on_first_step, nullptr)();
  if (!pending_) return;
  const Pending p = *std::move(pending_);
  pending_.reset();
  if (session_.rank().rank != 0) return;
  std::string step;
  if (data_seconds) {
    const StepTimings t = comm_.ddp().timings();
    step = absl::StrFormat(
        " (first step: data %.3f s, forward %.3f s, backward %.3f s, allreduce wait %.3f s, "
        "optimizer %.3f s)",
        *data_seconds, t.forward_ms / 1e3, t.backward_ms / 1e3, t.comm_wait_ms / 1e3,
        t.optimizer_ms / 1e3);
  }
  const double local = SecondsSince(p.since);
  const double unix_now = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  std::printf(
      "%srecovery %d: %s; restarts %d of %d; membership generation %ld formed %.2f s after the "
      "loss; state from rank %d at step %ld; training resumed at step %ld, %.2f s after this %s "
      "(%s process group built in %.2f s, state synced in %.2f s, DDP engine built in %.2f s)%s "
      "(unix time %.3f)\n",
      session_.log_prefix().c_str(), p.index,
      p.cause.text.empty() ? "a collective failed" : p.cause.text.c_str(), p.restarts,
      options_.max_restarts, static_cast<long>(session_.rank().membership_generation),
      p.coordinator_seconds, p.root, static_cast<long>(p.root_step),
      static_cast<long>(position_.step), local,
      p.replacement ? "replacement registered" : "rank saw the failure",
      p.rejoin_seconds < 0
          ? ""
          : absl::StrFormat("rejoin answered after %.2f s,", p.rejoin_seconds).c_str(),
      p.connect.group, p.connect.sync, p.connect.engine, step.c_str(), unix_now);
  std::fflush(stdout);
}

}  // namespace ddp
