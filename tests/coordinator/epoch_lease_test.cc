#include "coordinator/epoch_lease.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/dist_file.h"
#include "common/file_util.h"
#include "common/job_result.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kPeriod = absl::Milliseconds(100);
// What a read of the dist_file may take on a loaded machine, on top of the period.
constexpr absl::Duration kSlack = absl::Milliseconds(50);

void Sleep(absl::Duration d) { std::this_thread::sleep_for(absl::ToChronoNanoseconds(d)); }

class EpochLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/epoch_lease_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/dist_file.42";
    auto c = NewDistFileContents("42", 1, "10.0.0.1:5000", 0);
    ASSERT_TRUE(c.ok()) << c.status();
    mine_ = *c;
    ASSERT_TRUE(PublishDistFile(path_, mine_).ok());
  }
  void TearDown() override {
    lease_.reset();
    std::system(("rm -rf '" + dir_ + "'").c_str());
  }

  // The lease of the coordinator that published `mine_`, counting its on_fenced calls.
  EpochLease& Start(bool wait_for_serve_from = false) {
    EpochLease::Options o;
    o.dist_file = path_;
    o.mine = mine_;
    o.period = kPeriod;
    o.wait_for_serve_from = wait_for_serve_from;
    o.on_fenced = [this](const Supersession& by) {
      absl::MutexLock lock(&mu_);
      ++fenced_calls_;
      newer_ = by;
    };
    lease_ = std::make_unique<EpochLease>(std::move(o));
    return *lease_;
  }
  // The same job, generation and nonce, taken over: epoch `epoch` on node `node`.
  DistFileContents TakenOver(int64_t epoch, int node) const {
    DistFileContents c = mine_;
    c.epoch = epoch;
    c.coordinator_node = node;
    c.grpc_address = "10.0.0.2:6000";
    return c;
  }
  int fenced_calls() {
    absl::MutexLock lock(&mu_);
    return fenced_calls_;
  }
  Supersession newer() {
    absl::MutexLock lock(&mu_);
    return newer_;
  }
  // Current() keeps returning OK for a few periods (the background reads included).
  void ExpectServesFor(EpochLease& lease, int periods) {
    const absl::Time until = absl::Now() + kPeriod * periods;
    while (absl::Now() < until) {
      absl::Status st = lease.Current();
      ASSERT_TRUE(st.ok()) << st;
      Sleep(kPeriod / 7);
    }
  }

  std::string dir_;
  std::string path_;
  DistFileContents mine_;
  std::unique_ptr<EpochLease> lease_;
  absl::Mutex mu_;
  int fenced_calls_ = 0;
  Supersession newer_;
};

TEST_F(EpochLeaseTest, ServesWhileTheFileNamesItsEpoch) {
  EpochLease& lease = Start();
  EXPECT_EQ(lease.period(), kPeriod);
  EXPECT_EQ(lease.last_accepted(), absl::InfinitePast());
  const absl::Time before = absl::Now();
  ASSERT_TRUE(lease.Current().ok());
  const absl::Time first = lease.last_accepted();
  EXPECT_GE(first, before);
  EXPECT_LE(first, absl::Now());
  ExpectServesFor(lease, 3);
  // The coordinator of the same epoch republishing (a newer incarnation) fences nothing.
  DistFileContents restarted = mine_;
  restarted.incarnation = 1;
  ASSERT_TRUE(PublishDistFile(path_, restarted).ok());
  ExpectServesFor(lease, 3);
  EXPECT_GT(lease.last_accepted(), first);
  EXPECT_FALSE(lease.fenced());
  EXPECT_EQ(fenced_calls(), 0);
}

