#include "common/dist_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;

class DistFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/dist_file_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/dist_file.42";
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  DistFileContents Contents(const std::string& job = "42", int64_t gen = 1) {
    auto c = NewDistFileContents(job, gen, "10.0.0.1:5000", 8080);
    EXPECT_TRUE(c.ok());
    return *c;
  }
  void WriteRaw(const std::string& text, mode_t mode = 0600) {
    ::unlink(path_.c_str());
    { std::ofstream(path_) << text; }
    ::chmod(path_.c_str(), mode);
  }
  absl::Status Read(const std::string& job = "42", int64_t gen = 0) {
    return ReadDistFile(path_, {job, gen}).status();
  }

  std::string dir_;
  std::string path_;
};

TEST_F(DistFileTest, PublishThenReadRoundTrips) {
  DistFileContents c = Contents();
  ASSERT_TRUE(PublishDistFile(path_, c).ok());
  struct stat st;
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto got = ReadDistFile(path_, {"42", 1});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->job_id, "42");
  EXPECT_EQ(got->generation, 1);
  EXPECT_EQ(got->nonce, c.nonce);
  EXPECT_EQ(got->token, c.token);
  EXPECT_EQ(got->grpc_address, "10.0.0.1:5000");
  EXPECT_EQ(got->http_port, 8080);
  EXPECT_EQ(got->token.size(), 64u);
  EXPECT_NE(Contents().token, c.token);  // fresh randomness per start
  // Three distinct tokens, one per role.
  EXPECT_EQ(got->view_token, c.view_token);
  EXPECT_EQ(got->control_token, c.control_token);
  EXPECT_EQ(got->view_token.size(), 64u);
  EXPECT_EQ(got->control_token.size(), 64u);
  EXPECT_NE(c.view_token, c.token);
  EXPECT_NE(c.control_token, c.token);
  EXPECT_NE(c.control_token, c.view_token);
}

// A file written before the role tokens existed (one token for everything) still reads: every
// role gets that token, as the coordinator that wrote it accepted it for everything.
TEST_F(DistFileTest, FileWithoutRoleTokensGivesEveryRoleTheOneToken) {
  const std::string token(64, 'a');
  WriteRaw(
      absl::StrCat("slurm-ddp-dist-file v1\njob_id=42\ngeneration=0\nnonce=", std::string(32, 'b'),
                   "\ntoken=", token, "\ngrpc_address=127.0.0.1:5\nhttp_port=0\nend=1\n"));
  auto got = ReadDistFile(path_, {"42", 0});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->token, token);
  EXPECT_EQ(got->view_token, token);
  EXPECT_EQ(got->control_token, token);
  // Contents without role tokens serialize without those lines, and read back the same way.
  DistFileContents c = *got;
  c.view_token.clear();
  c.control_token.clear();
  EXPECT_EQ(SerializeDistFile(c).find("view_token"), std::string::npos);
  EXPECT_EQ(ParseDistFile(SerializeDistFile(c))->control_token, token);
}

TEST_F(DistFileTest, JobIdsTheFileCannotCarryAreRefused) {
  for (const std::string& job :
       {std::string(""), std::string("a\nb"), std::string("a\rb"), std::string("tab\there"),
        std::string("bad\xff"), std::string("cut\xc3"), std::string(257, 'j')}) {
    auto c = NewDistFileContents(job, 0, "127.0.0.1:5", 0);
    EXPECT_TRUE(absl::IsInvalidArgument(c.status())) << job << ": " << c.status();
  }
  for (const std::string& job :
       {std::string("12345"), std::string("caf\xc3\xa9-7"), std::string(256, 'j')}) {
    EXPECT_TRUE(NewDistFileContents(job, 0, "127.0.0.1:5", 0).ok()) << job;
  }
}

