// The composition root's one mapping from ddp-trainer's flags (TrainerConfig) to the options of
// the worker's stages: each stage takes only the values it uses, under the flags' names, so a
// test builds a stage from a few numbers and no stage sees the whole config.
//
// Thread safety: pure functions.
#ifndef SLURM_DDP_TRAINER_APP_STAGE_OPTIONS_H_
#define SLURM_DDP_TRAINER_APP_STAGE_OPTIONS_H_

#include <c10/core/Device.h>

#include <cstdint>

#include "trainer/launcher/config.h"
#include "trainer/launcher/launch_plan.h"
#include "trainer/worker/communication_stage.h"
#include "trainer/worker/coordinator_session.h"
#include "trainer/worker/data_stage.h"
#include "trainer/worker/in_job_recovery.h"
#include "trainer/worker/model_stage.h"
#include "trainer/worker/test_hold.h"
#include "trainer/worker/training_position.h"

namespace ddp {

// --data, --seed, --normalize.
DataStage::Options DataOptions(const TrainerConfig& config);
// --model, --arch, --fused-bn-relu, --channels-last, --momentum, --weight-decay, --nesterov.
ModelStage::Options ModelOptions(const TrainerConfig& config);
// The GetShard of the epoch at `position` (--seed; shuffled and padded, as the recipe's
// DistributedSampler), over a training set of `dataset_size` samples.
ShardRequest EpochShardRequest(const TrainerConfig& config, int64_t dataset_size,
                               const TrainingPosition& position);
// --registration-timeout, the workers' RPC deadline, --coordinator-grace, --stop-timeout; and,
// when the run surely starts fresh (--resume none, or auto without --checkpoint-dir), its first
// GetShard (epoch 0 of `dataset_size` samples), sent with the registration.
CoordinatorSession::Options SessionOptions(const TrainerConfig& config, int64_t dataset_size);
// --backend, --pg-timeout, --bucket-mb; the CUDA device; loopback for Gloo in a local job.
// --backend must have parsed (config.h validates it).
CommunicationStage::Options CommunicationOptions(const TrainerConfig& config,
                                                 const WorkerPlacement& placement,
                                                 at::Device device);
// --max-restarts; a rejoin waits --registration-timeout and 30 s more. An activated warm
// worker (placement.warm_fd >= 0) closes its warm link after its first committed step.
InJobRecovery::Options RecoveryOptions(const TrainerConfig& config,
                                       const WorkerPlacement& placement, const TestHold* hold);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_APP_STAGE_OPTIONS_H_