// A standby publishes epoch 1: every call later than `period` after that publish is refused,
// on_fenced is called once with the new file, and the lease never comes back.
TEST_F(EpochLeaseTest, ANewerEpochOfTheSameJobFencesWithinThePeriod) {
  EpochLease& lease = Start();
  ASSERT_TRUE(lease.Current().ok());
  ASSERT_TRUE(PublishDistFile(path_, TakenOver(1, 1)).ok());
  Sleep(kPeriod + kSlack);
  absl::Status st = lease.Current();
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("fenced"));
  EXPECT_TRUE(lease.fenced());
  const absl::Time last = lease.last_accepted();
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(absl::IsUnavailable(lease.Current()));
  Sleep(kPeriod * 3);
  EXPECT_EQ(fenced_calls(), 1);
  EXPECT_EQ(newer().epoch, 1);
  EXPECT_EQ(newer().why, "the dist_file names coordinator epoch 1 (node 1, 10.0.0.2:6000)");
  // Once fenced, always fenced: not even the old epoch's file brings it back.
  ASSERT_TRUE(PublishDistFile(path_, mine_).ok());
  Sleep(kPeriod * 2);
  EXPECT_TRUE(absl::IsUnavailable(lease.Current()));
  EXPECT_EQ(lease.last_accepted(), last);
  EXPECT_EQ(fenced_calls(), 1);
}

// The background read fences a coordinator that gets no calls at all.
TEST_F(EpochLeaseTest, FencesWithoutAnyCall) {
  Start();
  ASSERT_TRUE(PublishDistFile(path_, TakenOver(3, 2)).ok());
  const absl::Time deadline = absl::Now() + kPeriod + kSlack;
  while (fenced_calls() == 0 && absl::Now() < deadline) Sleep(absl::Milliseconds(5));
  EXPECT_EQ(fenced_calls(), 1);
  EXPECT_TRUE(lease_->fenced());
  EXPECT_EQ(newer().epoch, 3);
  EXPECT_EQ(lease_->last_accepted(), absl::InfinitePast());
}

// A coordinator started while the file already names a newer epoch never serves.
TEST_F(EpochLeaseTest, FencedFromTheStart) {
  ASSERT_TRUE(PublishDistFile(path_, TakenOver(1, 1)).ok());
  EpochLease& lease = Start();
  EXPECT_TRUE(lease.fenced());
  EXPECT_EQ(fenced_calls(), 1);
  EXPECT_TRUE(absl::IsUnavailable(lease.Current()));
  EXPECT_EQ(lease.last_accepted(), absl::InfinitePast());
}

// Only a newer epoch of this very job fences: another coordinator start (nonce), another job,
// another generation, an older or equal epoch, a missing or unreadable file fence nothing.
TEST_F(EpochLeaseTest, OnlyANewerEpochOfTheSameJobFences) {
  mine_.epoch = 2;
  mine_.coordinator_node = 1;
  ASSERT_TRUE(PublishDistFile(path_, mine_).ok());
  EpochLease& lease = Start();

  auto other_nonce = NewDistFileContents("42", 1, "10.0.0.3:7000", 0);
  ASSERT_TRUE(other_nonce.ok());
  other_nonce->epoch = 9;
  ASSERT_TRUE(PublishDistFile(path_, *other_nonce).ok());
  ExpectServesFor(lease, 3);

  DistFileContents other_job = TakenOver(9, 0);
  other_job.job_id = "43";
  ASSERT_TRUE(PublishDistFile(path_, other_job).ok());
  ExpectServesFor(lease, 3);

  DistFileContents other_generation = TakenOver(9, 0);
  other_generation.generation = 2;
  ASSERT_TRUE(PublishDistFile(path_, other_generation).ok());
  ExpectServesFor(lease, 3);

  ASSERT_TRUE(PublishDistFile(path_, TakenOver(1, 0)).ok());
  ExpectServesFor(lease, 3);
  ASSERT_TRUE(PublishDistFile(path_, TakenOver(2, 0)).ok());
  ExpectServesFor(lease, 3);

  ASSERT_EQ(::unlink(path_.c_str()), 0);
  ExpectServesFor(lease, 3);
  { std::ofstream(path_) << "garbage\n"; }
  ExpectServesFor(lease, 3);

  EXPECT_FALSE(lease.fenced());
  EXPECT_EQ(fenced_calls(), 0);
  // And the real thing still fences.
  ASSERT_TRUE(PublishDistFile(path_, TakenOver(3, 2)).ok());
  Sleep(kPeriod + kSlack);
  EXPECT_TRUE(absl::IsUnavailable(lease.Current()));
  EXPECT_EQ(fenced_calls(), 1);
}

// The job's result file, as a coordinator of `epoch` writes it at the job's end.
void WriteResult(const std::string& dist_file, const std::string& job_id, int64_t generation,
                 int64_t epoch) {
  JobResult r;
  r.job_id = job_id;
  r.generation = generation;
  r.state = "SUCCEEDED";
  r.exit_code = 0;
  r.epoch = epoch;
  ASSERT_TRUE(WriteFileAtomically(JobResultPath(dist_file), FormatJobResult(r), 0600).ok());
}