TEST_F(DistFileTest, PublishReplacesAnOlderFileAndLeavesNoTempFiles) {
  ASSERT_TRUE(PublishDistFile(path_, Contents("42", 0)).ok());
  ASSERT_TRUE(PublishDistFile(path_, Contents("42", 3)).ok());
  auto got = ReadDistFile(path_, {"42", 3});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->generation, 3);
  std::string ls = dir_ + "/dist_file.42.tmp*";
  EXPECT_NE(std::system(("ls " + ls + " >/dev/null 2>&1").c_str()), 0);
}

TEST_F(DistFileTest, RefusesAdversarialFiles) {
  const std::string good = SerializeDistFile(Contents());
  struct Case {
    std::string name;
    std::string text;
    mode_t mode;
    absl::StatusCode code;
    std::string error;
  };
  std::string truncated = good.substr(0, good.size() - 10);
  std::string no_token = good;
  no_token.erase(no_token.find("token="), 71);
  std::string bad_version = "slurm-ddp-dist-file v9" + good.substr(good.find('\n'));
  std::string bad_view = good;
  bad_view.replace(bad_view.find("view_token=") + 11, 4, "XYZW");
  std::string bad_job = good;
  bad_job.replace(bad_job.find("job_id=42"), 9, "job_id=4\x01");
  const std::vector<Case> cases = {
      {"empty", "", 0600, absl::StatusCode::kInvalidArgument, "is empty"},
      {"truncated", truncated, 0600, absl::StatusCode::kInvalidArgument, "truncated"},
      {"half", good.substr(0, good.size() / 2), 0600, absl::StatusCode::kInvalidArgument, ""},
      {"garbage", "\x01\x02garbage\n", 0600, absl::StatusCode::kInvalidArgument,
       "not a slurm-ddp dist_file"},
      {"torch filestore", std::string("\0\0\0\x08", 4), 0600, absl::StatusCode::kInvalidArgument,
       "not a slurm-ddp dist_file"},
      {"version", bad_version, 0600, absl::StatusCode::kInvalidArgument,
       "unsupported version 'v9'"},
      {"missing key", no_token, 0600, absl::StatusCode::kInvalidArgument, "lacks key 'token'"},
      {"bad view token", bad_view, 0600, absl::StatusCode::kInvalidArgument,
       "malformed view_token"},
      {"control char in job id", bad_job, 0600, absl::StatusCode::kInvalidArgument,
       "control character"},
      {"huge", good + std::string(70 * 1024, 'x'), 0600, absl::StatusCode::kInvalidArgument,
       "too large"},
      {"mode 0644", good, 0644, absl::StatusCode::kPermissionDenied, "mode 0644"},
      {"mode 0640", good, 0640, absl::StatusCode::kPermissionDenied, "must be 0600"},
  };
  for (const Case& c : cases) {
    WriteRaw(c.text, c.mode);
    absl::Status st = Read();
    EXPECT_EQ(st.code(), c.code) << c.name << ": " << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr(c.error)) << c.name;
  }
}

TEST_F(DistFileTest, RefusesMissingFile) {
  absl::Status st = Read();
  EXPECT_TRUE(absl::IsNotFound(st)) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("does not exist"));
}

TEST_F(DistFileTest, RefusesSymlinkEvenToAGoodFile) {
  std::string real = dir_ + "/real";
  ASSERT_TRUE(PublishDistFile(real, Contents()).ok());
  ASSERT_EQ(::symlink(real.c_str(), path_.c_str()), 0);
  absl::Status st = Read();
  EXPECT_TRUE(absl::IsPermissionDenied(st)) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("symlink"));
}

TEST_F(DistFileTest, RefusesDirectory) {
  ASSERT_EQ(::mkdir(path_.c_str(), 0700), 0);
  absl::Status st = Read();
  EXPECT_TRUE(absl::IsPermissionDenied(st)) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("not a regular file"));
}

TEST_F(DistFileTest, RefusesForeignJobAndStaleGeneration) {
  ASSERT_TRUE(PublishDistFile(path_, Contents("41", 2)).ok());
  absl::Status st = Read("42", 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("belongs to job 41, not to job 42"));
  EXPECT_TRUE(Read("", 0).ok());  // operator tools accept any job
  st = Read("41", 3);
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("stale: generation 2 < expected 3"));
  EXPECT_TRUE(Read("41", 2).ok());
}

