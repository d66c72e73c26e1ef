// Run identities, checkpoint file names and the run manifest (table-driven).
#include "trainer/checkpoint/checkpoint_run.h"

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ddp {
namespace {

TEST(RunIdTest, FreshIdsAreEightHexDigitsAndDiffer) {
  std::set<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<std::string> id = NewRunId();
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_TRUE(IsRunId(*id)) << *id;
    seen.insert(*id);
  }
  EXPECT_EQ(seen.size(), 50u);
  for (const char* bad : {"", "0123abc", "0123abcde", "0123ABCD", "0123abcg", "../../x"}) {
    EXPECT_FALSE(IsRunId(bad)) << bad;
  }
}

TEST(CheckpointFileNameTest, Table) {
  EXPECT_EQ(CheckpointFileName("0123abcd", 32), "ckpt-0123abcd-0000000032.pt");
  struct Case {
    std::string name;
    bool parses;
    std::string run_id;
    int64_t step;
  };
  const std::vector<Case> cases = {
      {"ckpt-0123abcd-0000000032.pt", true, "0123abcd", 32},
      {"ckpt-0000000064.pt", true, "", 64},  // a file of the format without run identities
      {"ckpt-0123abcd-12345678901.pt", true, "0123abcd", 12345678901},
      {"ckpt-0123abcd-.pt", false, "", 0},
      {"ckpt-0123ABCD-0000000032.pt", false, "", 0},
      {"ckpt-0123abcd-00000x0032.pt", false, "", 0},
      {"ckpt-0123abcd-0000000032.pt.tmp.1.2.3.h", false, "", 0},
      {"ckpt--0000000032.pt", false, "", 0},
      {"ckpt-+5.pt", false, "", 0},
      {"final.pt", false, "", 0},
      {"ckpt-.pt", false, "", 0},
  };
  for (const Case& c : cases) {
    const auto info = ParseCheckpointFileName(c.name);
    ASSERT_EQ(info.has_value(), c.parses) << c.name;
    if (!info) continue;
    EXPECT_EQ(info->run_id, c.run_id) << c.name;
    EXPECT_EQ(info->step, c.step) << c.name;
  }
}

TEST(RunManifestTest, RoundTrip) {
  for (const RunManifest& m :
       {RunManifest{"0123abcd", -1, -1}, RunManifest{"ffffffff", 90, 4096}}) {
    absl::StatusOr<RunManifest> back = ParseRunManifest(SerializeRunManifest(m));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->run_id, m.run_id);
    EXPECT_EQ(back->finished_epoch, m.finished_epoch);
    EXPECT_EQ(back->finished_step, m.finished_step);
    EXPECT_EQ(back->finished(), m.finished_step >= 0);
  }
  EXPECT_EQ(SerializeRunManifest({"0123abcd", 2, 32}),
            "slurm-ddp-run v1\nrun_id=0123abcd\nfinished_epoch=2\nfinished_step=32\nend=1\n");
}

TEST(RunManifestTest, RejectsMalformedText) {
  const std::string good = SerializeRunManifest({"0123abcd", 2, 32});
  for (const std::string& text : std::vector<std::string>{
           "",
           "slurm-ddp-run v2\nrun_id=0123abcd\nfinished_epoch=2\nfinished_step=32\nend=1\n",
           "slurm-ddp-run v1\nrun_id=0123abcd\nfinished_epoch=2\nfinished_step=32\n",
           "slurm-ddp-run v1\nrun_id=nothex!!\nfinished_epoch=2\nfinished_step=32\nend=1\n",
           "slurm-ddp-run v1\nrun_id=0123abcd\nfinished_epoch=x\nfinished_step=32\nend=1\n",
           "slurm-ddp-run v1\nrun_id=0123abcd\nfinished_epoch=2\nfinished_step=-7\nend=1\n",
           "slurm-ddp-run v1\nrun_id=0123abcd\nrun_id=0123abcd\nend=1\n",
           "slurm-ddp-run v1\nrun_id=0123abcd\nfinished_epoch=2\nfinished_step=32\nend=1\nx=1\n",
           "slurm-ddp-run v1\ngarbage\n",
           good.substr(0, good.size() / 2),
       }) {
    EXPECT_FALSE(ParseRunManifest(text).ok()) << text;
  }
}

}  // namespace
}  // namespace ddp
