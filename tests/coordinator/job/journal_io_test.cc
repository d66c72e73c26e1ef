// The journal against real I/O failures (coordinator/job/journal.h), made by an LD_PRELOAD shim
// (journal_io_shim.c) on the journal's own descriptors: an fdatasync that fails with EIO fails
// the journal loudly (a log line, an event, the status's `journal` field, the file removed,
// later records dropped), and a write that does not return stops neither the job's replies nor
// its ticks; it shows as stuck, and the records land once the write returns.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "coordinator/clock.h"
#include "coordinator/job/job.h"
#include "coordinator/job/journal.h"
#include "gtest/gtest.h"
#include "tests/coordinator/job/journal_fixture.h"

namespace ddp {
namespace {

template <typename F>
F* Shim(const char* name) {
  return reinterpret_cast<F*>(dlsym(RTLD_DEFAULT, name));
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class JournalIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fail_after_ = Shim<void(int)>("ddp_shim_fail_fdatasync_after");
    block_ = Shim<void(int)>("ddp_shim_block_writes");
    blocked_now_ = Shim<int()>("ddp_shim_writes_blocked_now");
    if (fail_after_ == nullptr || block_ == nullptr || blocked_now_ == nullptr) {
      GTEST_SKIP() << "the I/O shim is not preloaded (LD_PRELOAD=libjournal_io_shim.so)";
    }
    fail_after_(-1);
    block_(0);
    path_ =
        absl::StrCat(::testing::TempDir(), "/journal_io_test_", getpid(), "_",
                     ::testing::UnitTest::GetInstance()->current_test_info()->name(), ".journal");
  }
  void TearDown() override {
    if (block_ != nullptr) block_(0);
    if (fail_after_ != nullptr) fail_after_(-1);
    ::unlink(path_.c_str());
  }

  JobConfig Config(JournalSink* sink) {
    JobConfig c;
    c.job_id = "job-7";
    c.generation = 2;
    c.world_size = 4;
    c.heartbeat_timeout = absl::Seconds(10);
    c.journal = sink;
    c.log = [this](const std::string& line) { Log(line); };
    return c;
  }
  void Log(const std::string& line) {
    absl::MutexLock lock(&mu_);
    lines_.push_back(line);
  }
  bool Logged(const std::string& part) {
    absl::MutexLock lock(&mu_);
    for (const std::string& l : lines_) {
      if (l.find(part) != std::string::npos) return true;
    }
    return false;
  }
  static bool HasEvent(const JobStatus& s, const std::string& part) {
    for (const std::string& e : s.events) {
      if (e.find(part) != std::string::npos) return true;
    }
    return false;
  }

  void (*fail_after_)(int) = nullptr;
  void (*block_)(int) = nullptr;
  int (*blocked_now_)() = nullptr;
  std::string path_;
  FakeClock clock_;
  absl::Mutex mu_;
  std::vector<std::string> lines_;
};

TEST_F(JournalIoTest, AFailedFdatasyncFailsTheJournalLoudly) {
  auto journal = Journal::Create(path_, testing::JournalTestHeader(),
                                 [this](const std::string& line) { Log(line); });
  ASSERT_TRUE(journal.ok()) << journal.status();
  Job job(Config(journal->get()), &clock_);
  fail_after_(0);  // the next fdatasync of the journal fails with EIO
  job.Register(testing::JournalWho(0, 0, 100), [](absl::StatusOr<RankAssignment>) {});
  const absl::Status synced = (*journal)->Sync(absl::Seconds(10));
  ASSERT_FALSE(synced.ok());
  EXPECT_NE(synced.message().find("fdatasync"), std::string::npos) << synced;
  // Visible: the health, a log line, and (at the next tick) an event and the status field.
  const JournalHealth h = (*journal)->Health();
  EXPECT_EQ(h.state, JournalCondition::kFailed);
  EXPECT_NE(h.error.find("Input/output error"), std::string::npos) << h.error;
  EXPECT_TRUE(Logged("failed (fdatasync")) << "no log line";
  job.Tick();
  const JobStatus s = job.Status();
  EXPECT_EQ(s.journal.state, JournalCondition::kFailed);
  EXPECT_TRUE(HasEvent(s, "journal failed: fdatasync")) << "no event";
  EXPECT_NE(
      ToJson(s).find(R"("journal":{"state":"failed","error":"fdatasync: Input/output error")"),
      std::string::npos)
      << ToJson(s);
  // A stale journal would restore an old state: it is gone, and later records are dropped.
  struct stat sb;
  EXPECT_NE(::stat(path_.c_str(), &sb), 0) << "the failed journal is still there";
  job.Register(testing::JournalWho(0, 1, 101), [](absl::StatusOr<RankAssignment>) {});
  EXPECT_GE((*journal)->Health().dropped, 1);
  fail_after_(-1);
}

TEST_F(JournalIoTest, AStuckWriteStopsNeitherRepliesNorTicks) {
  auto journal = Journal::Create(path_, testing::JournalTestHeader(), nullptr);
  ASSERT_TRUE(journal.ok()) << journal.status();
  (*journal)->set_stuck_after(absl::Milliseconds(300));
  Job job(Config(journal->get()), &clock_);
  block_(1);  // every write to the journal now waits until released
  int assigned = 0;
  const absl::Time start = absl::Now();
  for (int i = 0; i < 4; ++i) {
    job.Register(testing::JournalWho(i / 2, i % 2, 100 + i),
                 [&assigned](absl::StatusOr<RankAssignment> a) { assigned += a.ok() ? 1 : 0; });
  }
  EXPECT_EQ(assigned, 4) << "the rendezvous completes while the journal's write hangs";
  // The writer thread is stuck in write(); the job goes on: heartbeats, ticks, status.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (blocked_now_() == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_EQ(blocked_now_(), 1) << "the journal never wrote";
  ProgressReport p;
  for (int i = 0; i < 40; ++i) {
    p.step = i;
    clock_.Advance(absl::Milliseconds(500));
    for (int r = 0; r < 4; ++r) ASSERT_TRUE(job.Heartbeat(r, 100 + r, p).ok());
    job.Tick();
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "the job waited for the stuck journal";
  ASSERT_EQ(blocked_now_(), 1);
  JobStatus s = job.Status();
  EXPECT_EQ(s.state, JobState::kRunning);
  EXPECT_EQ(s.journal.state, JournalCondition::kStuck);
  EXPECT_GT(s.journal.pending, 0);
  EXPECT_TRUE(HasEvent(s, "journal stuck")) << "no event";
  // Released: the records land, in order, and the journal is healthy again.
  block_(0);
  ASSERT_TRUE((*journal)->Sync(absl::Seconds(10)).ok());
  job.Tick();
  s = job.Status();
  EXPECT_EQ(s.journal.state, JournalCondition::kOk);
  EXPECT_EQ(s.journal.pending, 0);
  EXPECT_TRUE(HasEvent(s, "journal writes again"));
  auto read = ParseJournal(ReadBytes(path_));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->registered.size(), 4u);
  ASSERT_TRUE(read->table.has_value());
  EXPECT_EQ(read->table->size(), 4);
}

}  // namespace
}  // namespace ddp
