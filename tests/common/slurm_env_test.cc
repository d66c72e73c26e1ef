#include "common/slurm_env.h"

#include <string>
#include <vector>

#include "common/dist_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

EnvMap Base() {
  return {{"SLURM_JOB_ID", "42"},
          {"SLURM_STEP_NUM_TASKS", "4"},
          {"SLURM_PROCID", "3"},
          {"SLURM_LOCALID", "1"},
          {"SLURM_NODEID", "1"},
          {"SLURM_STEP_NUM_NODES", "2"},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"}};
}

TEST(SlurmEnvTest, IsSlurm) {
  EXPECT_FALSE(IsSlurm({}));
  EXPECT_FALSE(IsSlurm({{"SLURM_PROCID", "0"}}));
  EXPECT_TRUE(IsSlurm({{"SLURM_JOB_ID", "1"}}));
  EXPECT_TRUE(IsSlurm({{"SLURM_JOBID", "1"}}));
}

TEST(SlurmEnvTest, ParsesFullEnvironment) {
  EnvMap env = Base();
  env["SLURM_RESTART_COUNT"] = "2";
  env["CUDA_VISIBLE_DEVICES"] = "0,1,3";
  env["SLURMD_NODENAME"] = "gpu07";
  auto s = ParseSlurmEnv(env);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->job_id, "42");
  EXPECT_EQ(s->num_tasks, 4);
  EXPECT_EQ(s->proc_id, 3);
  EXPECT_EQ(s->local_id, 1);
  EXPECT_EQ(s->node_id, 1);
  EXPECT_EQ(s->num_nodes, 2);
  EXPECT_EQ(s->tasks_on_this_node, 2);
  EXPECT_THAT(s->tasks_per_node, ElementsAre(2, 2));
  EXPECT_EQ(s->restart_count, 2);
  EXPECT_EQ(s->step_gpus, 3);
  EXPECT_EQ(s->node_name, "gpu07");
}

TEST(SlurmEnvTest, FallsBackToOlderVariableNames) {
  EnvMap env = {{"SLURM_JOBID", "7"},  {"SLURM_NPROCS", "2"}, {"SLURM_PROCID", "1"},
                {"SLURM_NNODES", "2"}, {"SLURM_NODEID", "1"}, {"SLURM_TASKS_PER_NODE", "1(x2)"}};
  auto s = ParseSlurmEnv(env);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->job_id, "7");
  EXPECT_EQ(s->num_tasks, 2);
  EXPECT_EQ(s->tasks_on_this_node, 1);
}

TEST(SlurmEnvTest, StepVariablesWinOverJobVariables) {
  EnvMap env = Base();
  env["SLURM_NTASKS"] = "99";
  env["SLURM_TASKS_PER_NODE"] = "50,49";
  auto s = ParseSlurmEnv(env);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->num_tasks, 4);
}

// Two steps of one allocation are two jobs: their identities (dist_file job id and default path)
// differ. The first step (or none, or one of Slurm's special steps) keeps the plain job id.
TEST(SlurmEnvTest, TheStepIsPartOfTheJobIdentity) {
  auto identity = [](const char* name, const char* step) {
    EnvMap env = Base();
    if (name != nullptr) env[name] = step;
    absl::StatusOr<SlurmEnv> s = ParseSlurmEnv(env);
    return s.ok() ? SlurmJobIdentity(*s) : std::string(s.status().message());
  };
  EXPECT_EQ(identity(nullptr, ""), "42");
  EXPECT_EQ(identity("SLURM_STEP_ID", "0"), "42");
  EXPECT_EQ(identity("SLURM_STEP_ID", "1"), "42.1");
  EXPECT_EQ(identity("SLURM_STEPID", "7"), "42.7");
  EXPECT_EQ(identity("SLURM_STEP_ID", "4294967294"), "42");  // the batch step
  EXPECT_EQ(identity("SLURM_STEP_ID", "x1"), "SLURM_STEP_ID=x1 is not a step number");
  EXPECT_EQ(identity("SLURM_STEP_ID", "99999999999"),
            "SLURM_STEP_ID=99999999999 is not a step number");
  EXPECT_NE(DefaultDistFilePath(identity("SLURM_STEP_ID", "0")),
            DefaultDistFilePath(identity("SLURM_STEP_ID", "1")));
}