TEST_F(DistFileTest, WaitSeesAFileThatAppearsLater) {
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    ASSERT_TRUE(PublishDistFile(path_, Contents()).ok());
  });
  auto got = WaitForDistFile(path_, {"42", 0}, absl::Seconds(5));
  writer.join();
  ASSERT_TRUE(got.ok()) << got.status();
}

TEST_F(DistFileTest, WaitGivesUpAtTheDeadlineWithTheReason) {
  absl::Time start = absl::Now();
  auto got = WaitForDistFile(path_, {"42", 0}, absl::Milliseconds(300));
  absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("does not exist: gave up after"));
  EXPECT_GE(took, absl::Milliseconds(290));
  EXPECT_LT(took, absl::Seconds(2));
}

TEST_F(DistFileTest, WaitFailsFastOnPermissionProblems) {
  WriteRaw(SerializeDistFile(Contents()), 0644);
  absl::Time start = absl::Now();
  auto got = WaitForDistFile(path_, {"42", 0}, absl::Seconds(10));
  EXPECT_TRUE(absl::IsPermissionDenied(got.status())) << got.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

TEST_F(DistFileTest, ReaderNeverSeesAPartialFileWhileAWriterRaces) {
  ASSERT_TRUE(PublishDistFile(path_, Contents("42", 0)).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> published{0};
  std::thread writer([&] {
    for (int gen = 1; !stop.load(); ++gen) {
      ASSERT_TRUE(PublishDistFile(path_, Contents("42", gen)).ok());
      published.fetch_add(1);
    }
  });
  int reads = 0;
  const absl::Time end = absl::Now() + absl::Milliseconds(500);
  while (absl::Now() < end || published.load() < 5) {
    auto got = ReadDistFile(path_, {"42", 0});
    ASSERT_TRUE(got.ok()) << "reader saw a partial file: " << got.status();
    ++reads;
  }
  stop = true;
  writer.join();
  EXPECT_GT(reads, 0);
  EXPECT_GE(published.load(), 5);
}

TEST(DistFileNamesTest, DefaultsAndLocalJobId) {
  EXPECT_EQ(DefaultDistFilePath("123"), "dist_file.123");
  EXPECT_EQ(LocalJobId(), absl::StrCat("local-", ::getpid()));
}

TEST(DistFileParseTest, SerializeParseRoundTrip) {
  auto c = NewDistFileContents("job", 5, "[::1]:7", 0);
  ASSERT_TRUE(c.ok());
  auto p = ParseDistFile(SerializeDistFile(*c));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->grpc_address, "[::1]:7");
  EXPECT_FALSE(ParseDistFile(SerializeDistFile(*c) + "extra=1\n").ok());
}

TEST(DistFileParseTest, IncarnationRoundTripsAndIsOptional) {
  auto c = NewDistFileContents("job", 2, "[::1]:7", 0);
  ASSERT_TRUE(c.ok());
  // A first coordinator's file has no incarnation line: readers that predate it see no change.
  EXPECT_EQ(SerializeDistFile(*c).find("incarnation"), std::string::npos);
  EXPECT_EQ(ParseDistFile(SerializeDistFile(*c))->incarnation, 0);
  c->incarnation = 3;
  const std::string text = SerializeDistFile(*c);
  EXPECT_NE(text.find("\nincarnation=3\n"), std::string::npos);
  auto p = ParseDistFile(text);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->incarnation, 3);
  EXPECT_EQ(p->nonce, c->nonce);
  EXPECT_EQ(p->generation, 2);
  // An old reader ignores keys it does not know: the same text without the line is still a
  // whole file of the same job (what such a reader effectively parses).
  std::string old_view = text;
  old_view.erase(old_view.find("incarnation=3\n"), std::string("incarnation=3\n").size());
  EXPECT_TRUE(ParseDistFile(old_view).ok());
  for (const char* bad : {"incarnation=-1", "incarnation=x", "incarnation="}) {
    std::string t = text;
    t.replace(t.find("incarnation=3"), std::string("incarnation=3").size(), bad);
    EXPECT_FALSE(ParseDistFile(t).ok()) << bad;
  }
}

