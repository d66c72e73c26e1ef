// The journal's record format (coordinator/job/journal_record.h) on bytes, without files: every
// record type round-trips through ParseJournal, and damaged bytes are told apart (a torn tail is
// dropped; anything else is DATA_LOSS). journal_test.cc covers the file and the restore.
#include "coordinator/job/journal_record.h"

#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/coordinator/job/journal_fixture.h"

namespace ddp {
namespace {

WorkerIdentity Who(int node, int local, int pid) { return testing::JournalWho(node, local, pid); }

const JournalHeader kHeader = testing::JournalTestHeader();

// A journal of every record type, framed.
std::string EveryRecord() {
  RankTable table;
  table.generation = 1;
  table.store_prefix = "gen2/m1";
  table.num_nodes = 2;
  table.ranks = {Who(0, 0, 10), Who(0, 1, 11), Who(1, 0, 12), Who(1, 1, 13)};
  ShardRequest q;
  q.epoch = 3;
  q.dataset_size = 1000;
  q.seed = 42;
  q.shuffle = true;
  q.drop_last = false;
  q.resume_consumed = 96;
  q.resume_world_size = 4;
  CommittedCheckpoint c;
  c.epoch = 3;
  c.step = 40;
  c.consumed = 160;
  c.path = "/ckpt/ckpt-40.pt";
  std::string bytes;
  for (const std::string& payload :
       {HeaderRecord(kHeader), IncarnationRecord(0), RegisteredRecord(Who(0, 0, 10)),
        GenerationRecord(table, 1), EpochRecord(3, q), CheckpointRecord(c), StopRecord("preempted"),
        DoneRecord(2, 12, /*stopped=*/false), DoneRecord(3, 13, /*stopped=*/true),
        IncarnationRecord(1)}) {
    bytes += FrameRecord(payload);
  }
  return bytes;
}

TEST(JournalRecordTest, EveryRecordTypeRoundTrips) {
  absl::StatusOr<JournalState> s = ParseJournal(EveryRecord());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->records, 10);
  EXPECT_EQ(s->torn_bytes, 0);
  ASSERT_EQ(s->finished.size(), 2u);
  EXPECT_EQ(s->finished.at(2).pid, 12);
  EXPECT_FALSE(s->finished.at(2).stopped);
  EXPECT_TRUE(s->finished.at(3).stopped);
  EXPECT_EQ(s->header.job_id, "job-7");
  EXPECT_EQ(s->header.generation, 2);
  EXPECT_EQ(s->header.control_token, "tc");
  EXPECT_EQ(s->header.world_size, 4);
  EXPECT_EQ(s->incarnation, 1);
  ASSERT_EQ(s->registered.size(), 1u);
  EXPECT_EQ(s->registered[0].host, "h0");
  ASSERT_TRUE(s->table.has_value());
  EXPECT_EQ(s->table->store_prefix, "gen2/m1");
  ASSERT_EQ(s->table->size(), 4);
  EXPECT_EQ(s->table->ranks[3].pid, 13);
  EXPECT_EQ(s->restarts, 1);
  ASSERT_EQ(s->epochs.count(3), 1u);
  EXPECT_TRUE(s->epochs.at(3).shuffle);
  EXPECT_EQ(s->epochs.at(3).resume_consumed, 96);
  ASSERT_TRUE(s->checkpoint.has_value());
  EXPECT_EQ(s->checkpoint->path, "/ckpt/ckpt-40.pt");
  ASSERT_TRUE(s->stop_reason.has_value());
  EXPECT_EQ(*s->stop_reason, "preempted");
}

TEST(JournalRecordTest, TheLastFailureRecordedIsTheCause) {
  const FailureCause first{2, FailureKind::kCollectiveError, "rank 2: allreduce failed"};
  const FailureCause root{1, FailureKind::kSignal, "rank 1 killed by signal 9"};
  absl::StatusOr<JournalState> s =
      ParseJournal(FrameRecord(HeaderRecord(kHeader)) + FrameRecord(FailedRecord(first)) +
                   FrameRecord(FailedRecord(root)) + FrameRecord(IncarnationRecord(1)));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->failure.has_value());
  EXPECT_EQ(s->failure->rank, 1);
  EXPECT_EQ(s->failure->kind, FailureKind::kSignal);
  EXPECT_EQ(s->failure->text, "rank 1 killed by signal 9");
  EXPECT_FALSE(ParseJournal(FrameRecord(HeaderRecord(kHeader)))->failure.has_value());
  // A kind this build does not know, or none, is damage (not a torn tail: a record follows).
  for (const FailureKind kind : {FailureKind::kNone, static_cast<FailureKind>(999)}) {
    const FailureCause bad{0, kind, "x"};
    absl::StatusOr<JournalState> r =
        ParseJournal(FrameRecord(HeaderRecord(kHeader)) + FrameRecord(FailedRecord(bad)) +
                     FrameRecord(IncarnationRecord(1)));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  }
}

