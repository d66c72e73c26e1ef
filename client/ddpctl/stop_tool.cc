// `ddpctl stop [--now] [--reason TEXT] [--wait SECONDS]`: graceful by default (every rank gets
// CHECKPOINT_AND_STOP on its next heartbeat, checkpoints and exits 3); --now aborts (ABORT to
// every rank). Then waits for the job to acknowledge: graceful, until every rank stopped; --now,
// until every rank is gone or has heard the ABORT (a heartbeat after the request).
#include <iostream>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/ddpctl/status_view.h"
#include "client/ddpctl/tool.h"

namespace ddp {
namespace {

struct StopFlags {
  bool now = false;
  std::string reason;
  double wait_s = 60;
};

// Ranks that have acted on the request: finished, or (for --now) heard from since it was sent.
int Acknowledged(const JobStatus& s, bool now, double since_request_s) {
  int n = 0;
  for (const RankStatus& r : s.ranks) {
    if (IsFinal(r.state) || (now && r.last_seen_seconds < since_request_s)) ++n;
  }
  return n;
}

ToolRun Setup(CLI::App* sub) {
  auto flags = std::make_shared<StopFlags>();
  sub->add_flag("--now", flags->now, "Abort at once (ABORT to every rank) instead of a checkpoint");
  sub->add_option("--reason", flags->reason, "Why (recorded in the job's events)");
  sub->add_option("--wait", flags->wait_s,
                  "Seconds to wait for the job to acknowledge (0: do not wait)")
      ->check(CLI::Range(0.0, 86400.0));
  sub->footer(absl::StrCat(
      "Exit codes: ", kExitOk,
      " the job acknowledged (graceful: every rank checkpointed and stopped; --now: every rank "
      "received ABORT or is gone), ",
      kExitFailed,
      " error (no job, unreachable, job already finished, or it failed while stopping), ",
      kExitUsage, " usage, ", kExitTimedOut, " timed out waiting (the request stands)."));
  return [flags](const GlobalOptions& global) {
    auto client = ConnectOperator(global, TokenRole::kControl);
    if (!client.ok()) return Fail(std::string(client.status().message()));
    const bool graceful = !flags->now;
    const std::string reason = flags->reason.empty() ? std::string("ddpctl stop")
                                                     : absl::StrCat("ddpctl: ", flags->reason);
    const absl::Time sent = absl::Now();
    auto state = (*client)->Stop(graceful, reason);
    if (!state.ok()) return Fail(std::string(state.status().message()));
    const std::string job = (*client)->job_id();
    const int world = (*client)->world_size();
    std::cout << (graceful ? absl::StrFormat("stop requested: job %s is %s; its %d rank(s) get "
                                             "CHECKPOINT_AND_STOP on their next heartbeat\n",
                                             job, JobStateName(*state), world)
                           : absl::StrFormat("abort requested: job %s is %s; its %d rank(s) get "
                                             "ABORT on their next heartbeat\n",
                                             job, JobStateName(*state), world))
              << std::flush;
    if (flags->wait_s <= 0) return kExitOk;
    const absl::Time deadline = sent + absl::Seconds(flags->wait_s);
    JobStatus last;
    bool done = false;
    int reported = -1;
    // Polls (the watch stream ends as soon as the job is terminal, which --now makes it at once).
    while (true) {
      auto s = (*client)->GetStatus();
      if (!s.ok()) return Fail(std::string(s.status().message()));
      last = *std::move(s);
      DecideStatus(&last);  // GetStatus's protobuf carries no decided fields
      const double since = absl::ToDoubleSeconds(absl::Now() - sent);
      const int acked = Acknowledged(last, !graceful, since);
      const int total = static_cast<int>(last.ranks.size());
      if (acked != reported) {
        std::cout << absl::StrFormat("  %d/%d rank(s) %s\n", acked, total,
                                     graceful ? "stopped" : "aborted or gone")
                  << std::flush;
        reported = acked;
      }
      if (graceful ? last.finished : acked >= total) {
        done = true;
        break;
      }
      if (absl::Now() >= deadline) break;
      absl::SleepFor(absl::Milliseconds(250));
    }
    if (!done) {
      const int acked = Acknowledged(last, !graceful, absl::ToDoubleSeconds(absl::Now() - sent));
      std::cerr << absl::StrFormat(
          "ddpctl: timed out after %s waiting for job %s to %s: %d of %d rank(s) acknowledged "
          "(state %s); the request stands\n",
          FormatDuration(flags->wait_s), job, graceful ? "stop" : "abort", acked,
          static_cast<int>(last.ranks.size()), JobStateName(last.state));
      return kExitTimedOut;
    }
    if (graceful) {
      if (last.exit_code != kExitResumable) {
        return Fail(absl::StrCat("job ", job, " ended ", JobStateName(last.state),
                                 " while stopping: ", last.failure.text));
      }
      std::cout << "job " << job << " stopped: every rank checkpointed and stopped";
      if (last.checkpoint_epoch >= 0) {
        std::cout << absl::StrFormat(" (checkpoint epoch %d step %d)", last.checkpoint_epoch,
                                     last.checkpoint_step);
      }
      std::cout << "; it exits " << kExitResumable << " (resumable)\n";
    } else {
      std::cout << "job " << job << " aborted: every rank received ABORT or is gone\n";
    }
    return kExitOk;
  };
}

const ToolRegistrar registrar({"stop",
                               "Stop the job: checkpoint and stop (default) or abort (--now)",
                               &Setup});

}  // namespace
}  // namespace ddp
