// What `srun ddp-trainer` (or plain `ddp-trainer`) does before any training: start the job's
// coordinator on task 0, spawn this task's workers with fork+exec, and supervise them until they
// end. Nothing here touches LibTorch, CUDA or gRPC: workers are forked before any such thread
// exists. (The LostReporter, called only after every worker has been forked, may use gRPC; so does
// the heartbeat relay behind heartbeat_socket, from its first node call on, after the forks.)
//
// Supervision rules (docs/operations.md, "Launcher supervision"):
//   - SIGTERM, SIGUSR1 and SIGINT to the task are forwarded to its workers.
//   - The first worker that fails (trainer/launcher/failure_policy.h) gets its peers stopped:
//     SIGTERM, then SIGKILL after timeouts.worker_stop_grace. With max_restarts > 0 (the job's
//     --max-restarts) it is reported to the coordinator first, and started again on the same
//     local rank (and so the same GPU) when the coordinator answers RESPAWN.
//   - Once every worker has ended, the coordinator (task 0) may linger (--linger) after a
//     successful job so operators can read the outcome; after a failed or stopped job it gets
//     coordinator_failed_wait. Then SIGTERM, coordinator_stop_grace, SIGKILL. A signal to the
//     task meanwhile cuts the wait short.
//   - A coordinator that dies while workers run is restarted from its journal
//     (trainer/launcher/coordinator_restarts.h); the workers re-attach to it by themselves.
//   - A spare node (--spare-nodes) starts nothing: it asks the coordinator once a second
//     (stand_by) until it is given a lost node, then starts that node's workers as that node.
//     It leaves (exit 0) when the job ends, on a stop signal, or after stand_by_unanswered
//     without an answer; a coordinator that refuses it (a bad layout) ends it with exit 2.
//   - Fencing (with `fences`): about once a second the task names its running workers to the
//     coordinator; a worker it names (declared lost by silence, yet still running: stopped,
//     hung) is SIGKILLed with its children at once, and its end is reported as any worker's.
//   - Standby (with `probe_coordinator`): see standby.h; a takeover's coordinator becomes this
//     task's to supervise, as task 0's is.
//   - No wait is unbounded: a child that outlives SIGKILL is reported and given up on.
//
// Thread safety: single-threaded (the launcher's main thread).
#ifndef SLURM_DDP_TRAINER_LAUNCHER_LAUNCHER_H_
#define SLURM_DDP_TRAINER_LAUNCHER_LAUNCHER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/coordinator_api.h"
#include "trainer/launcher/launch_plan.h"
#include "trainer/launcher/standby.h"