TEST(JournalRecordTest, DamagedBytes) {
  const std::string good = EveryRecord();
  const std::string last = FrameRecord(IncarnationRecord(1));
  struct Case {
    const char* name;
    std::function<std::string()> bytes;
    absl::StatusCode want_code;
    int64_t want_records;  // when OK
    int64_t want_torn;
  };
  const std::vector<Case> cases = {
      {"intact", [&] { return good; }, absl::StatusCode::kOk, 10, 0},
      {"the last record cut short", [&] { return good.substr(0, good.size() - 3); },
       absl::StatusCode::kOk, 9, static_cast<int64_t>(last.size()) - 3},
      {"only the last frame's length",
       [&] { return good.substr(0, good.size() - last.size() + 2); }, absl::StatusCode::kOk, 9, 2},
      {"the last record's payload flipped",
       [&] {
         std::string b = good;
         b.back() ^= 0x01;
         return b;
       },
       absl::StatusCode::kOk, 9, static_cast<int64_t>(last.size())},
      {"a record before the tail flipped",
       [&] {
         std::string b = good;
         b[FrameRecord(HeaderRecord(kHeader)).size() + 9] ^= 0x01;
         return b;
       },
       absl::StatusCode::kDataLoss, 0, 0},
      {"empty", [] { return std::string(); }, absl::StatusCode::kDataLoss, 0, 0},
      {"no header first", [] { return FrameRecord(IncarnationRecord(0)); },
       absl::StatusCode::kDataLoss, 0, 0},
      {"a second header", [&] { return good + FrameRecord(HeaderRecord(kHeader)); },
       absl::StatusCode::kDataLoss, 0, 0},
      {"a length in the middle that runs past the end",
       [&] {
         std::string b = good;
         const size_t at = FrameRecord(HeaderRecord(kHeader)).size();  // the incarnation record
         const uint32_t past = static_cast<uint32_t>(good.size());     // < the largest record
         for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>((past >> (8 * i)) & 0xff);
         return b;
       },
       absl::StatusCode::kDataLoss, 0, 0},
      {"a length in the middle larger than any record",
       [&] {
         std::string b = good;
         const size_t at = FrameRecord(HeaderRecord(kHeader)).size();
         b[at + 3] = static_cast<char>(0x7f);
         return b;
       },
       absl::StatusCode::kDataLoss, 0, 0},
      {"the last frame's length larger than any record",
       [&] {
         std::string b = good;
         b[good.size() - last.size() + 3] = static_cast<char>(0x7f);
         return b;
       },
       absl::StatusCode::kDataLoss, 0, 0},
      {"zeros after the last record (the file grew, its data never landed)",
       [&] { return good + std::string(300, '\0'); }, absl::StatusCode::kOk, 10, 300},
      {"a zeroed last record",
       [&] { return good.substr(0, good.size() - last.size()) + std::string(last.size(), '\0'); },
       absl::StatusCode::kOk, 9, static_cast<int64_t>(last.size())},
      {"a payload with trailing bytes",
       [&] { return good + FrameRecord(StopRecord("x") + "junk") + last; },
       absl::StatusCode::kDataLoss, 0, 0},
  };
  for (const Case& c : cases) {
    absl::StatusOr<JournalState> s = ParseJournal(c.bytes());
    EXPECT_EQ(s.status().code(), c.want_code) << c.name << ": " << s.status();
    if (s.status().code() == absl::StatusCode::kDataLoss &&
        s.status().message() != "journal has no header record") {
      EXPECT_NE(s.status().message().find(" at byte "), std::string::npos)
          << c.name << ": " << s.status();
    }
    if (!s.ok()) continue;
    EXPECT_EQ(s->records, c.want_records) << c.name;
    EXPECT_EQ(s->torn_bytes, c.want_torn) << c.name;
  }
}

}  // namespace
}  // namespace ddp