// The job ended under epoch 1 while this epoch-0 coordinator did not run: epoch 1 wrote the
// result and removed the dist_file. The result fences it; the reason names epoch 1's end.
TEST_F(EpochLeaseTest, TheJobsEndUnderANewerEpochFences) {
  EpochLease& lease = Start();
  ASSERT_TRUE(lease.Current().ok());
  WriteResult(path_, mine_.job_id, mine_.generation, 1);
  ExpectServesFor(lease, 2);  // the dist_file still names this coordinator: it serves
  ASSERT_EQ(::unlink(path_.c_str()), 0);
  Sleep(kPeriod + kSlack);
  EXPECT_TRUE(absl::IsUnavailable(lease.Current()));
  EXPECT_EQ(fenced_calls(), 1);
  EXPECT_EQ(newer().epoch, 1);
  EXPECT_EQ(newer().why,
            "the job ended under coordinator epoch 1 (SUCCEEDED, " + JobResultPath(path_) + ")");
}

// A result fences only when it is this job's and generation's and a newer epoch wrote it: its
// own epoch's (or one without an epoch, from an older writer), another job's or generation's
// does not; nor does a dist_file replaced by another job's while there is no such result.
TEST_F(EpochLeaseTest, OnlyANewerEpochsResultOfTheSameJobFences) {
  mine_.epoch = 1;
  mine_.coordinator_node = 1;
  ASSERT_TRUE(PublishDistFile(path_, mine_).ok());
  EpochLease& lease = Start();
  ASSERT_EQ(::unlink(path_.c_str()), 0);
  ExpectServesFor(lease, 2);
  WriteResult(path_, mine_.job_id, mine_.generation, 1);
  ExpectServesFor(lease, 2);
  WriteResult(path_, mine_.job_id, mine_.generation, -1);  // no epoch= line
  ExpectServesFor(lease, 2);
  WriteResult(path_, "43", mine_.generation, 5);
  ExpectServesFor(lease, 2);
  WriteResult(path_, mine_.job_id, mine_.generation + 1, 5);
  ExpectServesFor(lease, 2);
  DistFileContents other_job = TakenOver(9, 0);
  other_job.job_id = "43";
  ASSERT_TRUE(PublishDistFile(path_, other_job).ok());
  ExpectServesFor(lease, 2);
  EXPECT_EQ(fenced_calls(), 0);
  // Another job's dist_file at the path, and this job's result of epoch 2: fenced.
  WriteResult(path_, mine_.job_id, mine_.generation, 2);
  Sleep(kPeriod + kSlack);
  EXPECT_TRUE(absl::IsUnavailable(lease.Current()));
  EXPECT_EQ(fenced_calls(), 1);
  EXPECT_EQ(newer().epoch, 2);
}

// A coordinator that took over accepts nothing until ServeFrom's time, then serves.
TEST_F(EpochLeaseTest, WaitForServeFromRefusesUntilThen) {
  mine_.epoch = 1;
  mine_.coordinator_node = 1;
  ASSERT_TRUE(PublishDistFile(path_, mine_).ok());
  EpochLease& lease = Start(/*wait_for_serve_from=*/true);
  Sleep(kPeriod * 2);
  absl::Status st = lease.Current();
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("does not serve yet"));
  EXPECT_FALSE(lease.fenced());

  const absl::Time serve_from = absl::Now() + absl::Milliseconds(300);
  lease.ServeFrom(serve_from);
  EXPECT_TRUE(absl::IsUnavailable(lease.Current()));
  EXPECT_EQ(lease.last_accepted(), absl::InfinitePast());
  Sleep(serve_from - absl::Now() + absl::Milliseconds(10));
  st = lease.Current();
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_GE(lease.last_accepted(), serve_from);
  const absl::Time first = lease.last_accepted();
  Sleep(absl::Milliseconds(5));
  ASSERT_TRUE(lease.Current().ok());
  EXPECT_GT(lease.last_accepted(), first);
  EXPECT_EQ(fenced_calls(), 0);
}

}  // namespace
}  // namespace ddp
