// The decision to stop, taken by every rank at the same step through its own process group (one
// MAX allreduce of a small integer), never through the coordinator: a rank's local reason to stop
// is a StopCode, and the highest code of any rank is what all of them do.
//
//   kNone             train on
//   kStop             a graceful stop (the coordinator's checkpoint-and-stop, SIGTERM/SIGUSR1):
//                     write the stop checkpoint and exit resumable
//   kCoordinatorLost  this rank could not reach the coordinator for --coordinator-grace: the
//                     same checkpoint and exit, but without another call to the coordinator
//
// Codes are ordered so that MAX keeps the decision that makes the fewest coordinator calls.
//
// Thread safety: AgreeStopCode issues a collective: the training thread only (c10d's contract).
#ifndef SLURM_DDP_TRAINER_WORKER_STOP_AGREEMENT_H_
#define SLURM_DDP_TRAINER_WORKER_STOP_AGREEMENT_H_

#include <ATen/ATen.h>

#include <torch/csrc/distributed/c10d/Backend.hpp>

namespace ddp {

enum class StopCode : int { kNone = 0, kStop = 1, kCoordinatorLost = 2 };

// This rank's own code: a lost coordinator wins over a stop asked for.
StopCode LocalStopCode(bool stop_requested, bool coordinator_lost);

// The highest code of all ranks of `pg` (each passes its own `local`; tensors on `device`).
// A failed collective throws as WaitForWork does (dist_errors.h), naming `what`.
StopCode AgreeStopCode(c10d::Backend& pg, StopCode local, const at::Device& device,
                       const char* what);

// "stop", "coordinator lost", ... for logs.
const char* StopCodeName(StopCode code);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_WORKER_STOP_AGREEMENT_H_
