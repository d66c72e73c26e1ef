#include "trainer/app/stage_options.h"

#include <unistd.h>

#include <chrono>
#include <cstdint>

#include "absl/time/time.h"

namespace ddp {

DataStage::Options DataOptions(const TrainerConfig& c) {
  DataStage::Options o;
  o.data = c.data;
  o.seed = c.seed;
  o.normalize = c.normalize;
  return o;
}

ModelStage::Options ModelOptions(const TrainerConfig& c) {
  ModelStage::Options o;
  o.model_path = c.model_path;
  o.arch = c.arch;
  o.fused_bn_relu = c.fused_bn_relu;
  o.channels_last = c.channels_last;
  o.sgd = {c.momentum, c.weight_decay, c.nesterov};
  return o;
}

// The coordinator is lost after --coordinator-grace without an answer; the stop that follows
// ends within --stop-timeout.
ShardRequest EpochShardRequest(const TrainerConfig& c, int64_t dataset_size,
                               const TrainingPosition& position) {
  ShardRequest req;
  req.epoch = position.epoch;
  req.dataset_size = dataset_size;
  req.seed = c.seed;
  req.shuffle = true;
  req.drop_last = false;
  if (position.consumed > 0) {
    req.resume_consumed = position.consumed;
    req.resume_world_size = static_cast<int>(position.consumed_world_size);
  }
  return req;
}

CoordinatorSession::Options SessionOptions(const TrainerConfig& c, int64_t dataset_size) {
  CoordinatorSession::Options o;
  o.registration_timeout = absl::Seconds(c.registration_timeout_s);
  o.rpc_timeout = WorkerRpcTimeout(c);
  o.coordinator_grace = absl::Seconds(c.coordinator_grace_s);
  o.stop_timeout = absl::Seconds(c.stop_timeout_s);
  // Without a checkpoint to resume from every rank starts at epoch 0, sample 0 (LoadStartPoint):
  // its first GetShard is known before it has a rank. Any other start asks once it knows.
  if (c.resume == "none" || (c.resume == "auto" && c.checkpoint_dir.empty())) {
    o.first_shard = EpochShardRequest(c, dataset_size, TrainingPosition{});
  }
  return o;
}

CommunicationStage::Options CommunicationOptions(const TrainerConfig& c, const WorkerPlacement& p,
                                                 at::Device device) {
  CommunicationStage::Options o;
  o.process_group.backend = *ParseBackendKind(c.backend);
  o.process_group.timeout = std::chrono::milliseconds(static_cast<int64_t>(c.pg_timeout_s * 1000));
  o.process_group.cuda_device = device.is_cuda() ? device.index() : 0;
  if (p.local_mode) o.process_group.gloo_hostname = "127.0.0.1";
  o.ddp.reducer.bucket_bytes = c.bucket_mb << 20;
  return o;
}

InJobRecovery::Options RecoveryOptions(const TrainerConfig& c, const WorkerPlacement& p,
                                       const TestHold* hold) {
  InJobRecovery::Options o;
  o.rejoin_timeout = absl::Seconds(c.registration_timeout_s + 30);
  o.max_restarts = c.max_restarts;
  o.hold = hold;
  // An activated warm worker's link: its task starts the next warm worker when it closes.
  if (const int link = p.warm_fd; link >= 0) o.on_first_step = [link] { ::close(link); };
  return o;
}

}  // namespace ddp
