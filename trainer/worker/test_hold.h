// A hook for end-to-end tests of in-job recovery: it freezes this worker (SIGSTOP to itself) when
// it reaches a named point of training, so that a test can SIGKILL it exactly there (while
// rank 0 writes a checkpoint, during evaluation, after a given step) or keep it from rejoining
// while the test acts. The kill is real; the hook only chooses the moment. Off unless
// DDP_TEST_HOLD is set, to a comma-separated list of
//
//   <point>:<rank>:<step>:<marker file>
//     point   "step" (after step <step> is committed), "checkpoint" (rank 0, before it writes
//             the checkpoint of step <step>), "eval" (after the first batch of the evaluation
//             that follows step <step>), "rejoin" (a survivor at committed step <step>, before
//             it asks to rejoin), "connect" (a survivor at committed step <step>, its rejoin
//             answered with the next generation, before it builds that generation's group,
//             where <rank> is its rank in it), "published" (a rank building its group at
//             committed step <step>, right after it published its own address in the store:
//             its peers can then connect to it; at a job's start <step> is 0), "sync" (a rank
//             at committed step <step> in a state sync, once the root's position arrived and
//             before its tensors do); or a phase of
//             the step that follows committed step <step>,
//             as the rank enters it: "data" (before its batch is read), "forward", "backward"
//             (after the forward, before the backward pass), "allreduce" (the first wait for
//             the gradients' reduction, its buckets already issued), "optimizer" (gradients
//             reduced, before the optimizer runs)
//     marker  created (O_EXCL) by the worker that holds, holding its pid, so that its
//             replacement, which reaches the same point again, goes on
//
// A test waits for /proc/<pid>/stat to show the worker stopped ("T"), then kills it (or sends
// SIGCONT).
//
// Thread safety: a plain value; At() is called from the training thread.
#ifndef SLURM_DDP_TRAINER_WORKER_TEST_HOLD_H_
#define SLURM_DDP_TRAINER_WORKER_TEST_HOLD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/job_status.h"
#include "common/slurm_env.h"

namespace ddp {

class TestHold {
 public:
  enum class Point {
    kStep,
    kCheckpoint,
    kEval,
    kRejoin,
    kConnect,
    kPublished,
    kSync,
    kData,
    kForward,
    kBackward,
    kAllreduce,
    kOptimizer,
  };
  // The hold point of a step phase (data, forward, backward, allreduce, optimizer); nullopt for
  // the others.
  static std::optional<Point> PointOfPhase(StepPhase phase);

  TestHold() = default;  // never holds
  // From DDP_TEST_HOLD in `env`; INVALID_ARGUMENT naming what is wrong with a malformed value.
  static absl::StatusOr<TestHold> FromEnv(const EnvMap& env);

  // Freezes the process when (point, rank, step) is a configured one whose marker does not exist
  // yet. Returns whether it held (after SIGCONT; never, after a SIGKILL).
  bool At(Point point, int rank, int64_t step) const;

  bool empty() const { return holds_.empty(); }

 private:
  struct Hold {
    Point point;
    int rank = 0;
    int64_t step = 0;
    std::string marker;
  };
  std::vector<Hold> holds_;
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_WORKER_TEST_HOLD_H_
