// What a launcher does when one of its workers ends, and the exit code its task reports. The
// rules (docs/operations.md, "Launcher supervision"):
//   exit 0                     nothing; the worker is done
//   exit kExitResumable        nothing; the task ends resumable unless something failed
//   any other end, first one   stop the other workers (or respawn the worker, while respawns
//                              are left, no stop was asked for and the end is not kExitAborted
//                              or kExitUsage); a death by signal that nobody asked for is
//                              reported to the coordinator as a lost rank, and so is every end
//                              that would be respawned: the coordinator has the last word
//                              (OnRespawnDeclined)
//   any other end, later       nothing more (the others are being stopped already)
// The task's exit code: kExitOk, else kExitResumable, else the first failure's code when it is
// kExitAborted or kExitUsage, else kExitFailed.
//
// Thread safety: a plain value, used by the launcher's one thread.
#ifndef SLURM_DDP_TRAINER_LAUNCHER_FAILURE_POLICY_H_
#define SLURM_DDP_TRAINER_LAUNCHER_FAILURE_POLICY_H_

#include <csignal>

#include "trainer/launcher/child_process.h"

namespace ddp {

class FailurePolicy {
 public:
  enum class Action { kNone, kStopOthers, kRespawn };
  struct Decision {
    Action action = Action::kNone;
    bool failure = false;      // the end counts as a failure
    bool first = false;        // ... and it is the first one
    bool report_lost = false;  // tell the coordinator which rank died and how
    // In-job recovery: the coordinator's answer to the report decides; unless the worker is
    // respawned, call OnRespawnDeclined.
    bool ask = false;
  };

  // `max_restarts`: how many times this task may start a failed worker again (the in-job
  // recovery of a later wave); 0 fails fast, as every release so far has.
  explicit FailurePolicy(int max_restarts = 0)
      : recovery_(max_restarts > 0), restarts_left_(max_restarts) {}

  // `signal` was forwarded to the workers. After SIGTERM or SIGINT every end was asked for, and
  // is neither respawned nor reported as lost. SIGUSR1 asks for a checkpoint and a stop, which no
  // worker dies of: a worker killed by a signal after it (a preemption and a fault at once) is a
  // loss like any other, so the job recovers it and then stops at its next agreement; a worker
  // that exits with a code after it ended by itself, as after SIGTERM.
  void OnSignalForwarded(int signal) {
    if (signal == SIGUSR1) {
      checkpoint_asked_ = true;
    } else {
      forwarded_ = true;
    }
  }
  // `respawned`: this end is of a worker started again (a replacement); with recovery on, its
  // failed start (even bad flags or data, exit kExitUsage) is the coordinator's to judge.
  Decision OnWorkerExit(const ExitStatus& status, bool respawned = false);
  // The launcher could not start a worker (or had to give up on one): the task fails.
  void OnLaunchFailure();
  // A Decision with `ask` was not carried out as a respawn (the coordinator answered STOP or
  // WAIT, or was unreachable): the end counts as a failure after all; `stop_others` stops this
  // task's other workers. `job_failed`: the coordinator failed the job (STOP); after a death by
  // signal the task reports kExitAborted as its workers do, after a worker's own error exit
  // that worker's code (its failure is the job's).
  void OnRespawnDeclined(const ExitStatus& status, bool stop_others, bool job_failed = false);

  // The coordinator handed this task's node to a spare (LostAction::kLeave, --straggler-action
  // replace): its workers are being ended on purpose, none of their ends is a failure from now
  // on, and the task exits kExitOk unless something failed before.
  void OnLeave() {
    leaving_ = true;
    stopping_ = true;
  }
  bool leaving() const { return leaving_; }
  // Whether a failed worker may still be started again (recovery on, restarts left).
  bool may_respawn() const { return recovery_ && restarts_left_ > 0 && !stopping_; }
  int task_exit_code() const { return result_; }
  bool stopping() const { return stopping_; }

 private:
  void RecordFailure(int code);

  const bool recovery_;
  int restarts_left_;
  bool forwarded_ = false;         // SIGTERM or SIGINT was forwarded
  bool checkpoint_asked_ = false;  // SIGUSR1 was forwarded
  bool stopping_ = false;          // a failure is stopping the other workers
  bool leaving_ = false;           // OnLeave: the node went to a spare
  int result_ = 0;
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_LAUNCHER_FAILURE_POLICY_H_
