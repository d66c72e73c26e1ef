// The training loop of one worker: per epoch, the coordinator's shard assignment, the loader,
// forward / backward (DDP) / SGD step, progress to the coordinator, the recipe's progress lines on
// rank 0, periodic and epoch-end checkpoints, evaluation, and a clean stop that every rank agrees
// on (a checkpoint-and-stop command, SIGTERM/SIGUSR1, or --stop-after-steps).
//
// Thread safety: runs on the worker's main thread; the objects it is given are used from there.
#ifndef SLURM_DDP_TRAINER_APP_TRAINING_LOOP_H_
#define SLURM_DDP_TRAINER_APP_TRAINING_LOOP_H_

#include <ATen/ATen.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "absl/status/statusor.h"
#include "common/coordinator_api.h"
#include "trainer/app/config.h"
#include "trainer/app/optimizer.h"
#include "trainer/app/progress_reporter.h"
#include "trainer/data/dataset.h"
#include "trainer/data/gpu_jpeg_decoder.h"
#include "trainer/dist/ddp.h"
#include "trainer/models/model.h"

namespace ddp {

// Where training (re)starts.
struct StartPoint {
  int64_t epoch = 0;
  int64_t step = 0;             // global optimizer steps already taken
  int64_t consumed = 0;         // positions of `epoch` already consumed
  int consumed_world_size = 0;  // world that consumed them (0: fresh epoch)
};

struct TrainingContext {
  const TrainerConfig* config = nullptr;
  RankAssignment rank;
  CoordinatorApi* api = nullptr;
  c10d::Backend* pg = nullptr;
  models::Model* model = nullptr;
  DistributedDataParallel* ddp = nullptr;
  Sgd* sgd = nullptr;
  const data::Dataset* train = nullptr;
  const data::Dataset* test = nullptr;
  ProgressReporter* reporter = nullptr;
  at::Device device = at::kCPU;
  data::GpuJpegDecoder* gpu_decoder = nullptr;     // imagefolder batches through the GPU pipeline
  std::string log_prefix;                          // "[rank 0] "
  const std::atomic<bool>* signal_stop = nullptr;  // set by SIGTERM/SIGUSR1
  StartPoint start;
};

enum class LoopOutcome { kFinished, kStopped };

struct LoopResult {
  LoopOutcome outcome = LoopOutcome::kFinished;
  double final_top1 = -1;
  double final_top5 = -1;
  std::string checkpoint;  // last checkpoint written (rank 0)
};

// Trains from ctx.start to config.epochs. Errors name what failed (a collective, the data, an
// abort from the coordinator naming the failed rank: code ABORTED).
absl::StatusOr<LoopResult> RunTrainingLoop(const TrainingContext& ctx);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_APP_TRAINING_LOOP_H_
