// The standby coordinator (docs/architecture.md, "Standby coordinator"): in a job of two or
// more nodes, the task of the node after the coordinator's (node 1 while task 0's coordinator
// serves; (c + 1) mod nodes after a takeover to node c) watches the coordinator, and takes the
// job over when the coordinator has not answered for the failover timeout: it starts a
// coordinator of the next epoch (ddp-coordinator --resume-from-journal --epoch E+1
// --claim-epoch), which reads the journal from the shared folder of the dist_file, treats the
// lost node's ranks as lost and republishes the dist_file. This file is the decision alone:
// the launcher probes (reads the dist_file, pings the coordinator) and acts.
//
// Rules:
//   - Only the standby node watches, and only once the coordinator has answered it once (a job
//     still starting has nothing to take over), or from the first sighting of a takeover's
//     coordinator (epoch > 0: the job runs, and that coordinator may be lost before it answers).
//     Until that first answer the launcher probes often (AwaitingFirstAnswer): a coordinator
//     lost soon after its job started running (a node lost in the first second of training)
//     must already be watched, and the job needs far longer than one such probe to form.
//   - The silence clock restarts on every answer, and whenever the dist_file names a newer
//     (epoch, incarnation): task 0 restarting its coordinator from the journal (under a second)
//     republishes, so it never triggers a takeover while it is inside the failover timeout.
//   - No takeover once the dist_file is gone or the job's result file exists: a coordinator that
//     ended the job removes the one and writes the other.
//   - Time this task itself did not run (the job suspended with `scontrol suspend` or stopped,
//     the host paused) is no silence of the coordinator's, which did not run either: the launcher
//     calls Resumed when its wait or its probe returned far later than it could have, and the
//     silence clock restarts then, as the coordinator leaves its own pause out of the heartbeats.
//
// Thread safety: a plain value, used by the launcher's one thread.
#ifndef SLURM_DDP_TRAINER_LAUNCHER_STANDBY_H_
#define SLURM_DDP_TRAINER_LAUNCHER_STANDBY_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace ddp {

// What one probe saw.
struct CoordinatorSighting {
  bool file = false;  // the dist_file of this job and generation could be read
  int64_t epoch = 0;
  int64_t incarnation = 0;
  int coordinator_node = 0;
  bool answered = false;   // the coordinator it names answered now
  bool job_ended = false;  // the job's result file says it ended
  std::string error;       // why it did not answer (for the log)
};

class StandbyWatch {
 public:
  // `node`: this task's node; `nodes`: the job's nodes with ranks (spares not counted).
  StandbyWatch(int node, int nodes, absl::Duration failover_timeout)
      : node_(node), nodes_(nodes), failover_timeout_(failover_timeout) {}

  enum class Verdict {
    kIdle,      // not the standby now, or nothing to watch yet
    kHealthy,   // the coordinator answers
    kSilent,    // no answer, inside the failover timeout
    kTakeOver,  // no answer for the failover timeout: take the job over
  };
  Verdict Observe(absl::Time now, const CoordinatorSighting& s);

  // The standby of a coordinator on `coordinator_node`, among `nodes` nodes (-1: none).
  static int StandbyOf(int coordinator_node, int nodes);

  // For kTakeOver: the epoch to claim, the node lost, and when it last answered.
  int64_t next_epoch() const { return epoch_ + 1; }
  int lost_node() const { return coordinator_node_; }
  absl::Time last_answer() const { return last_answer_; }
  absl::Duration silent_for(absl::Time now) const { return now - since_; }
  // Called once the takeover coordinator has started: watch the next epoch (as a plain task).
  void TookOver() { watching_ = false; }
  // This task was not running until `now`: the coordinator's silence counts from now.
  void Resumed(absl::Time now) { since_ = now; }
  // Not yet watching, and not known to be another node's business (no dist_file seen yet, or
  // this node is the standby of the coordinator it names): the launcher probes more often.
  bool AwaitingFirstAnswer() const { return !watching_ && !idle_for_good_; }

 private:
  const int node_;
  const int nodes_;
  const absl::Duration failover_timeout_;
  bool watching_ = false;       // the coordinator answered once since this node became its standby
  bool idle_for_good_ = false;  // the last sighting: another node's standby, or the job ended
  int64_t epoch_ = -1;
  int64_t incarnation_ = -1;
  int coordinator_node_ = -1;
  absl::Time since_;  // the last answer, or the last newer (epoch, incarnation)
  absl::Time last_answer_ = absl::InfinitePast();
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_LAUNCHER_STANDBY_H_