// A file that a standby's takeover published names the epoch and the coordinator's node; a file
// without them (every file of epoch 0, and an older coordinator's) reads as epoch 0 on node 0.
TEST_F(DistFileTest, EpochAndCoordinatorNodeRoundTripAndAreOptional) {
  DistFileContents c = Contents();
  const std::string first = SerializeDistFile(c);
  EXPECT_EQ(first.find("epoch"), std::string::npos);
  EXPECT_EQ(first.find("coordinator_node"), std::string::npos);
  // Epoch 0 leaves both out, whatever the node says.
  c.coordinator_node = 2;
  EXPECT_EQ(SerializeDistFile(c), first);
  ASSERT_TRUE(PublishDistFile(path_, c).ok());
  auto got = ReadDistFile(path_, {"42", 1});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->epoch, 0);
  EXPECT_EQ(got->coordinator_node, 0);

  c.epoch = 3;
  c.coordinator_node = 2;
  c.incarnation = 1;
  const std::string text = SerializeDistFile(c);
  EXPECT_NE(text.find("\nepoch=3\ncoordinator_node=2\n"), std::string::npos) << text;
  ASSERT_TRUE(PublishDistFile(path_, c).ok());
  got = ReadDistFile(path_, {"42", 1});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->epoch, 3);
  EXPECT_EQ(got->coordinator_node, 2);
  EXPECT_EQ(got->incarnation, 1);
  EXPECT_EQ(got->nonce, c.nonce);
  EXPECT_EQ(got->token, c.token);
  EXPECT_EQ(got->grpc_address, c.grpc_address);

  // Either key alone parses (the other takes its default).
  std::string no_node = text;
  no_node.erase(no_node.find("coordinator_node=2\n"), std::string("coordinator_node=2\n").size());
  auto p = ParseDistFile(no_node);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->epoch, 3);
  EXPECT_EQ(p->coordinator_node, 0);
  std::string no_epoch = text;
  no_epoch.erase(no_epoch.find("epoch=3\n"), std::string("epoch=3\n").size());
  p = ParseDistFile(no_epoch);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->epoch, 0);
  EXPECT_EQ(p->coordinator_node, 2);

  // Bad values are refused, naming the key.
  struct Bad {
    std::string line;
    std::string want;
  };
  for (const Bad& bad : std::vector<Bad>{{"epoch=-1", "bad epoch"},
                                         {"epoch=x", "bad epoch"},
                                         {"epoch=", "bad epoch"},
                                         {"epoch=1.5", "bad epoch"},
                                         {"epoch=99999999999999999999", "bad epoch"},
                                         {"coordinator_node=-1", "bad coordinator_node"},
                                         {"coordinator_node=two", "bad coordinator_node"},
                                         {"coordinator_node=", "bad coordinator_node"},
                                         {"coordinator_node=4294967296", "bad coordinator_node"}}) {
    std::string t = text;
    const std::string key = bad.line.substr(0, bad.line.find('=') + 1);
    const size_t at = t.find("\n" + key) + 1;
    t.replace(at, t.find('\n', at) - at, bad.line);
    auto parsed = ParseDistFile(t);
    EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << bad.line << ": " << parsed.status();
    EXPECT_THAT(parsed.status().message(), HasSubstr(bad.want)) << bad.line;
    WriteRaw(t);
    absl::Status st = Read();
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << bad.line << ": " << st;
  }
  // A repeated key is refused too.
  std::string twice = text;
  twice.insert(twice.find("epoch=3\n"), "epoch=4\n");
  EXPECT_TRUE(absl::IsInvalidArgument(ParseDistFile(twice).status()));
}

}  // namespace
}  // namespace ddp
