// The journal (coordinator/job/journal.h) against real files: every record type round-trips and
// restores a Job whose state equals the live one; a torn tail is dropped, a corrupt record
// elsewhere or another job's journal refused; appends from many threads share fsyncs.
#include "coordinator/job/journal.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"
#include "coordinator/clock.h"
#include "coordinator/job/job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/job/journal_fixture.h"

namespace ddp {
namespace {

WorkerIdentity Who(int node, int local, int pid) { return testing::JournalWho(node, local, pid); }

JournalHeader Header() { return testing::JournalTestHeader(); }

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

class JournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = absl::StrCat(::testing::TempDir(), "/journal_test_", getpid(), "_",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { ::unlink(path_.c_str()); }

  JobConfig Config(JournalSink* sink) {
    JobConfig c;
    c.job_id = "job-7";
    c.generation = 2;
    c.nonce = "nonce";
    c.world_size = 4;
    c.journal = sink;
    return c;
  }

  // A job of 4 workers on 2 nodes driven through every journaled change; returns it live.
  std::unique_ptr<Job> DriveJob(JournalSink* sink) {
    auto job = std::make_unique<Job>(Config(sink), &clock_);
    for (int i = 0; i < 4; ++i) {
      job->Register(Who(i / 2, i % 2, 100 + i), [](absl::StatusOr<RankAssignment>) {});
    }
    ShardRequest q;
    q.epoch = 0;
    q.dataset_size = 1000;
    q.seed = 5;
    for (int r = 0; r < 4; ++r) EXPECT_TRUE(job->GetShard(r, 100 + r, q).ok());
    EXPECT_TRUE(job->CommitCheckpoint(0, 100, {0, 12, 480, "/ckpt/step12.pt"}).ok());
    EXPECT_TRUE(job->Stop(/*graceful=*/true, "operator wants it").ok());
    return job;
  }

  // Writes a journal of a job in which `workers` of its 4 workers registered (the job then ends
  // as a coordinator killed would leave it: nothing more is appended).
  void RegisterInJournal(int workers) {
    auto journal = Journal::Create(path_, Header(), nullptr);
    ASSERT_TRUE(journal.ok());
    Job job(Config(journal->get()), &clock_);
    for (int i = 0; i < workers; ++i) {
      job.Register(Who(i / 2, i % 2, 100 + i), [](absl::StatusOr<RankAssignment>) {});
    }
  }

  std::string path_;
  FakeClock clock_;
};

TEST_F(JournalTest, EveryRecordTypeRoundTripsAndRestoresTheLiveState) {
  // The live job reads its journal's health in Status(): the journal outlives it.
  std::unique_ptr<Journal> live_journal;
  std::unique_ptr<Job> live;
  {
    auto journal = Journal::Create(path_, Header(), nullptr);
    ASSERT_TRUE(journal.ok()) << journal.status();
    live_journal = *std::move(journal);
    live = DriveJob(live_journal.get());
    ASSERT_TRUE(live_journal->Sync().ok());
  }
  struct stat sb;
  ASSERT_EQ(::stat(path_.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0600u);

  JournalState state;
  auto resumed = Journal::Resume(path_, Header(), nullptr, &state);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(state.header.job_id, "job-7");
  EXPECT_EQ(state.header.token, "tw");
  EXPECT_EQ(state.header.view_token, "tv");
  EXPECT_EQ(state.header.control_token, "tc");
  EXPECT_EQ(state.header.world_size, 4);
  EXPECT_EQ(state.incarnation, 1);
  EXPECT_EQ(state.registered.size(), 4u);
  ASSERT_TRUE(state.table.has_value());
  EXPECT_EQ(state.table->size(), 4);
  EXPECT_EQ(state.table->ranks[3].pid, 103);
  ASSERT_TRUE(state.checkpoint.has_value());
  EXPECT_EQ(state.checkpoint->step, 12);
  EXPECT_EQ(state.checkpoint->path, "/ckpt/step12.pt");
  ASSERT_EQ(state.epochs.count(0), 1u);
  EXPECT_EQ(state.epochs.at(0).dataset_size, 1000);
  EXPECT_EQ(state.stop_reason.value_or(""), "operator wants it");
  EXPECT_EQ(state.torn_bytes, 0);

  Job restored(Config(resumed->get()), &clock_);
  ASSERT_TRUE(restored.Restore(state).ok());
  const JobStatus a = live->Status();
  const JobStatus b = restored.Status();
  EXPECT_EQ(b.state, a.state);  // STOPPING
  EXPECT_EQ(b.registered, a.registered);
  EXPECT_EQ(b.num_nodes, a.num_nodes);
  EXPECT_EQ(b.membership_generation, a.membership_generation);
  EXPECT_EQ(b.checkpoint_step, a.checkpoint_step);
  EXPECT_EQ(b.checkpoint_path, a.checkpoint_path);
  EXPECT_EQ(b.stop_reason, a.stop_reason);
  ASSERT_EQ(b.ranks.size(), a.ranks.size());
  for (size_t r = 0; r < a.ranks.size(); ++r) EXPECT_EQ(b.ranks[r].host, a.ranks[r].host);
  // Known ranks re-attach with a heartbeat; the agreed epoch is kept; strangers are refused.
  ProgressReport p;
  p.step = 13;
  auto beat = restored.Heartbeat(2, 102, p);
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_EQ(beat->command, Command::kCheckpointAndStop);
  EXPECT_FALSE(restored.Heartbeat(2, 999, p).ok());
  ShardRequest other;
  other.epoch = 0;
  other.dataset_size = 999;
  EXPECT_FALSE(restored.GetShard(1, 101, other).ok());
}

TEST_F(JournalTest, ARestoreWhileRegisteringKeepsTheSlotsAndCompletesOnRetries) {
  ASSERT_NO_FATAL_FAILURE(RegisterInJournal(3));
  JournalState state;
  auto resumed = Journal::Resume(path_, Header(), nullptr, &state);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  Job job(Config(resumed->get()), &clock_);
  ASSERT_TRUE(job.Restore(state).ok());
  EXPECT_EQ(job.Status().registered, 3);
  std::vector<absl::StatusOr<RankAssignment>> got(4, absl::UnknownError("none"));
  for (int i : {0, 3}) {  // a retry and the last newcomer
    job.Register(Who(i / 2, i % 2, 100 + i),
                 [&got, i](absl::StatusOr<RankAssignment> r) { got[static_cast<size_t>(i)] = r; });
  }
  ASSERT_TRUE(got[3].ok()) << got[3].status();
  EXPECT_EQ(got[3]->rank, 3);
  ASSERT_TRUE(got[0].ok()) << got[0].status();
  EXPECT_EQ(got[0]->rank, 0);
  EXPECT_EQ(job.Status().state, JobState::kRunning);
}

TEST_F(JournalTest, ATornTailIsDroppedAndCutOff) {
  {
    auto journal = Journal::Create(path_, Header(), nullptr);
    ASSERT_TRUE(journal.ok());
    DriveJob(journal->get());
  }
  const std::string whole = ReadBytes(path_);
  for (size_t cut : {size_t{1}, size_t{5}, size_t{9}, size_t{20}}) {
    WriteBytes(path_, whole.substr(0, whole.size() - cut));
    ::chmod(path_.c_str(), 0600);
    JournalState state;
    auto resumed = Journal::Resume(path_, Header(), nullptr, &state);
    ASSERT_TRUE(resumed.ok()) << "cut " << cut << ": " << resumed.status();
    EXPECT_GT(state.torn_bytes, 0);
    EXPECT_FALSE(state.stop_reason.has_value()) << "the stop was the torn last record";
    EXPECT_TRUE(state.checkpoint.has_value());
    resumed->reset();
    // Cut back and followed by the new incarnation record: the file reads whole again.
    auto again = ParseJournal(ReadBytes(path_));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->torn_bytes, 0);
    EXPECT_EQ(again->incarnation, 1);
  }
}

TEST_F(JournalTest, ACorruptRecordBeforeTheTailIsRefused) {
  {
    auto journal = Journal::Create(path_, Header(), nullptr);
    ASSERT_TRUE(journal.ok());
    DriveJob(journal->get());
  }
  std::string bytes = ReadBytes(path_);
  bytes[bytes.size() / 2] ^= 0x01;
  WriteBytes(path_, bytes);
  JournalState state;
  auto resumed = Journal::Resume(path_, Header(), nullptr, &state);
  ASSERT_FALSE(resumed.ok());
  EXPECT_EQ(resumed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(resumed.status().message().find("corrupt"), std::string::npos)
      << resumed.status().message();
  // Refused means untouched: the evidence stays as it was.
  EXPECT_EQ(ReadBytes(path_), bytes);
}

TEST_F(JournalTest, AnotherJobsJournalIsRefused) {
  {
    auto journal = Journal::Create(path_, Header(), nullptr);
    ASSERT_TRUE(journal.ok());
  }
  auto header = [](const std::string& job, int64_t generation, const std::string& nonce) {
    JournalHeader h = Header();
    h.job_id = job;
    h.generation = generation;
    h.nonce = nonce;
    return h;
  };
  for (const JournalHeader& other :
       {header("job-8", 2, "nonce"), header("job-7", 3, "nonce"), header("job-7", 2, "other")}) {
    JournalState state;
    auto resumed = Journal::Resume(path_, other, nullptr, &state);
    ASSERT_FALSE(resumed.ok());
    EXPECT_EQ(resumed.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(resumed.status().message().find("belongs to job job-7"), std::string::npos)
        << resumed.status().message();
  }
  JournalState state;
  EXPECT_EQ(Journal::Resume(path_ + ".missing", Header(), nullptr, &state).status().code(),
            absl::StatusCode::kNotFound);
  WriteBytes(path_, "not a journal at all, but long enough to frame");
  EXPECT_FALSE(Journal::Resume(path_, Header(), nullptr, &state).ok());
}

// Whose journal it is (tokens, world size) is checked before anything is cut off: a journal
// with a torn tail that is refused stays byte for byte as it was.
TEST_F(JournalTest, TokensAndWorldAreCheckedBeforeATornTailIsCut) {
  {
    auto journal = Journal::Create(path_, Header(), nullptr);
    ASSERT_TRUE(journal.ok());
    DriveJob(journal->get());
  }
  const std::string torn = ReadBytes(path_).substr(0, ReadBytes(path_).size() - 5);
  WriteBytes(path_, torn);
  ::chmod(path_.c_str(), 0600);
  auto with = [](auto change) {
    JournalHeader h = Header();
    change(&h);
    return h;
  };
  for (const JournalHeader& other : {with([](JournalHeader* h) { h->token = "other"; }),
                                     with([](JournalHeader* h) { h->view_token = "other"; }),
                                     with([](JournalHeader* h) { h->control_token = "other"; }),
                                     with([](JournalHeader* h) { h->world_size = 8; })}) {
    JournalState state;
    auto resumed = Journal::Resume(path_, other, nullptr, &state);
    ASSERT_FALSE(resumed.ok());
    EXPECT_EQ(resumed.status().code(), absl::StatusCode::kFailedPrecondition) << resumed.status();
    EXPECT_EQ(ReadBytes(path_), torn) << "a refused journal must not be cut: " << resumed.status();
  }
}

// A length field in the middle that runs past the end of the file is corruption, not a torn
// tail: refused with its offset, and nothing is cut.
TEST_F(JournalTest, ALengthInTheMiddleRunningPastTheEndIsRefusedWithItsOffset) {
  {
    auto journal = Journal::Create(path_, Header(), nullptr);
    ASSERT_TRUE(journal.ok());
    DriveJob(journal->get());
  }
  std::string bytes = ReadBytes(path_);
  const size_t at = FrameRecord(HeaderRecord(Header())).size() +
                    FrameRecord(IncarnationRecord(0)).size();  // the first registration
  const uint32_t past = static_cast<uint32_t>(bytes.size());
  for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<char>((past >> (8 * i)) & 0xff);
  WriteBytes(path_, bytes);
  JournalState state;
  auto resumed = Journal::Resume(path_, Header(), nullptr, &state);
  ASSERT_FALSE(resumed.ok());
  EXPECT_EQ(resumed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(resumed.status().message().find(absl::StrCat("at byte ", at)), std::string::npos)
      << resumed.status().message();
  EXPECT_EQ(ReadBytes(path_), bytes);
}

// Ranks that reported their end are journaled: a coordinator restarted after ranks 1-3 finished
// shows them done, and the job SUCCEEDS once rank 0 finishes too.
// After a restore, a replacement meeting its slot still held by a process not heard from since
// is told to retry (its predecessor's loss may have gone to the coordinator before this one),
// however long that takes, up to the moment the loss is declared; a holder that beats after the
// restore is alive, and the same Register is refused for good.
TEST_F(JournalTest, AReplacementRetriesUntilItsSilentPredecessorIsDeclaredLost) {
  ASSERT_NO_FATAL_FAILURE(RegisterInJournal(4));  // the world complete: RUNNING
  JournalState state;
  auto resumed = Journal::Resume(path_, Header(), nullptr, &state);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_TRUE(state.table.has_value()) << "the world was complete: a rank table is journaled";
  JobConfig config = Config(resumed->get());
  config.heartbeat_timeout = absl::Seconds(3);
  config.max_restarts = 3;
  Job job(config, &clock_);
  ASSERT_TRUE(job.Restore(state).ok());
  // The answer, which may come later (a replacement's waits for the generation to form).
  using Answer = std::shared_ptr<absl::StatusOr<RankAssignment>>;
  auto register_as = [&job](int node, int local, int pid) {
    Answer got = std::make_shared<absl::StatusOr<RankAssignment>>(absl::UnknownError("no answer"));
    job.Register(Who(node, local, pid), [got](absl::StatusOr<RankAssignment> r) { *got = r; });
    return got;
  };
  ProgressReport p;
  for (int r : {0, 1, 3}) ASSERT_TRUE(job.Heartbeat(r, 100 + r, p).ok());
  // Rank 2 (node 1, local rank 0, pid 102) is silent: its replacement retries, even at the very
  // end of the timeout (before the tick that declares the loss).
  for (int second = 1; second <= 3; ++second) {
    clock_.Advance(absl::Seconds(1));
    for (int r : {0, 1, 3}) ASSERT_TRUE(job.Heartbeat(r, 100 + r, p).ok());
    Answer got = register_as(1, 0, 200);
    EXPECT_TRUE(absl::IsUnavailable(got->status())) << second << " s: " << got->status();
  }
  // Rank 3's slot (node 1, local rank 1) is held by a process heard from since the restore: a
  // second process claiming it is refused for good.
  Answer duplicate = register_as(1, 1, 201);
  EXPECT_TRUE(absl::IsAlreadyExists(duplicate->status())) << duplicate->status();
  // The tick past the timeout declares rank 2 lost; the replacement takes its place.
  clock_.Advance(absl::Milliseconds(100));
  job.Tick();
  ASSERT_EQ(job.Status().state, JobState::kRecovering);
  Answer replaced = register_as(1, 0, 200);
  RejoinRequest rejoin;
  rejoin.membership_generation = state.table->generation;
  for (int r : {0, 1, 3}) {
    job.Rejoin(r, 100 + r, rejoin, [r](absl::StatusOr<RankAssignment> a) {
      EXPECT_TRUE(a.ok()) << "rank " << r << ": " << a.status();
    });
  }
  ASSERT_TRUE(replaced->ok()) << replaced->status();
  EXPECT_EQ((*replaced)->rank, 2);
  EXPECT_EQ(job.Status().state, JobState::kRunning);
}

TEST_F(JournalTest, FinishedRanksStayFinishedAfterARestart) {
  {
    auto journal = Journal::Create(path_, Header(), nullptr);
    ASSERT_TRUE(journal.ok());
    Job job(Config(journal->get()), &clock_);
    for (int i = 0; i < 4; ++i) {
      job.Register(Who(i / 2, i % 2, 100 + i), [](absl::StatusOr<RankAssignment>) {});
    }
    for (int r = 1; r < 4; ++r) ASSERT_TRUE(job.ReportDone(r, 100 + r, absl::OkStatus()).ok());
    ASSERT_EQ(job.Status().state, JobState::kRunning);
  }
  JournalState state;
  auto resumed = Journal::Resume(path_, Header(), nullptr, &state);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(state.finished.size(), 3u);
  Job job(Config(resumed->get()), &clock_);
  ASSERT_TRUE(job.Restore(state).ok());
  JobStatus s = job.Status();
  ASSERT_EQ(s.ranks.size(), 4u);
  EXPECT_EQ(s.ranks[0].state, RankState::kStarting);
  for (int r = 1; r < 4; ++r) EXPECT_EQ(s.ranks[r].state, RankState::kDone) << "rank " << r;
  // The finished ranks never heartbeat again: that is no silence.
  ProgressReport p;
  for (int i = 0; i < 30; ++i) {
    clock_.Advance(absl::Seconds(1));
    ASSERT_TRUE(job.Heartbeat(0, 100, p).ok());
    job.Tick();
  }
  EXPECT_EQ(job.Status().state, JobState::kRunning);
  ASSERT_TRUE(job.ReportDone(0, 100, absl::OkStatus()).ok());
  s = job.Status();
  EXPECT_EQ(s.state, JobState::kSucceeded);
  for (const RankStatus& r : s.ranks) EXPECT_EQ(r.state, RankState::kDone) << "rank " << r.rank;
}

// The journal outlives the job's end until the result is written (coordinator_process.cc): a
// coordinator restarted in between (SIGKILLed while it lingered) fails the job again with the
// recorded cause, and the ranks still running learn it at their next heartbeat.
TEST_F(JournalTest, AFailedJobIsFailedAgainAfterARestart) {
  {
    auto journal = Journal::Create(path_, Header(), nullptr);
    ASSERT_TRUE(journal.ok());
    JobConfig c = Config(journal->get());
    c.max_restarts = 0;
    Job job(c, &clock_);
    for (int i = 0; i < 4; ++i) {
      job.Register(Who(i / 2, i % 2, 100 + i), [](absl::StatusOr<RankAssignment>) {});
    }
    ASSERT_TRUE(job.ReportLost(LostWorker{1, 0, 102, "killed by signal 9", 9, 0}).ok());
    ASSERT_EQ(job.Status().state, JobState::kFailed);
  }
  JournalState state;
  auto resumed = Journal::Resume(path_, Header(), nullptr, &state);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_TRUE(state.failure.has_value());
  EXPECT_EQ(state.failure->rank, 2);
  Job job(Config(resumed->get()), &clock_);
  ASSERT_TRUE(job.Restore(state).ok());
  const JobStatus s = job.Status();
  EXPECT_EQ(s.state, JobState::kFailed);
  EXPECT_EQ(s.failure.rank, 2);
  EXPECT_EQ(s.failure.kind, FailureKind::kSignal);
  EXPECT_THAT(s.failure.text, ::testing::HasSubstr("rank 2 (host h1, node 1, local rank 0, "
                                                   "pid 102) killed by signal 9"));
  EXPECT_EQ(job.ExitCode(), kExitFailed);
  auto beat = job.Heartbeat(0, 100, ProgressReport{});
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_EQ(beat->command, Command::kAbort);
  EXPECT_EQ(beat->cause.rank, 2);
}

TEST_F(JournalTest, AppendsWhileAnFsyncRunsShareTheNextOne) {
  auto journal = Journal::Create(path_, Header(), nullptr);
  ASSERT_TRUE(journal.ok());
  constexpr int kThreads = 8;
  constexpr int kPerThread = 250;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&journal, t] {
      for (int i = 0; i < kPerThread; ++i) (*journal)->Registered(Who(t, i, 1000 * t + i));
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE((*journal)->Sync().ok());
  EXPECT_EQ((*journal)->appended(), kThreads * kPerThread);
  EXPECT_LT((*journal)->fsyncs(), (*journal)->appended() / 4)
      << "group commit: one fsync covers the records appended while the previous one ran";
  journal->reset();
  auto state = ParseJournal(ReadBytes(path_));
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->registered.size(), static_cast<size_t>(kThreads * kPerThread));
}

TEST_F(JournalTest, AwaitWrittenReturnsWithEveryRecordInTheFile) {
  auto journal = Journal::Create(path_, Header(), nullptr);
  ASSERT_TRUE(journal.ok());
  for (int round = 1; round <= 50; ++round) {
    (*journal)->Registered(Who(0, round, 100 + round));
    (*journal)->AwaitWritten(absl::Seconds(5));
    // Read while the journal stays open: what a SIGKILL right now would leave.
    auto state = ParseJournal(ReadBytes(path_));
    ASSERT_TRUE(state.ok()) << state.status();
    ASSERT_EQ(state->registered.size(), static_cast<size_t>(round)) << "round " << round;
  }
}

}  // namespace
}  // namespace ddp
