// Launch plans for every layout a user can start: local mode, Slurm with one task per node
// (spawning a worker per GPU), one task per worker (including uneven layouts), and the
// contradictions that must fail at once with a one-line error.
#include "trainer/launcher/launch_plan.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ddp {
namespace {

EnvMap Slurm(int ntasks, int procid, int localid, int nodeid, int nnodes,
             const std::string& tasks_per_node) {
  return {{"SLURM_JOB_ID", "77"},
          {"SLURM_STEP_NUM_TASKS", std::to_string(ntasks)},
          {"SLURM_PROCID", std::to_string(procid)},
          {"SLURM_LOCALID", std::to_string(localid)},
          {"SLURM_NODEID", std::to_string(nodeid)},
          {"SLURM_STEP_NUM_NODES", std::to_string(nnodes)},
          {"SLURM_STEP_TASKS_PER_NODE", tasks_per_node}};
}

TrainerConfig Config(int nprocs, const std::string& backend = "auto") {
  TrainerConfig c;
  c.nprocs_per_node = nprocs;
  c.backend = backend;
  return c;
}

struct Case {
  std::string name;
  EnvMap env;
  TrainerConfig config;
  int gpus;
  // Expected.
  std::string mode;
  int world_size;
  int node_rank;
  std::vector<int> local_ranks;
  bool start_coordinator;
};

TEST(LaunchPlan, Layouts) {
  const std::vector<Case> cases = {
      {"local, 4 CPU workers", {}, Config(4), 0, "local", 4, 0, {0, 1, 2, 3}, true},
      {"local, default on a CPU node", {}, Config(0), 0, "local", 1, 0, {0}, true},
      {"local, default = GPUs", {}, Config(0), 2, "local", 2, 0, {0, 1}, true},
      {"slurm -N2 task per node, node 0",
       Slurm(2, 0, 0, 0, 2, "1(x2)"),
       Config(2),
       0,
       "slurm task-per-node",
       4,
       0,
       {0, 1},
       true},
      {"slurm -N2 task per node, node 1",
       Slurm(2, 1, 0, 1, 2, "1(x2)"),
       Config(2),
       0,
       "slurm task-per-node",
       4,
       1,
       {0, 1},
       false},
      {"slurm -N2 default = 4 GPUs",
       Slurm(2, 1, 0, 1, 2, "1(x2)"),
       Config(0),
       4,
       "slurm task-per-node",
       8,
       1,
       {0, 1, 2, 3},
       false},
      {"slurm 2 tasks per node, task 3",
       Slurm(4, 3, 1, 1, 2, "2(x2)"),
       Config(0),
       0,
       "slurm task-per-worker",
       4,
       1,
       {1},
       false},
      {"slurm uneven 3 tasks on 2 nodes, task 2",
       Slurm(3, 2, 0, 1, 2, "2,1"),
       Config(0),
       0,
       "slurm task-per-worker",
       3,
       1,
       {0},
       false},
      {"slurm uneven, task 0 starts the coordinator",
       Slurm(3, 0, 0, 0, 2, "2,1"),
       Config(1),
       0,
       "slurm task-per-worker",
       3,
       0,
       {0},
       true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto plan = PlanLaunch(c.config, c.env, c.gpus, 1234);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->mode, c.mode);
    EXPECT_EQ(plan->base.world_size, c.world_size);
    EXPECT_EQ(plan->base.node_rank, c.node_rank);
    EXPECT_EQ(plan->local_ranks, c.local_ranks);
    EXPECT_EQ(plan->start_coordinator, c.start_coordinator);
  }
}

TEST(LaunchPlan, DefaultsAndPlacementRoundTrip) {
  auto local = PlanLaunch(Config(2), {}, 0, 99);
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->base.job_id, "local-99");
  EXPECT_EQ(local->base.dist_file.substr(local->base.dist_file.rfind('/') + 1),
            "dist_file.local-99");
  auto slurm = PlanLaunch(Config(1), Slurm(2, 1, 0, 1, 2, "1(x2)"), 0, 5);
  ASSERT_TRUE(slurm.ok());
  EXPECT_EQ(slurm->base.job_id, "77");

  WorkerPlacement p = slurm->base;
  p.local_rank = 1;
  EnvMap env;
  for (const std::string& kv : PlacementEnv(p)) {
    env[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
  }
  auto back = PlacementFromEnv(env);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->job_id, "77");
  EXPECT_EQ(back->world_size, 2);
  EXPECT_EQ(back->node_rank, 1);
  EXPECT_EQ(back->local_rank, 1);
  EXPECT_EQ(back->dist_file, p.dist_file);
  EXPECT_FALSE(back->local_mode);
  EXPECT_FALSE(PlacementFromEnv({}).ok());
}