TEST(SlurmEnvTest, TasksPerNodeSyntax) {
  struct Case {
    std::string text;
    std::vector<int> want;  // empty = error
  };
  const std::vector<Case> cases = {
      {"4", {4}},
      {"2(x3),1", {2, 2, 2, 1}},
      {"1,2(x2)", {1, 2, 2}},
      {"3(x1)", {3}},
      {"", {}},
      {"a", {}},
      {"2(x0)", {}},
      {"2(3)", {}},
      {"2(x3", {}},
      {"0", {}},
      {"-1", {}},
      {"2,,1", {}},
  };
  for (const Case& c : cases) {
    auto got = ParseTasksPerNode(c.text);
    if (c.want.empty()) {
      EXPECT_FALSE(got.ok()) << "'" << c.text << "'";
    } else {
      ASSERT_TRUE(got.ok()) << "'" << c.text << "': " << got.status();
      EXPECT_EQ(*got, c.want) << "'" << c.text << "'";
    }
  }
}

TEST(SlurmEnvTest, CountVisibleDevices) {
  EXPECT_EQ(CountVisibleDevices(""), 0);
  EXPECT_EQ(CountVisibleDevices("NoDevFiles"), 0);
  EXPECT_EQ(CountVisibleDevices("0"), 1);
  EXPECT_EQ(CountVisibleDevices("0,1,2,3"), 4);
  EXPECT_EQ(CountVisibleDevices("GPU-abc,GPU-def"), 2);
}

TEST(SlurmEnvTest, ContradictionsAndMissingVariables) {
  struct Case {
    std::string name;
    std::string var;
    std::string value;  // "<unset>" removes the variable
    std::string error;
  };
  const std::vector<Case> cases = {
      {"no job id", "SLURM_JOB_ID", "<unset>", "SLURM_JOB_ID is unset"},
      {"empty job id", "SLURM_JOB_ID", "", "is empty"},
      {"no tasks", "SLURM_STEP_NUM_TASKS", "<unset>", "SLURM_STEP_NUM_TASKS"},
      {"no procid", "SLURM_PROCID", "<unset>", "SLURM_PROCID"},
      {"bad procid", "SLURM_PROCID", "x", "SLURM_PROCID='x' is not an integer"},
      {"negative procid", "SLURM_PROCID", "-1", "SLURM_PROCID='-1'"},
      {"procid too big", "SLURM_PROCID", "4", "SLURM_PROCID=4 is not below the task count 4"},
      {"zero tasks", "SLURM_STEP_NUM_TASKS", "0", "SLURM_STEP_NUM_TASKS='0'"},
      {"nodeid too big", "SLURM_NODEID", "2", "SLURM_NODEID=2 is not below the node count 2"},
      {"list length", "SLURM_STEP_TASKS_PER_NODE", "2(x3)", "lists 3 nodes but the step has 2"},
      {"list sum", "SLURM_STEP_TASKS_PER_NODE", "2,1", "sums to 3 tasks but the step has 4"},
      {"list garbage", "SLURM_STEP_TASKS_PER_NODE", "two", "bad tasks-per-node entry"},
      {"localid too big", "SLURM_LOCALID", "2", "SLURM_LOCALID=2 is not below the tasks on"},
      {"bad restart", "SLURM_RESTART_COUNT", "-3", "SLURM_RESTART_COUNT"},
  };
  for (const Case& c : cases) {
    EnvMap env = Base();
    if (c.value == "<unset>") {
      env.erase(c.var);
    } else {
      env[c.var] = c.value;
    }
    auto s = ParseSlurmEnv(env);
    ASSERT_FALSE(s.ok()) << c.name;
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(c.error)) << c.name;
    EXPECT_EQ(std::string(s.status().message()).find('\n'), std::string::npos) << c.name;
  }
}

TEST(SlurmEnvTest, UnevenTasksWithoutListIsAnError) {
  EnvMap env = Base();
  env.erase("SLURM_STEP_TASKS_PER_NODE");
  env["SLURM_STEP_NUM_TASKS"] = "3";
  env["SLURM_PROCID"] = "0";
  auto s = ParseSlurmEnv(env);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("do not divide evenly"));
}

TEST(SlurmEnvTest, ProcessEnvironmentSeesRealVariables) {
  ::setenv("DDP_SLURM_ENV_TEST_VAR", "a=b", 1);
  EnvMap env = ProcessEnvironment();
  EXPECT_EQ(env["DDP_SLURM_ENV_TEST_VAR"], "a=b");
}

}  // namespace
}  // namespace ddp
