#include "coordinator/rpc/validation.h"

#include <string>
#include <vector>

#include "coordinator/job/job.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

TEST(ValidationTest, Identity) {
  struct Case {
    const char* name;
    WorkerIdentity who;
    bool ok;
  };
  auto make = [](std::string host, int node, int local, int lws) {
    WorkerIdentity w;
    w.host = std::move(host);
    w.node_rank = node;
    w.local_rank = local;
    w.local_world_size = lws;
    w.pid = 1;
    return w;
  };
  const std::vector<Case> cases = {
      {"good", make("h", 0, 1, 2), true},
      {"empty host", make("", 0, 0, 1), false},
      {"long host", make(std::string(300, 'h'), 0, 0, 1), false},
      {"local rank >= local world", make("h", 0, 2, 2), false},
      {"negative local rank", make("h", 0, -1, 2), false},
      {"local world > world", make("h", 0, 0, 9), false},
      {"zero local world", make("h", 0, 0, 0), false},
      {"node rank >= world", make("h", 8, 0, 1), false},
      {"negative node", make("h", -1, 0, 1), false},
      {"slurm node name", make("h", 0, 0, 1), true},
      {"node name with a comma", make("h", 0, 0, 1), false},
      {"long node name", make("h", 0, 0, 1), false},
  };
  for (Case c : cases) {
    const std::string name = c.name;
    if (name == "slurm node name") c.who.node_name = "gpu-07.rack_2";
    if (name == "node name with a comma") c.who.node_name = "n1,n2";
    if (name == "long node name") c.who.node_name = std::string(256, 'n');
    EXPECT_EQ(ValidateIdentity(c.who, 8).ok(), c.ok) << c.name;
  }
}

TEST(ValidationTest, StoreLimits) {
  EXPECT_TRUE(ValidateKey("k").ok());
  EXPECT_FALSE(ValidateKey("").ok());
  EXPECT_FALSE(ValidateKey(std::string(kMaxKeyBytes + 1, 'k')).ok());
  EXPECT_FALSE(ValidateKeys({}).ok());
  EXPECT_FALSE(ValidateKeys({"a", ""}).ok());
  EXPECT_TRUE(ValidateValue(std::string(1024, 'v')).ok());
  EXPECT_FALSE(ValidateValue(std::string(kMaxValueBytes + 1, 'v')).ok());
  EXPECT_FALSE(ValidateTimeoutMs(-1).ok());
  EXPECT_TRUE(ValidateTimeoutMs(0).ok());
}

TEST(ValidationTest, ShardProgressCheckpoint) {
  ShardRequest r;
  r.dataset_size = 10;
  EXPECT_TRUE(ValidateShardRequest(r).ok());
  r.dataset_size = 0;
  EXPECT_FALSE(ValidateShardRequest(r).ok());
  r.dataset_size = 10;
  r.epoch = -1;
  EXPECT_FALSE(ValidateShardRequest(r).ok());
  r.epoch = 0;
  r.resume_consumed = 4;
  EXPECT_FALSE(ValidateShardRequest(r).ok());  // needs resume_world_size
  r.resume_world_size = 2;
  EXPECT_TRUE(ValidateShardRequest(r).ok());
  ProgressReport p;
  EXPECT_TRUE(ValidateProgress(p).ok());
  p.step = -1;
  EXPECT_FALSE(ValidateProgress(p).ok());
  CommittedCheckpoint c;
  EXPECT_TRUE(ValidateCheckpoint(c).ok());
  c.path = std::string(kMaxPathBytes + 1, 'p');
  EXPECT_FALSE(ValidateCheckpoint(c).ok());
}

TEST(Validation, LiveWorkersOfAFencesCall) {
  EXPECT_TRUE(ValidateLiveWorkers(0, {}).ok());
  EXPECT_TRUE(ValidateLiveWorkers(3, {{0, 100}, {7, 101}}).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateLiveWorkers(-1, {})));
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateLiveWorkers(kMaxWorldSize, {})));
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateLiveWorkers(0, {{-1, 100}})));
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateLiveWorkers(0, {{kMaxLocalWorkers, 100}})));
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateLiveWorkers(0, {{0, 0}})));
  EXPECT_TRUE(absl::IsInvalidArgument(
      ValidateLiveWorkers(0, std::vector<LiveWorker>(kMaxLocalWorkers + 1, LiveWorker{0, 1}))));
}

}  // namespace
}  // namespace ddp
