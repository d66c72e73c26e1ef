#include "trainer/app/worker_exit.h"

#include <cstdio>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/exit_codes.h"
#include "common/job_result.h"

namespace ddp {
namespace {

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

int Fail(const std::string& prefix, int code, const std::string& message) {
  std::fprintf(stderr, "%serror: %s\n", prefix.c_str(), FirstLine(message).c_str());
  return code;
}

namespace {

// A collective failed: usually a peer died. The coordinator learns which one from that peer's
// launcher at once, or within its heartbeat timeout; wait that long for it to name the rank. If
// the cause names this rank (our own report got there first), give the coordinator a moment to
// re-attribute it to a dead peer (Job::kRootCauseWindow). Returns the coordinator's reason.
std::optional<std::string> AwaitRootCause(const TrainerConfig& c, CoordinatorSession& session) {
  ProgressReporter& reporter = session.reporter();
  const absl::Time deadline = absl::Now() + absl::Seconds(c.heartbeat_timeout_s + 3);
  absl::Time settle = absl::InfiniteFuture();
  for (;;) {
    const absl::Time now = absl::Now();
    auto why = reporter.abort_cause();
    if (now >= deadline || (why && why->rank != session.rank().rank) || now >= settle) break;
    if (why && settle == absl::InfiniteFuture()) settle = now + absl::Seconds(2);
    absl::SleepFor(absl::Milliseconds(300));
    if (why) reporter.Flush();
  }
  return reporter.abort_reason();
}

// A checkpoint that met a full disk or quota: the message says which older checkpoint a relaunch
// resumes from, so the job ends resumable (requeue me).
int ExitResumable(CoordinatorSession& session, const absl::Status& st) {
  session.ReportOutcome(absl::CancelledError(st.message()));
  return Fail(session.log_prefix(), kExitResumable, std::string(st.message()));
}

// Every rank agreed that the coordinator is lost and rank 0 wrote the stop checkpoint: exit
// resumable without telling the coordinator (it cannot answer). Without a --checkpoint-dir the
// steps are lost: exit aborted, saying why.
int ExitCoordinatorLost(const TrainerConfig& c, CoordinatorSession& session) {
  const std::string lost_for = session.reporter().unanswered_text();
  if (c.checkpoint_dir.empty()) {
    return Fail(session.log_prefix(), kExitAborted,
                absl::StrCat("the coordinator was lost (unreachable for ", lost_for,
                             ") and there is no --checkpoint-dir to save to"));
  }
  return kExitResumable;
}

// The job SUCCEEDED or STOPPED while this worker's training failed: every rank of the job
// reported its end before the coordinator wrote that result, and this worker had not, so it was
// no longer one of them (replaced while it could not run). Its exit code is then the job's, and
// nothing is reported (that coordinator is gone); nullopt while the job has not ended so.
std::optional<int> EndedWithoutThisWorker(const WorkerPlacement& p, CoordinatorSession& session,
                                          const TrainOutcome& outcome) {
  const std::optional<JobResult> r = ReadJobResultOf(p.dist_file, p.job_id, p.generation);
  if (!r || (r->state != "SUCCEEDED" && r->state != "STOPPED") || r->exit_code < 0) {
    return std::nullopt;
  }
  const std::string path = JobResultPath(p.dist_file);
  session.reporter().AcknowledgeAbort();  // acted on here
  std::printf(
      "%sthe job %s without this worker (%s): it was replaced while it could not run "
      "(its node stopped or cut off); leaving with the job's exit code %d (this worker: "
      "%s)\n",
      session.log_prefix().c_str(), r->state.c_str(), path.c_str(), r->exit_code,
      FirstLine(std::string(outcome.result.status().message())).c_str());
  return r->exit_code;
}

}  // namespace

int Finish(const TrainerConfig& c, const WorkerPlacement& placement, CoordinatorSession& session,
           CheckpointStore& checkpoints, const TrainOutcome& outcome) {
  const std::string& prefix = session.log_prefix();
  if (!outcome.result.ok() && ResumableAfter(outcome.result.status())) {
    return ExitResumable(session, outcome.result.status());
  }
  if (!outcome.result.ok() && !outcome.in_setup) {
    if (const std::optional<int> code = EndedWithoutThisWorker(placement, session, outcome)) {
      return *code;
    }
  }
  if (!outcome.result.ok()) {
    const absl::Status& st = outcome.result.status();
    session.ReportOutcome(st);
    if (outcome.in_setup) {
      // A checkpoint or folder refused as untrusted (another user's, writable by others) is a
      // usage error, as a bad flag is.
      return Fail(prefix, absl::IsPermissionDenied(st) ? kExitUsage : kExitFailed,
                  std::string(st.message()));
    }
    std::string reason(st.message());
    int code = st.code() == absl::StatusCode::kAborted ? kExitAborted : kExitFailed;
    session.reporter().AcknowledgeAbort();  // this thread acts on it now: no forced exit
    if (code != kExitAborted) {
      // Aborted only for another rank's failure: when the coordinator's cause names this rank
      // (a checkpoint that cannot be written, bad data), it stays this rank's own failure.
      const std::optional<std::string> why = AwaitRootCause(c, session);
      const std::optional<FailureCause> cause = session.reporter().abort_cause();
      if (why && !(cause && cause->rank == session.rank().rank)) {
        reason = absl::StrCat(*why, " (", reason, ")");
        code = kExitAborted;
      }
    } else if (auto cause = session.reporter().abort_cause();
               cause && cause->rank == session.rank().rank) {
      // A rejoin refused with this rank's own collective error: the death that caused it is
      // about to be named (the failure is revisable for a moment).
      if (auto why = AwaitRootCause(c, session)) reason = *why;
    }
    return Fail(prefix, code, reason);
  }
  const LoopResult& result = *outcome.result;
  if (result.outcome == LoopOutcome::kCoordinatorLost) return ExitCoordinatorLost(c, session);
  if (result.outcome == LoopOutcome::kStopped) {
    session.ReportOutcome(
        absl::CancelledError(absl::StrCat("stopped after checkpoint ", result.checkpoint)));
    return kExitResumable;
  }
  if (session.rank().rank == 0) {
    auto final_checkpoint = checkpoints.Finish();
    if (!final_checkpoint.ok()) {
      if (ResumableAfter(final_checkpoint.status())) {
        return ExitResumable(session, final_checkpoint.status());
      }
      session.ReportOutcome(final_checkpoint.status());
      return Fail(prefix, kExitFailed, std::string(final_checkpoint.status().message()));
    }
    if (!final_checkpoint->path.empty()) {
      std::printf("%sfinal weights: %s%s\n", prefix.c_str(), final_checkpoint->path.c_str(),
                  final_checkpoint->already_present ? " (already there)" : "");
    }
  }
  session.ReportOutcome(absl::OkStatus());
  return kExitOk;
}

}  // namespace ddp
