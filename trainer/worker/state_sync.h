// The state-sync primitive: after a process group is built (at start, or rebuilt after a
// failure), every rank makes its training state equal to that of the rank with the highest
// committed step. DDP ranks are exact replicas, so that rank holds everything the next step
// reads; a rank that failed inside a step's allreduce never applied it and is simply behind.
//
// Collectives, in this order, on every rank:
//   1. allgather of committed steps -> root = the highest step (the lowest rank among ties);
//   2. the check that every rank has the same parameters and buffers (names, shapes, dtypes);
//   3. broadcast of the root's position (training_position.h record: epoch, step, sampler
//      position; the LR schedule is a function of these), decoded and checked on every rank;
//   4. broadcast of which optimizer slots (momentum buffers) the root has, the root's DDP
//      gradient order (bucket layout; ddp.h) and then, coalesced, the root's parameters,
//      buffers, momentum buffers and default CPU generator state.
// A rank other than the root applies what it received only once every one of these collectives
// has succeeded: a sync that fails part way (a peer lost during it) leaves its state, committed
// step included, exactly as it was, so that no rank ever claims a step whose state it does not
// wholly hold. The received tensors are staged in one copy of the model's parameters, buffers
// and momentum buffers for the length of the sync.
// At start this is the resume: rank 0 alone loaded the checkpoint, so it has the highest step
// (or all are at 0 and rank 0 wins the tie), and everything comes from it.
//
// Thread safety: the training thread, with no DDP step in flight.
#ifndef SLURM_DDP_TRAINER_WORKER_STATE_SYNC_H_
#define SLURM_DDP_TRAINER_WORKER_STATE_SYNC_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/worker/model_stage.h"
#include "trainer/worker/training_position.h"

namespace ddp {

// The state one rank holds that another rank must copy to be its replica.
struct TrainingStateRef {
  ModelStage& model;                    // parameters, buffers, optimizer slots
  TrainingPosition& position;           // step, epoch, sampler position
  std::vector<size_t>& gradient_order;  // the DDP bucket layout; empty before it is agreed
};

// Which rank has the highest committed step (the lowest such rank on ties). A collective. Throws
// as dist_errors.h.
int ChooseSyncRoot(c10d::Backend& pg, int64_t committed_step, at::Device device);

// Steps 1-4 above. Returns the root. A failed collective as StatusFromException gives it
// (UNAVAILABLE, DEADLINE_EXCEEDED); a bad position record DATA_LOSS; different models on
// different ranks INVALID_ARGUMENT.
// `after_position` (tests: the "sync" hold point) is called once the root's position has been
// received, before the tensors are.
absl::StatusOr<int> SyncTrainingState(c10d::Backend& pg, const TrainingStateRef& state,
                                      const std::function<void()>& after_position = nullptr);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_WORKER_STATE_SYNC_H_
