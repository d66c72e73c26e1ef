// The progress columns of the recipe (Loss, Acc@1, Acc@5 with their epoch averages) over every
// step of the epoch, not only the printed ones. The sums live on the model's device and grow by
// a few tensor ops per step, with no host sync; they are read (one sync) when a progress line is
// printed or the coordinator's loss is refreshed.
//
// Thread safety: not thread-safe; the training thread owns it.
#ifndef SLURM_DDP_TRAINER_WORKER_STEP_METERS_H_
#define SLURM_DDP_TRAINER_WORKER_STEP_METERS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace ddp {

// What one read gives: the last step's values and the averages, weighted by samples.
struct MeterReading {
  double loss_last = 0, loss_avg = 0;
  double top1_last = 0, top1_avg = 0;  // percent
  double top5_last = 0, top5_avg = 0;  // percent
  // The mean loss over the steps since the previous Read that asked for it (see Read); 0 when
  // no step was added since.
  double loss_since_previous = 0;
  int64_t steps_since_previous = 0;
};

class StepMeters {
 public:
  // One training step: its loss (a scalar), logits [N, classes] and labels [N], all on the same
  // device. Only device work: nothing here waits for the step to finish.
  void Add(const at::Tensor& loss, const at::Tensor& logits, const at::Tensor& labels);

  // Reads the sums (one device-to-host copy). `restart_since_previous`: start a new "since the
  // previous" window after this read (the coordinator's loss); printing passes false.
  MeterReading Read(bool restart_since_previous);

  int64_t steps() const { return steps_; }

 private:
  // [loss*n, top1 hits, top5 hits] of the last step, of the epoch, and of the current window.
  at::Tensor last_, epoch_, window_;
  int64_t last_n_ = 0, epoch_n_ = 0, window_n_ = 0, window_steps_ = 0, steps_ = 0;
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_WORKER_STEP_METERS_H_
