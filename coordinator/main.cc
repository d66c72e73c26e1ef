// ddp-coordinator: the per-job control plane. Parses flags; CoordinatorProcess does the rest
// (coordinator/coordinator_process.h): listens on an ephemeral port, publishes the dist_file,
// serves registration / store / heartbeats / status until the job ends, lingers a little so
// status can still be read, then exits kExitOk (SUCCEEDED), kExitResumable (stopped for requeue)
// or kExitFailed; kExitUsage for bad flags (common/exit_codes.h). The outcome is also written to
// <dist_file>.result (CoordinatorProcess::WriteResult) for scripts, which never read it from the
// log.
#include <unistd.h>

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/exit_codes.h"
#include "common/fd_limit.h"
#include "common/heap_reserve.h"
#include "common/job_result.h"
#include "common/mutex_mode.h"
#include "common/slurm_env.h"
#include "coordinator/coordinator_process.h"
#include "coordinator/line_logger.h"

namespace {
// The coordinator's peak heap per worker at 16,384 ranks was ~55 KB (docs/bench-status.md).
constexpr size_t kHeapKiBPerWorker = 64;

}  // namespace

int main(int argc, char** argv) {
  ddp::UseReleaseMutexMode();
  // A log reader that went away (`... 2>&1 | head`) must not end the job: writes fail instead.
  std::signal(SIGPIPE, SIG_IGN);
  ddp::CoordinatorOptions options;
  double registration_timeout_s = 300;
  double heartbeat_timeout_s = 10;
  double linger_s = 10;
  double stall_timeout_s = 0;
  double stop_timeout_s = 60;
  int64_t heap_reserve_mb = -1;
  CLI::App app{"ddp-coordinator: the per-job control plane of slurm-ddp"};
  app.add_option("--world-size", options.world_size, "Number of workers in the job")
      ->required()
      ->check(CLI::Range(1, ddp::kMaxWorldSize));
  app.add_option("--dist-file", options.dist_file,
                 "Where to publish the dist_file "
                 "(default: dist_file.<job id> in the current folder)");
  app.add_option("--listen", options.listen,
                 "host:port to listen on (default: this node's routable address, port 0 = any)");
  app.add_option("--job-id", options.job_id, "Job id (default: SLURM_JOB_ID, else local-<pid>)");
  app.add_option("--generation", options.generation,
                 "Generation (default: SLURM_RESTART_COUNT, else 0)");
  app.add_option("--registration-timeout", registration_timeout_s,
                 "Seconds to wait for every worker to register")
      ->check(CLI::PositiveNumber);
  app.add_option("--heartbeat-timeout", heartbeat_timeout_s,
                 "Seconds of heartbeat silence after which a rank is lost")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-restarts", options.max_restarts,
                 "Workers the job may replace in place (in-job recovery, job-wide); 0 = a lost "
                 "worker fails the job. A replacement must register within "
                 "--registration-timeout")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--min-nodes", options.min_nodes,
                 "Shrinking: a node lost as a whole (every rank silent, its task too) with no "
                 "spare standing by is dropped and the job goes on on the others while at least "
                 "this many nodes remain; 0 = never (the recovery deadline fails the job)")
      ->check(CLI::Range(0, 65536));
  app.add_option("--stall-timeout", stall_timeout_s,
                 "Seconds a rank may sit in a working phase (data, forward, backward, optimizer) "
                 "while a peer waits in a collective before it is STALLED: with a restart left "
                 "(--max-restarts) it is told to exit and replaced, else the job fails naming it; "
                 "checkpoint, eval and the first step get 10x. 0 (default): "
                 "max(60 s, 20x the job's median step time)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--stop-timeout", stop_timeout_s,
                 "Seconds a graceful stop may take; then the ranks still running are told to "
                 "exit and the job ends naming them: STOPPED (exit 3) with a committed "
                 "checkpoint, else FAILED (exit 1)")
      ->check(CLI::PositiveNumber);
  double straggler_window_s = absl::ToDoubleSeconds(options.straggler.window);
  std::string straggler_action = "warn";
  app.add_option("--straggler-threshold", options.straggler.threshold,
                 "A rank whose relative score (the best rank's busy time per step, the step less "
                 "its exposed communication, over its own) stays under this for "
                 "--straggler-window is a straggler: named with its slow section in the status, "
                 "/metrics and an event")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--straggler-window", straggler_window_s,
                 "Seconds a rank's relative score must stay under --straggler-threshold before it "
                 "is a straggler (one slow step, a checkpoint or an evaluation never is)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option(
         "--straggler-action", straggler_action,
         "What naming a straggler does besides reporting it: warn (nothing more), replace (hand "
         "its node to a spare node standing by, inside the job: --spare-nodes), exclude "
         "(write its node to <dist_file>.exclude, which the sbatch kit's requeue passes "
         "to Slurm as --exclude)")
      ->capture_default_str()
      ->check(CLI::IsMember({"warn", "replace", "exclude"}));
  app.add_option("--http-port", options.http_port,
                 "HTTP port for the dashboard, /api/status and /metrics (0 = ephemeral, "
                 "-1 = no HTTP); the bound port is published in the dist_file")
      ->check(CLI::Range(-1, 65535));
  app.add_option("--linger", linger_s,
                 absl::StrCat("Seconds to keep serving status after a successful job (after one "
                              "that failed or stopped: at least ",
                              absl::ToInt64Seconds(ddp::CoordinatorProcess::kOutcomeLinger),
                              " s, so that every rank hears the outcome)"))
      ->check(CLI::NonNegativeNumber);
  app.add_option("--log-file", options.log_file, "Also append log lines to this file");
  app.add_flag("--resume-from-journal", options.resume_from_journal,
               "Take over the job of the dist_file from its journal (<dist_file>.journal), as a "
               "restarted coordinator: restore registrations, rank table, checkpoints, shard "
               "agreement and stop request, listen on a new port and republish the dist_file "
               "with the same job, tokens, generation and nonce and the next incarnation. A "
               "corrupt journal, or one of another job, is refused (exit 1)");
  double last_answer_unix = 0;
  std::string standby = "off";
  app.add_option("--standby", standby,
                 "Whether a standby coordinator watches this one from the next node (auto: "
                 "ddp-trainer --standby auto runs one in a job of two or more nodes, and passes "
                 "it; off: none). Only what the status shows depends on it")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "off"}));
  app.add_option("--epoch", options.epoch,
                 "Standby takeover (with --resume-from-journal): serve as this coordinator epoch, "
                 "without the dist_file's lock; a coordinator that finds a newer epoch in the "
                 "dist_file stops serving and exits. ddp-trainer's standby passes it")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_flag("--claim-epoch", options.claim_epoch,
               "With --epoch: this start takes the job over: claim the epoch (refused, exit 2, "
               "when another coordinator claimed it), take the journal over and treat "
               "--lost-node's ranks as lost");
  app.add_option("--node-rank", options.node_rank,
                 "The node whose task runs this coordinator (published with --epoch)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--lost-node", options.lost_node,
                 "With --claim-epoch: the node whose coordinator was lost")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--last-answer-unix", last_answer_unix,
                 "With --claim-epoch: when the lost coordinator last answered (unix seconds), "
                 "for the takeover's event")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--dist-file-lock-fd", options.dist_file_lock_fd,
                 "An inherited descriptor holding <dist_file>.lock (ddp-trainer's task 0 passes "
                 "it); without it the coordinator takes the lock itself. Either way a dist_file "
                 "held by another live job is refused (exit 2)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_flag("--grpc-reflection", options.grpc_reflection,
               "Serve gRPC server reflection, for debugging only: it answers without a token, "
               "outside the limits on calls in flight, and each open stream holds one of a few "
               "threads (off by default)");
  // Hidden (no group): a benchmark's plaintext comparison, never a job's setting.
  app.add_flag("--bench-plaintext", options.bench_plaintext,
               "Benchmarks only: no TLS; no client of slurm-ddp connects to it")
      ->group("");
  // Budgets by role (coordinator/rpc/call_gate.h).
  size_t max_worker_calls = 0;
  double first_message_timeout_s =
      absl::ToDoubleSeconds(options.call_budgets.first_message_timeout);
  app.add_option("--max-worker-calls", max_worker_calls,
                 "Calls of the job's own (worker token: register, heartbeats, store, shards, ...) "
                 "in flight at once, parked ones included; view and control calls never count "
                 "against it. 0 (default): 16 per worker + 1024")
      ->check(CLI::Range(size_t{0}, size_t{1} << 30));
  app.add_option("--max-operator-calls", options.call_budgets.operator_calls,
                 "View- and control-token calls (status, watch, stop) in flight at once, from "
                 "every address together; more are refused with RESOURCE_EXHAUSTED")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 30));
  app.add_option("--max-operator-calls-per-address",
                 options.call_budgets.operator_calls_per_address,
                 "View- and control-token calls in flight at once from one client address (its "
                 "IP, whatever the port)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 30));
  app.add_option("--first-message-timeout", first_message_timeout_s,
                 "Seconds a view- or control-token call may take to send its request after its "
                 "headers; then it is cancelled and its slot freed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--heap-reserve-mb", heap_reserve_mb,
                 absl::StrCat("MiB of heap to make resident at start, so that the rendezvous "
                              "(every worker's Register call held at once) reuses pages instead "
                              "of faulting in new ones; -1 (default): ",
                              kHeapKiBPerWorker, " KiB per worker; 0: none"))
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 20));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::string what = e.what();
    for (char& c : what) {
      if (c == '\n') c = ' ';
    }
    std::cerr << "ddp-coordinator: " << what << " (see --help)\n";
    return ddp::kExitUsage;
  }
  // Before any thread starts (common/heap_reserve.h).
  options.heap_reserved_bytes =
      heap_reserve_mb >= 0 ? static_cast<size_t>(heap_reserve_mb) << 20
                           : static_cast<size_t>(options.world_size) * kHeapKiBPerWorker << 10;
  options.heap_reserve_seconds = ddp::ReserveHeap(options.heap_reserved_bytes);
  if (options.claim_epoch && options.epoch == 0) {
    std::cerr << "ddp-coordinator: --claim-epoch needs --epoch (see --help)\n";
    return ddp::kExitUsage;
  }
  if (last_answer_unix > 0)
    options.last_answer = absl::FromUnixSeconds(0) + absl::Seconds(last_answer_unix);
  options.registration_timeout = absl::Seconds(registration_timeout_s);
  options.heartbeat_timeout = absl::Seconds(heartbeat_timeout_s);
  options.linger = absl::Seconds(linger_s);
  options.stall_timeout = absl::Seconds(stall_timeout_s);
  options.stop_timeout = absl::Seconds(stop_timeout_s);
  options.straggler.window = absl::Seconds(straggler_window_s);
  options.standby = standby == "auto";
  options.straggler.action = straggler_action == "replace"   ? ddp::StragglerAction::kReplace
                             : straggler_action == "exclude" ? ddp::StragglerAction::kExclude
                                                             : ddp::StragglerAction::kWarn;
  options.call_budgets.worker_calls = max_worker_calls;
  options.call_budgets.first_message_timeout = absl::Seconds(first_message_timeout_s);
  // One descriptor per connection: a job larger than the soft limit Slurm passed on (often
  // 1024) needs the hard one (common/fd_limit.h).
  if (auto fds = ddp::RaiseFdLimitToHard(); fds.ok()) {
    options.fd_limit = *fds;
  } else {
    std::cerr << "ddp-coordinator: warning: " << fds.status().message() << "\n";
  }
  auto process = ddp::CoordinatorProcess::Start(options, ddp::ProcessEnvironment());
  if (!process.ok()) {
    std::cerr << "ddp-coordinator: " << process.status().message() << "\n";
    return absl::IsInvalidArgument(process.status()) || absl::IsAlreadyExists(process.status())
               ? ddp::kExitUsage
               : ddp::kExitFailed;
  }
  // A result left by an earlier job or generation at this path says nothing about this one.
  ::unlink(ddp::JobResultPath((*process)->dist_file()).c_str());
  return (*process)->RunUntilDone();
}
