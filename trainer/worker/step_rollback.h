// What a training step changes before it is committed, other than gradients (which DdpStep
// clears) and the parameters and optimizer state (which only the optimizer, the step's last
// phase, changes): the model's buffers (BatchNorm's running statistics and counters, updated in
// place by the forward, then overwritten by DDP's broadcast of rank 0's buffers) and the random
// generators (dropout, anything the model draws). A step that fails after its forward ran, or in
// the middle of the buffer broadcast, would otherwise leave this rank one batch ahead of every
// uninterrupted run in exactly those values, and the state sync (state_sync.h) would hand them
// to every rank. So the step runner saves them as the step begins and puts them back when the
// step ends without being committed:
//
//   StepRollback rollback(model);           // once: buffers to copy into are allocated here
//   rollback.Save();                        // as each step begins
//   ... forward, backward (allreduce, buffer broadcast), optimizer ...
//   if (!committed) rollback.Restore();     // the committed state of the last completed step
//
// Cost per step: one copy of the buffers on the model's device (a single foreach copy, no host
// sync) and the generators' states (the CPU generator's is 5 KB; a CUDA generator's is a seed
// and an offset). No host copy of the model. bench/step_rollback.sh measures it.
//
// Thread safety: the training thread only, with no step in flight during Restore.
#ifndef SLURM_DDP_TRAINER_WORKER_STEP_ROLLBACK_H_
#define SLURM_DDP_TRAINER_WORKER_STEP_ROLLBACK_H_

#include <ATen/ATen.h>

#include <vector>

#include "trainer/worker/model_stage.h"

namespace ddp {

class StepRollback {
 public:
  explicit StepRollback(ModelStage& model);
  StepRollback(const StepRollback&) = delete;
  StepRollback& operator=(const StepRollback&) = delete;

  // Remembers the buffers and the generators' states as they are now.
  void Save();
  // Puts back what Save() remembered (nothing before the first Save).
  void Restore();

  bool saved() const { return saved_; }

 private:
  std::vector<at::Tensor> live_;  // the model's buffers
  std::vector<at::Tensor> saved_buffers_;
  std::vector<at::Generator> generators_;  // the CPU one, and the device's when it is not CPU
  std::vector<at::Tensor> saved_generators_;
  bool saved_ = false;
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_WORKER_STEP_ROLLBACK_H_
