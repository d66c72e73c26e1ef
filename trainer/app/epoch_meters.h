// What the training loop measures over an epoch, and how it shows it: rank 0's progress line
// (the recipe's columns) and the training progress each heartbeat carries to the coordinator.
//
// Thread safety: values owned by the training thread.
#ifndef SLURM_DDP_TRAINER_APP_EPOCH_METERS_H_
#define SLURM_DDP_TRAINER_APP_EPOCH_METERS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "common/coordinator_api.h"
#include "trainer/ddp/reducer.h"
#include "trainer/worker/step_meters.h"

namespace ddp {

// Running average of a host-side time, like the recipe's AverageMeter.
struct Meter {
  double last = 0, sum = 0;
  int64_t count = 0;
  void Add(double v) {
    last = v;
    sum += v;
    ++count;
  }
  double avg() const { return count == 0 ? 0 : sum / static_cast<double>(count); }
};

struct EpochMeters {
  Meter batch_time, data_time;
  StepMeters steps;          // loss and accuracy over every step, summed on the device
  double reported_loss = 0;  // the mean loss over the steps before the last refresh
  std::chrono::steady_clock::time_point tick = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> refreshed;  // unset: at the first step
};

// Rank 0's line after batch `i` of `batches`: "Epoch: [e][ i/n]\tTime ... lr ...".
std::string ProgressLine(int64_t epoch, int64_t i, int64_t batches, const EpochMeters& m,
                         const MeterReading& r, double lr);

// A heartbeat's training progress from the meters and the engine's step timings: the phase,
// the loss, throughput (`batch_size` samples a step), the data wait and the step's parts. The
// caller fills in the position (epoch, step, their totals).
ProgressReport TrainingProgress(const EpochMeters& m, const StepTimings& t, int64_t batch_size);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_APP_EPOCH_METERS_H_