TEST(LaunchPlan, ContradictionsFailWithOneLine) {
  struct Bad {
    std::string name;
    EnvMap env;
    TrainerConfig config;
    int gpus;
    std::string needle;
  };
  std::vector<Bad> cases = {
      {"more workers than GPUs", {}, Config(4), 2, "only 2 GPU"},
      {"nccl without GPUs", {}, Config(1, "nccl"), 0, "no GPU"},
      {"nprocs with several tasks per node", Slurm(4, 0, 0, 0, 2, "2(x2)"), Config(2), 0,
       "not both"},
      {"missing SLURM_PROCID",
       [] {
         EnvMap e = Slurm(2, 0, 0, 0, 2, "1(x2)");
         e.erase("SLURM_PROCID");
         return e;
       }(),
       Config(1), 0, "SLURM_PROCID"},
  };
  TrainerConfig spares = Config(1);
  spares.spare_nodes = 1;
  TrainerConfig all_spares = Config(1);
  all_spares.spare_nodes = 2;
  cases.push_back({"spares in local mode", {}, spares, 0, "local mode has one node"});
  cases.push_back(
      {"spares with a task per worker", Slurm(4, 0, 0, 0, 2, "2(x2)"), spares, 0, "per node"});
  cases.push_back({"no node left to train", Slurm(2, 0, 0, 0, 2, "1(x2)"), all_spares, 0,
                   "leaves no node to train on"});
  TrainerConfig too_many = spares;  // 3 nodes, 1 spare: the job has 2
  too_many.min_nodes = 3;
  cases.push_back({"--min-nodes above the job's nodes", Slurm(3, 0, 0, 0, 3, "1(x3)"), too_many, 0,
                   "--min-nodes 3 is more than the job's 2 node(s)"});
  TrainerConfig local_min = Config(1);
  local_min.min_nodes = 2;
  cases.push_back({"--min-nodes in local mode", {}, local_min, 0, "more than the job's 1 node"});
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.name);
    auto plan = PlanLaunch(c.config, c.env, c.gpus, 1);
    ASSERT_FALSE(plan.ok());
    const std::string msg(plan.status().message());
    EXPECT_NE(msg.find(c.needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

// --spare-nodes K: the last K nodes of the step hold no ranks; the world counts the others.
TEST(LaunchPlan, SpareNodesAreTheLastNodesOfTheStep) {
  TrainerConfig c = Config(2);
  c.spare_nodes = 1;
  for (int node = 0; node < 3; ++node) {
    SCOPED_TRACE(node);
    auto plan = PlanLaunch(c, Slurm(3, node, 0, node, 3, "1(x3)"), 0, 1);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->base.world_size, 4);
    EXPECT_EQ(plan->base.num_nodes, 2);
    EXPECT_EQ(plan->base.node_rank, node);
    EXPECT_EQ(plan->spare, node == 2);
    EXPECT_EQ(plan->start_coordinator, node == 0);
    EXPECT_EQ(plan->local_ranks, (std::vector<int>{0, 1})) << "the workers a takeover starts";
    EXPECT_EQ(plan->mode, node == 2 ? "slurm task-per-node, spare node" : "slurm task-per-node");
  }
}

TEST(LaunchPlan, CoordinatorCommandSpellsOutEveryTimeout) {
  TrainerConfig config = Config(2);
  config.registration_timeout_s = 45;
  config.heartbeat_timeout_s = 2.5;
  config.max_restarts = 2;
  config.min_nodes = 1;
  config.stall_timeout_s = 30;
  config.stop_timeout_s = 45.5;
  SupervisionTimeouts timeouts;
  timeouts.coordinator_linger = absl::Milliseconds(1500);
  auto slurm = PlanLaunch(config, Slurm(2, 0, 0, 0, 2, "1(x2)"), 0, 1);
  ASSERT_TRUE(slurm.ok()) << slurm.status();
  EXPECT_EQ(CoordinatorCommand(*slurm, config, timeouts, "/opt/ddp/bin/ddp-coordinator"),
            (std::vector<std::string>{"/opt/ddp/bin/ddp-coordinator",
                                      "--world-size",
                                      "4",
                                      "--dist-file",
                                      "dist_file.77",
                                      "--job-id",
                                      "77",
                                      "--generation",
                                      "0",
                                      "--registration-timeout",
                                      "45",
                                      "--heartbeat-timeout",
                                      "2.5",
                                      "--max-restarts",
                                      "2",
                                      "--min-nodes",
                                      "1",
                                      "--stall-timeout",
                                      "30",
                                      "--stop-timeout",
                                      "45.5",
                                      "--straggler-threshold",
                                      "0.75",
                                      "--straggler-window",
                                      "30",
                                      "--straggler-action",
                                      "warn",
                                      "--standby",
                                      "auto",
                                      "--linger",
                                      "1.5",
                                      "--log-file",
                                      "dist_file.77.coordinator.log"}));
  // Local jobs listen on loopback only; the default linger is the launcher's own 10 s.
  config.job_id = "demo";
  config.dist_file = "/tmp/df";
  auto local = PlanLaunch(config, {}, 0, 1);
  ASSERT_TRUE(local.ok()) << local.status();
  const std::vector<std::string> argv =
      CoordinatorCommand(*local, config, SupervisionTimeouts{}, "ddp-coordinator");
  ASSERT_GE(argv.size(), 2u);
  EXPECT_EQ(std::vector<std::string>(argv.end() - 2, argv.end()),
            (std::vector<std::string>{"--listen", "127.0.0.1:0"}));
  const auto linger = std::find(argv.begin(), argv.end(), "--linger");
  ASSERT_NE(linger, argv.end());
  EXPECT_EQ(*(linger + 1), "10");
  EXPECT_NE(std::find(argv.begin(), argv.end(), "demo"), argv.end());
}

TEST(LaunchPlan, WorkerCommandRunsTheSameArgumentsAsAWorker) {
  EXPECT_EQ(WorkerCommand("/proc/self/exe", {"--epochs", "2", "--data", "synthetic"}),
            (std::vector<std::string>{"/proc/self/exe", "--epochs", "2", "--data", "synthetic",
                                      "--internal-worker"}));
  EXPECT_EQ(WorkerCommand("/x", {}), (std::vector<std::string>{"/x", "--internal-worker"}));
}

TEST(LaunchPlan, CountsVisibleGpusFromTheEnvironment) {
  EXPECT_EQ(CountVisibleGpus({{"CUDA_VISIBLE_DEVICES", "0,1,3"}}), 3);
  EXPECT_EQ(CountVisibleGpus({{"CUDA_VISIBLE_DEVICES", ""}}), 0);
}

}  // namespace
}  // namespace ddp
