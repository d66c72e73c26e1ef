// Shared pieces of the worker-stage tests: a small configuration (synthetic data, a built-in
// architecture), a communication stage over a c10d store, steps through the real StepRunner
// and loader, and bitwise comparison of two model stages.
#ifndef SLURM_DDP_TESTS_TRAINER_WORKER_WORKER_TEST_UTIL_H_
#define SLURM_DDP_TESTS_TRAINER_WORKER_WORKER_TEST_UTIL_H_

#include <torch/torch.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/coordinator_api.h"
#include "common/sampler_plan.h"
#include "gtest/gtest.h"
#include "trainer/data/loader.h"
#include "trainer/worker/communication_stage.h"
#include "trainer/worker/data_stage.h"
#include "trainer/worker/model_stage.h"
#include "trainer/worker/step_runner.h"
#include "trainer/worker/training_position.h"

namespace ddp::testing {

// A small run: the stages' options, and the batch size and learning rate of its steps.
struct SmallRun {
  DataStage::Options data;
  ModelStage::Options model;
  int64_t batch_size = 8;
  double lr = 0.05;
};

inline SmallRun SmallConfig(const std::string& arch = "mlp", int64_t samples = 192) {
  SmallRun c;
  c.data.data = "synthetic:" + std::to_string(samples) + "x1x8x8:10";
  c.data.seed = 5;
  c.model.arch = arch;
  c.model.sgd = {/*momentum=*/0.9, /*weight_decay=*/1e-4, /*nesterov=*/false};
  return c;
}

inline DataStage OpenData(const SmallRun& c) {
  auto data = DataStage::Open(c.data);
  if (!data.ok()) {
    ADD_FAILURE() << data.status();
    std::abort();
  }
  return *std::move(data);
}

// A model stage built as a worker builds it: the config's seed, then the architecture.
inline ModelStage BuildModel(const SmallRun& c, const DataStage& data, uint64_t seed) {
  torch::manual_seed(seed);
  auto model = ModelStage::Create(c.model, data.train(), at::kCPU);
  if (!model.ok()) {
    ADD_FAILURE() << model.status();
    std::abort();
  }
  return *std::move(model);
}

inline CommunicationStage::Options GlooOptions() {
  CommunicationStage::Options o;
  o.process_group.backend = BackendKind::kGloo;
  o.process_group.gloo_hostname = "127.0.0.1";
  o.process_group.gloo_threads = 1;
  o.process_group.timeout = std::chrono::seconds(60);
  o.ddp.reducer.first_bucket_bytes = 16 << 10;  // several buckets even for small models
  o.ddp.reducer.bucket_bytes = 64 << 10;
  return o;
}

// This rank's loader for the rest of the position's epoch (the resume rule of sampler_plan.h).
inline std::unique_ptr<data::Loader> LoaderAt(const SmallRun& c, const DataStage& data,
                                              const TrainingPosition& p, int rank, int world) {
  ShardAssignment a;
  a.epoch = p.epoch;
  a.dataset_size = data.train().size();
  a.seed = c.data.seed;
  a.world_size = world;
  a.rank = rank;
  a.consumed = p.consumed;
  a.consumed_world_size = p.consumed > 0 ? static_cast<int>(p.consumed_world_size) : world;
  data::LoaderOptions lo;
  lo.batch_size = c.batch_size;
  lo.workers = 0;
  lo.epoch = p.epoch;
  auto loader = data::Loader::Create(data.train(), ShardIndices(a), lo);
  if (!loader.ok()) {
    ADD_FAILURE() << loader.status();
    std::abort();
  }
  return *std::move(loader);
}

// `steps` steps from `loader`, advancing the position as the training loop does.
inline void TrainSteps(const SmallRun& c, ModelStage& model, CommunicationStage& comm,
                       TrainingPosition& position, data::Loader& loader, int world, int steps) {
  StepRunner runner(model, comm, position, {});
  for (int s = 0; s < steps; ++s) {
    auto batch = loader.Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_TRUE(batch->has_value()) << "ran out of data at step " << s;
    auto done = runner.Run(**batch, c.lr);
    ASSERT_TRUE(done.ok()) << done.status();
    if (position.consumed == 0) position.consumed_world_size = world;
    position.consumed += c.batch_size * world;
  }
}

// Parameters, buffers and momentum buffers of `got` are bitwise those of `want`.
inline void ExpectBitwiseEqual(const ModelStage& got, const ModelStage& want,
                               const std::string& what) {
  const auto g = got.model().state_dict();
  const auto w = want.model().state_dict();
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_TRUE(torch::equal(g[i].tensor, w[i].tensor)) << what << ": " << g[i].name << " differs";
  }
  const auto gm = got.optimizer().MomentumBuffers();
  const auto wm = want.optimizer().MomentumBuffers();
  ASSERT_EQ(gm.size(), wm.size()) << what;
  for (size_t i = 0; i < gm.size(); ++i) {
    EXPECT_EQ(gm[i].name, wm[i].name);
    EXPECT_TRUE(torch::equal(gm[i].tensor, wm[i].tensor))
        << what << ": momentum " << gm[i].name << " differs";
  }
}

}  // namespace ddp::testing

#endif  // SLURM_DDP_TESTS_TRAINER_WORKER_WORKER_TEST_UTIL_H_