namespace ddp {

// A worker killed by a signal cannot tell the coordinator why it vanished; its peers only see a
// broken connection. A LostReporter tells the coordinator which worker died and how, and returns
// the coordinator's decision: the worker's global rank description for the launcher's log (""
// if unknown) and whether to respawn it (in-job recovery), stop the other workers, or wait.
// An unreachable coordinator reads {"", kStop}.
using LostReporter = std::function<LostDecision(const LostWorker&)>;
// A spare node's launcher asks the coordinator, about once a second, whether it takes over a
// lost node (Job::StandBy); an error means no answer this time.
using SpareStandBy = std::function<absl::StatusOr<SpareDecision>()>;

// Which of this task's running workers the coordinator declared lost while their process still
// runs (Job::Fences): the task kills them and reports them as lost workers. An error means no
// answer this time.
// `node_rank` is the task's node (a spare's, once it took a lost node over, is that node's).
using FenceQuery = std::function<absl::StatusOr<std::vector<FenceOrder>>(
    int node_rank, const std::vector<LiveWorker>&)>;

// A standby's probe (trainer/launcher/standby.h): reads the dist_file and pings the coordinator it
// names, bounded by about half a second; the ping only when `node_rank` is that coordinator's
// standby among `num_nodes` (every other task's probe is a file read: a job of 2,048 nodes is not
// pinged 4,096 times a second). `node_rank` is the task's node (a spare's, once it took a lost
// node over, is that node's).
using CoordinatorProbe = std::function<CoordinatorSighting(int node_rank, int num_nodes)>;

// Makes the heartbeat relay socket of one more worker (client/heartbeat_relay.h) and returns
// the worker's end, which the worker inherits across exec.
using HeartbeatSocket = std::function<absl::StatusOr<int>()>;

struct LauncherOptions {
  // What each worker runs (WorkerCommand); the worker's placement travels in its environment.
  std::vector<std::string> worker_command;
  // Workers start with SIGUSR1 blocked and unblock it once they handle it (ddp-trainer's own
  // worker does, in InstallStopSignals): a checkpoint-and-stop forwarded to a worker started a
  // moment before (a replacement) waits for its handler instead of killing it.
  bool block_stop_request_until_ready = false;
  // What task 0 runs as the coordinator (CoordinatorCommand); ignored unless
  // plan.start_coordinator.
  std::vector<std::string> coordinator_command;
  // What task 0 runs to restart a coordinator that died (the command plus
  // --resume-from-journal); empty: the coordinator is never restarted.
  std::vector<std::string> coordinator_resume_command;
  // --coordinator-restarts: how often (trainer/launcher/coordinator_restarts.h).
  int coordinator_restarts = 3;
  SupervisionTimeouts timeouts;
  LostReporter report_lost;  // optional; without it nothing is respawned
  // A report the coordinator did not answer (LostDecision::unanswered) is made again about every
  // second for this long before the task acts without an answer (zero: at once).
  absl::Duration lost_report_patience = absl::ZeroDuration();
  // Optional: this task relays its workers' heartbeats (--heartbeats node); each local rank gets
  // one socket, kept for its respawns. Without it every worker heartbeats by itself.
  HeartbeatSocket heartbeat_socket;
  // --max-restarts, the job-wide bound on restarts: this task respawns at most this many
  // workers (the coordinator decides each one). 0: fail fast.
  int max_restarts = 0;
  // --warm-workers: while restarts are left, this task keeps this many (0 or 1) warm workers
  // (trainer/launcher/warm_link.h) started ahead of need; a lost worker's slot goes to one, and
  // another is started. 0: a replacement is started when needed.
  int warm_workers = 0;
  // A spare node (plan.spare): how it asks, how often, and how long it goes on without an
  // answer before it leaves (exit 0: the job does without it).
  SpareStandBy stand_by;
  // Optional: fencing. About every fence_period while workers run (twice that after an error),
  // the task asks which of them to kill; each one named is SIGKILLed with its children.
  FenceQuery fences;
  absl::Duration fence_period = absl::Seconds(1);
  absl::Duration stand_by_period = absl::Seconds(1);
  absl::Duration stand_by_unanswered = absl::Seconds(120);
  // Optional: the standby coordinator (trainer/launcher/standby.h; --standby). A node task other
  // than the coordinator's probes about every standby_period; when it is the standby and the
  // coordinator has been silent for failover_timeout it starts takeover_command (the coordinator
  // command with --resume-from-journal) with --epoch E+1 --claim-epoch --node-rank --lost-node
  // --last-answer-unix, supervises it as task 0 supervises its own (restarts from the journal
  // with --epoch, linger), and writes its log to <coordinator log>.epoch<E+1>.
  CoordinatorProbe probe_coordinator;
  std::vector<std::string> takeover_command;
  absl::Duration failover_timeout = absl::Seconds(3);
  // Optional: the epoch in the dist_file when it is newer than `mine` (this task's coordinator's
  // epoch). A coordinator that exits while a newer epoch serves was fenced: never restarted.
  std::function<std::optional<int64_t>(int64_t mine)> newer_epoch;
  absl::Duration standby_period = absl::Milliseconds(500);
  // The period while the standby awaits the coordinator's first answer (StandbyWatch::
  // AwaitingFirstAnswer).
  absl::Duration standby_first_answer_period = absl::Milliseconds(100);
  // The longest probe_coordinator takes while this task runs (its calls' deadlines). A
  // probe, or the loop's wait, that returns failover_timeout / 2 later than it could have means
  // this task was not running (the job suspended or stopped, the host paused): the standby's
  // silence clock restarts (standby.h).
  absl::Duration standby_probe_bound = absl::Seconds(1);
};

// Runs the plan; returns the task's exit code (common/exit_codes.h).
int RunLauncher(const LaunchPlan& plan, const LauncherOptions& options);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_LAUNCHER_LAUNCHER_H_
