// In-process coordinator on port 0 with ranks-as-threads clients (client/coordinator_client.h).
#include "coordinator/rpc/server.h"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/coordinator_client.h"
#include "client/operator_client.h"
#include "common/dist_file.h"
#include "common/file_util.h"
#include "common/job_result.h"
#include "common/sampler_plan.h"
#include "coordinator/job/job.h"
#include "coordinator/kv_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class ServerTest : public ::testing::Test {
 protected:
  void Start(int world, absl::Duration heartbeat_timeout = absl::Seconds(10), int64_t epoch = 0,
             int max_restarts = 0) {
    std::string tmpl = ::testing::TempDir() + "/server_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    contents_ = *NewDistFileContents("job-s", 0, "", 0);
    JobConfig config;
    config.job_id = "job-s";
    config.nonce = contents_.nonce;
    config.world_size = world;
    config.registration_timeout = absl::Seconds(60);
    config.heartbeat_timeout = heartbeat_timeout;
    config.max_restarts = max_restarts;
    job_ = std::make_unique<Job>(config, MonotonicClock::Get());
    ServerOptions options;
    options.tokens = {contents_.token, contents_.view_token, contents_.control_token};
    options.tick = absl::Milliseconds(20);
    options.epoch = epoch;
    contents_.epoch = epoch;
    auto server = CoordinatorServer::Start(options, job_.get(), &store_, MonotonicClock::Get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    contents_.grpc_address = server_->address();
    contents_.tls_cert = server_->tls_cert();
    dist_file_ = dir_ + "/dist_file.job-s";
    ASSERT_TRUE(PublishDistFile(dist_file_, contents_).ok());
  }
  void TearDown() override {
    server_.reset();
    if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  ConnectOptions Options(TokenRole role = TokenRole::kWorker) const {
    ConnectOptions o;
    o.role = role;
    o.dist_file = dist_file_;
    o.expected_job_id = "job-s";
    o.dist_file_timeout = absl::Seconds(5);
    o.rpc_timeout = absl::Seconds(5);
    return o;
  }
  std::unique_ptr<CoordinatorApi> Connect() {
    auto c = ConnectToCoordinator(Options());
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  // Connects two workers of host "h" into `apis` and registers both at once (ranks 0 and 1, pids
  // first_pid and first_pid + 1); returns their assignments.
  std::vector<RankAssignment> RegisterTwoLocal(std::vector<std::unique_ptr<CoordinatorApi>>& apis,
                                               int first_pid = 10) {
    apis.push_back(Connect());
    apis.push_back(Connect());
    std::vector<RankAssignment> assigned(2);
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i) {
      threads.emplace_back([&, i] {
        WorkerIdentity who;
        who.host = "h";
        who.local_rank = i;
        who.local_world_size = 2;
        who.pid = first_pid + i;
        auto a = apis[static_cast<size_t>(i)]->Register(who, absl::Seconds(10));
        EXPECT_TRUE(a.ok()) << a.status();
        if (a.ok()) assigned[static_cast<size_t>(i)] = *a;
      });
    }
    for (auto& t : threads) t.join();
    return assigned;
  }

  // Worker `i` of a job of one worker per node.
  static WorkerIdentity NodeWorker(int i, int pid) {
    WorkerIdentity who;
    who.host = absl::StrCat("node", i);
    who.node_rank = i;
    who.local_world_size = 1;
    who.pid = pid;
    return who;
  }

  std::string dir_;
  std::string dist_file_;
  DistFileContents contents_;
  std::unique_ptr<Job> job_;
  KvStore store_;
  std::unique_ptr<CoordinatorServer> server_;
};

TEST_F(ServerTest, SixtyFourRanksRunTheWholeFlow) {
  constexpr int kWorld = 64;
  constexpr int kPerNode = 8;
  Start(kWorld);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  std::vector<int> ranks(kWorld, -1);
  for (int i = 0; i < kWorld; ++i) {
    threads.emplace_back([&, i] {
      auto fail = [&](const absl::Status& st) {
        ADD_FAILURE() << "worker " << i << ": " << st;
        failures++;
      };
      auto api = Connect();
      if (api == nullptr) return failures++, void();
      WorkerIdentity who;
      who.host = absl::StrCat("node", i / kPerNode);
      who.node_rank = i / kPerNode;
      who.local_rank = i % kPerNode;
      who.local_world_size = kPerNode;
      who.pid = 1000 + i;
      auto a = api->Register(who, absl::Seconds(30));
      if (!a.ok()) return fail(a.status());
      ranks[static_cast<size_t>(i)] = a->rank;
      // c10d-style bootstrap: rank 0 publishes, everyone counts in and reads it back.
      if (a->rank == 0) {
        if (auto st = api->StoreSet("nccl_id", {1, 2, 3}); !st.ok()) return fail(st);
      }
      auto id = api->StoreGet("nccl_id", absl::Seconds(10));
      if (!id.ok()) return fail(id.status());
      EXPECT_EQ(*id, (std::vector<uint8_t>{1, 2, 3}));
      if (auto n = api->StoreAdd("joined", 1); !n.ok()) return fail(n.status());
      if (auto st = api->StoreWait({"nccl_id"}, absl::Seconds(5)); !st.ok()) return fail(st);
      ShardRequest req;
      req.epoch = 0;
      req.dataset_size = 1000;
      req.seed = 1;
      auto shard = api->GetShard(req);
      if (!shard.ok()) return fail(shard.status());
      EXPECT_EQ(shard->rank, a->rank);
      EXPECT_EQ(NumSamplesPerRank(*shard), 16);  // ceil(1000 / 64)
      ProgressReport p;
      p.phase = WorkerPhase::kTraining;
      p.step = 1;
      auto hb = api->Heartbeat(p);
      if (!hb.ok()) return fail(hb.status());
      EXPECT_EQ(hb->command, Command::kContinue);
      if (auto st = api->ReportDone(absl::OkStatus()); !st.ok()) return fail(st);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (int i = 0; i < kWorld; ++i) EXPECT_EQ(ranks[static_cast<size_t>(i)], i);
  EXPECT_EQ(store_.NumKeys(), 2);
  JobStatus s = job_->Status();
  EXPECT_EQ(s.state, JobState::kSucceeded);
  EXPECT_EQ(s.registered, kWorld);
  EXPECT_EQ(s.num_nodes, kWorld / kPerNode);
}

// While workers register, the ticker does not rebuild the status snapshot at every tick (each
// registration is a major change, and a build copies the whole world under the registration
// lock); an operator's read still sees every registration at once.
TEST_F(ServerTest, TickerDoesNotRebuildTheStatusForEveryRegistration) {
  constexpr int kWorld = 12;
  constexpr int kEarly = 10;  // register one by one, 100 ms apart (5 ticks of 20 ms)
  Start(kWorld);
  auto op = OperatorClient::Connect(Options(TokenRole::kControl));
  ASSERT_TRUE(op.ok()) << op.status();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  auto register_one = [&](int i) {
    threads.emplace_back([&, i] {
      auto api = Connect();
      if (api == nullptr) return failures++, void();
      auto a = api->Register(NodeWorker(i, 2000 + i), absl::Seconds(30));
      if (!a.ok()) {
        ADD_FAILURE() << "worker " << i << ": " << a.status();
        failures++;
      }
    });
  };
  const uint64_t builds_before = server_->status_cache().builds();
  for (int i = 0; i < kEarly; ++i) {
    register_one(i);
    absl::SleepFor(absl::Milliseconds(100));
  }
  // ~1.1 s of registrations: Refresh() rebuilds about once a second; a build per registration
  // (the old ticker's Get()) would be at least kEarly.
  const uint64_t ticker_builds = server_->status_cache().builds() - builds_before;
  EXPECT_LE(ticker_builds, 4u) << "the ticker rebuilt the status for registrations";
  // Registrations are major changes: a reader gets a snapshot with all of them.
  for (const absl::Time end = absl::Now() + absl::Seconds(5); absl::Now() < end;) {
    if (job_->Status().registered == kEarly) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  auto st = (*op)->GetStatus();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->state, JobState::kRegistering);
  EXPECT_EQ(st->registered, kEarly);
  for (int i = kEarly; i < kWorld; ++i) register_one(i);
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  // Within about a second of the world completing, the ticker's snapshot says so.
  for (const absl::Time end = absl::Now() + absl::Seconds(2); absl::Now() < end;) {
    if (server_->status_cache().Current()->status.state == JobState::kRunning) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(server_->status_cache().Current()->status.state, JobState::kRunning);
}

// Register parks on the coordinator's own completion queues (async_queues.h), more calls than
// they request ahead: the other methods are answered meanwhile, and a shutdown answers every
// parked call at once with its reason instead of leaving it to its deadline.
TEST_F(ServerTest, ParkedRegistrationsLeaveOtherCallsFreeAndEndWithTheServer) {
  // More than the queues request ahead (kParkedQueues x 16), and fewer than the 100 streams of
  // the one connection that this process's channels share (max_streams_per_connection).
  constexpr int kParked = 90;
  Start(kParked + 1);
  std::vector<std::thread> threads;
  std::atomic<int> answered{0};
  std::atomic<int> ok{0};
  std::vector<std::string> errors(kParked);
  for (int i = 0; i < kParked; ++i) {
    threads.emplace_back([&, i] {
      auto api = Connect();
      if (api == nullptr) return;
      auto a = api->Register(NodeWorker(i, 3000 + i), absl::Seconds(60));
      if (a.ok()) ok++;
      errors[static_cast<size_t>(i)] = a.status().ToString();
      answered++;
    });
  }
  for (const absl::Time end = absl::Now() + absl::Seconds(20); absl::Now() < end;) {
    if (job_->Status().registered == kParked) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(job_->Status().registered, kParked);
  // Hello (a callback method) and GetStatus (its own queue) while all of them wait.
  EXPECT_NE(Connect(), nullptr);
  auto op = OperatorClient::Connect(Options(TokenRole::kView));
  ASSERT_TRUE(op.ok()) << op.status();
  auto st = (*op)->GetStatus();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->registered, kParked);
  EXPECT_EQ(answered.load(), 0);

  const absl::Time start = absl::Now();
  server_->Shutdown(absl::Seconds(1));
  for (auto& t : threads) t.join();
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(answered.load(), kParked);
  EXPECT_EQ(ok.load(), 0);
  EXPECT_LT(took, absl::Seconds(10)) << "parked calls waited for their deadline";
  for (const std::string& e : errors) EXPECT_THAT(e, HasSubstr("shutting down"));
}

TEST_F(ServerTest, WrongTokenIsUnauthenticatedAndTheJobKeepsServing) {
  Start(2);
  ConnectOptions forged;
  forged.address = server_->address();
  forged.token = std::string(64, '0');
  forged.tls_cert = server_->tls_cert();
  forged.rpc_timeout = absl::Seconds(3);
  // Connect says Hello, which already needs the token.
  auto op = OperatorClient::Connect(forged);
  EXPECT_TRUE(absl::IsUnauthenticated(op.status())) << op.status();
  // The real token still works and nothing changed.
  auto good = OperatorClient::Connect(Options(TokenRole::kControl));
  ASSERT_TRUE(good.ok()) << good.status();
  auto status = (*good)->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->state, JobState::kRegistering);
  EXPECT_EQ(status->world_size, 2);
}

TEST_F(ServerTest, StoreGetTimesOutWithDeadlineExceeded) {
  Start(1);
  auto api = Connect();
  ASSERT_NE(api, nullptr);
  absl::Time start = absl::Now();
  auto got = api->StoreGet("never", absl::Milliseconds(200));
  EXPECT_TRUE(absl::IsDeadlineExceeded(got.status())) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("never"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_TRUE(absl::IsDeadlineExceeded(api->StoreWait({"a", "b"}, absl::Milliseconds(100))));
  ASSERT_TRUE(api->StoreSet("k", {'v'}).ok());
  EXPECT_EQ(*api->StoreCompareSet("k", {'v'}, {'w'}), std::vector<uint8_t>{'w'});
  EXPECT_TRUE(*api->StoreCheck({"k"}));
  EXPECT_EQ(*api->StoreNumKeys(), 1);
  EXPECT_TRUE(*api->StoreDelete("k"));
  EXPECT_TRUE(absl::IsInvalidArgument(api->StoreSet("", {})));
}

TEST_F(ServerTest, LostRankAbortsTheOthersWithinSeconds) {
  Start(2, absl::Milliseconds(500));
  std::vector<std::unique_ptr<CoordinatorApi>> apis;
  RegisterTwoLocal(apis);
  // Rank 1 goes silent; rank 0 keeps heartbeating and is told to abort.
  absl::Time start = absl::Now();
  HeartbeatReply reply;
  while (absl::Now() - start < absl::Seconds(5)) {
    auto r = apis[0]->Heartbeat({});
    ASSERT_TRUE(r.ok()) << r.status();
    reply = *r;
    if (reply.command == Command::kAbort) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(reply.command, Command::kAbort);
  EXPECT_THAT(reply.reason, HasSubstr("rank 1"));
  // The typed cause crosses the wire.
  EXPECT_EQ(reply.cause.rank, 1);
  EXPECT_EQ(reply.cause.kind, FailureKind::kLostHeartbeat);
  EXPECT_EQ(reply.cause.text, reply.reason);
  EXPECT_EQ(job_->Status().failure.rank, 1);
}

// A rank lost right after its generation formed, before the others built that generation's
// group: a survivor waiting in the store for the lost rank's address is answered at once
// (ABORTED) when the next generation starts forming, not at its own deadline (the group's
// timeout), and a later wait under the old generation's keys ends at once too. Keys of the next
// generation are served as usual.
TEST_F(ServerTest, AStoreWaitOfASupersededGenerationEndsWhenTheNextForms) {
  Start(2, absl::Milliseconds(500), /*epoch=*/0, /*max_restarts=*/1);
  std::vector<std::unique_ptr<CoordinatorApi>> apis;
  const std::vector<RankAssignment> assigned = RegisterTwoLocal(apis);
  const std::string prefix = assigned[0].store_prefix + "/";
  ASSERT_FALSE(assigned[0].store_prefix.empty());
  ASSERT_TRUE(apis[0]->StoreSet(prefix + "rank_0", {'a'}).ok());
  // Rank 0 waits for rank 1's address; rank 1 goes silent instead. Rank 0 heartbeats on.
  absl::Status got;
  absl::Duration waited;
  std::thread survivor([&] {
    const absl::Time start = absl::Now();
    got = apis[0]->StoreGet(prefix + "rank_1", absl::Seconds(30)).status();
    waited = absl::Now() - start;
  });
  std::atomic<bool> answered{false};
  std::thread beats([&] {
    while (!answered.load()) {
      (void)apis[0]->Heartbeat({});
      absl::SleepFor(absl::Milliseconds(100));
    }
  });
  survivor.join();
  answered.store(true);
  beats.join();
  EXPECT_TRUE(absl::IsAborted(got)) << got;
  EXPECT_THAT(std::string(got.message()), HasSubstr("newer membership generation"));
  EXPECT_THAT(std::string(got.message()), HasSubstr(prefix));
  EXPECT_LT(waited, absl::Seconds(10)) << "answered when the loss was found, not at 30 s";
  EXPECT_EQ(job_->Status().state, JobState::kRecovering);
  EXPECT_EQ(job_->SupersededStorePrefix(), prefix);
  // Later: a wait under the old generation ends at once; its existing keys still read.
  const absl::Time again = absl::Now();
  EXPECT_TRUE(absl::IsAborted(apis[0]->StoreWait({prefix + "rank_1"}, absl::Seconds(30))));
  EXPECT_LT(absl::Now() - again, absl::Seconds(5));
  auto old_key = apis[0]->StoreGet(prefix + "rank_0", absl::Seconds(1));
  ASSERT_TRUE(old_key.ok()) << old_key.status();
  // Other keys are served as usual.
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      apis[0]->StoreGet("gen0/m1/rank_1", absl::Milliseconds(100)).status()));
}

// Enums end to end: rank states, the job state, the failure's kind and the step phase come back
// through GetStatus as the coordinator set them; Stop answers with the job state.
TEST_F(ServerTest, TypedStateCrossesTheWire) {
  Start(2);
  std::vector<std::unique_ptr<CoordinatorApi>> apis;
  RegisterTwoLocal(apis, /*first_pid=*/20);
  ProgressReport p;
  p.phase = WorkerPhase::kEvaluating;
  p.step_phase = StepPhase::kEval;
  p.phase_seconds = 3.5;
  ASSERT_TRUE(apis[0]->Heartbeat(p).ok());
  auto op = OperatorClient::Connect(Options(TokenRole::kControl));
  ASSERT_TRUE(op.ok()) << op.status();
  // Progress is served from snapshots up to ~200 ms old (a state change is never missed).
  absl::StatusOr<JobStatus> st;
  const uint64_t queued_before = server_->status_calls();
  uint64_t reads = 0;
  for (const absl::Time end = absl::Now() + absl::Seconds(3); absl::Now() < end;) {
    ++reads;
    st = (*op)->GetStatus();
    ASSERT_TRUE(st.ok()) << st.status();
    if (st->ranks[0].phase != StepPhase::kNone) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(st->state, JobState::kRunning);
  EXPECT_EQ(st->ranks[0].state, RankState::kEvaluating);
  EXPECT_EQ(st->ranks[0].phase, StepPhase::kEval);
  EXPECT_DOUBLE_EQ(st->ranks[0].phase_seconds, 3.5);
  EXPECT_EQ(st->ranks[1].state, RankState::kStarting);
  EXPECT_TRUE(st->failure.empty());
  // Every read was answered by the status queue, not the workers' callback threads.
  EXPECT_EQ(server_->status_calls() - queued_before, reads);

  auto who = apis[1]->ReportLost({0, 1, 21, "killed by signal 9", 9, 0});
  ASSERT_TRUE(who.ok()) << who.status();
  st = (*op)->GetStatus();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->state, JobState::kFailed);
  EXPECT_EQ(st->failure.rank, 1);
  EXPECT_EQ(st->failure.kind, FailureKind::kSignal);
  EXPECT_EQ(st->failure.text, "rank 1 (host h, node 0, local rank 1, pid 21) killed by signal 9");
  EXPECT_EQ(st->ranks[1].state, RankState::kLost);
  auto stopped = (*op)->Stop(/*graceful=*/false, "late");
  EXPECT_TRUE(absl::IsFailedPrecondition(stopped.status())) << stopped.status();
}

TEST_F(ServerTest, StopAnswersWithTheTypedState) {
  Start(1);
  auto api = Connect();
  WorkerIdentity who;
  who.host = "h";
  who.pid = 7;
  ASSERT_TRUE(api->Register(who, absl::Seconds(5)).ok());
  auto op = OperatorClient::Connect(Options(TokenRole::kControl));
  ASSERT_TRUE(op.ok()) << op.status();
  auto state = (*op)->Stop(/*graceful=*/true, "maintenance");
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(*state, JobState::kStopping);
  auto hb = api->Heartbeat({});
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->command, Command::kCheckpointAndStop);
  EXPECT_EQ(hb->reason, "checkpoint and stop: maintenance");
  ASSERT_TRUE(api->ReportDone(absl::CancelledError("stopped after checkpoint")).ok());
  auto st = (*op)->GetStatus();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->state, JobState::kStopped);
  EXPECT_TRUE(st->finished);
  EXPECT_EQ(st->stop_reason, "maintenance");
}

// Per-request state is bounded: 400 checkpoint commits, each with a path at the 4 KiB limit,
// leave at most the last 200 events (each of bounded size), and a path over the limit is refused
// with an error naming it.
TEST_F(ServerTest, RepeatedRequestsKeepTheEventListBounded) {
  Start(1);
  auto api = Connect();
  WorkerIdentity who;
  who.host = "h";
  ASSERT_TRUE(api->Register(who, absl::Seconds(5)).ok());
  for (int i = 1; i <= 400; ++i) {
    CommittedCheckpoint c;
    c.step = i;
    c.path = absl::StrCat(i, "/", std::string(4000, 'p'));
    ASSERT_TRUE(api->CommitCheckpoint(c).ok()) << i;
  }
  CommittedCheckpoint too_long;
  too_long.step = 401;
  too_long.path = std::string(4097, 'p');
  const absl::Status refused = api->CommitCheckpoint(too_long);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("checkpoint path too long"));
  auto op = OperatorClient::Connect(Options(TokenRole::kView));
  ASSERT_TRUE(op.ok()) << op.status();
  auto st = (*op)->GetStatus();
  ASSERT_TRUE(st.ok()) << st.status();
  ASSERT_LE(st->events.size(), 200u);
  ASSERT_FALSE(st->events.empty());
  size_t bytes = 0;
  for (const std::string& e : st->events) {
    EXPECT_LE(e.size(), 4096u + 256) << e.substr(0, 80);
    bytes += e.size();
  }
  EXPECT_LE(bytes, 200u * (4096 + 256));
  EXPECT_THAT(st->events.back(), HasSubstr("400/"));
}

// The service validates before the job sees a request.
TEST_F(ServerTest, NonsensicalRequestsAreRefusedAndChangeNothing) {
  Start(1);
  auto api = Connect();
  WorkerIdentity who;
  who.host = "h";
  who.pid = 9;
  ASSERT_TRUE(api->Register(who, absl::Seconds(5)).ok());
  ProgressReport bad;
  bad.samples_per_second = std::nan("");
  EXPECT_TRUE(absl::IsInvalidArgument(api->Heartbeat(bad).status()));
  bad = ProgressReport();
  bad.step = -1;
  EXPECT_TRUE(absl::IsInvalidArgument(api->Heartbeat(bad).status()));
  ShardRequest shard;
  shard.dataset_size = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(api->GetShard(shard).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(api->CommitCheckpoint({-1, 0, 0, "/x"})));
  WorkerIdentity nobody;  // empty host
  EXPECT_TRUE(absl::IsInvalidArgument(Connect()->Register(nobody, absl::Seconds(2)).status()));
  // A long failure message is clamped, and the job fails naming the rank.
  ASSERT_TRUE(api->ReportDone(absl::InternalError(std::string(100000, 'x'))).ok());
  JobStatus s = job_->Status();
  EXPECT_EQ(s.state, JobState::kFailed);
  EXPECT_EQ(s.failure.kind, FailureKind::kWorkerError);
  EXPECT_LT(s.failure.text.size(), 5000u);
}

// A coordinator gone because the job is over (its result file says so, for this job and
// generation): a call finding it UNAVAILABLE returns at once instead of retrying until its
// deadline. An earlier generation's result file (a requeue's leftover) is not taken for it.
TEST_F(ServerTest, ACallToTheGoneCoordinatorOfAnEndedJobReturnsAtOnce) {
  Start(1);
  ConnectOptions o = Options();
  o.rpc_timeout = absl::Seconds(3);  // backoff: the last retry comes up to 1.5 s before it
  auto api = ConnectToCoordinator(o);
  ASSERT_TRUE(api.ok()) << api.status();
  server_.reset();  // the coordinator is gone
  auto write_result = [&](int64_t generation) {
    JobResult r;
    r.job_id = contents_.job_id;
    r.generation = generation;
    r.state = "SUCCEEDED";
    r.exit_code = 0;
    ASSERT_TRUE(WriteFileAtomically(JobResultPath(dist_file_), FormatJobResult(r), 0600).ok());
  };
  write_result(contents_.generation + 1);
  absl::Time start = absl::Now();
  absl::Status st = (*api)->Ping();
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(1500)) << "another generation's result";
  write_result(contents_.generation);
  start = absl::Now();
  st = (*api)->Ping();
  const absl::Duration took = absl::Now() - start;
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("the job has ended (SUCCEEDED)"));
  EXPECT_LT(took, absl::Milliseconds(500)) << st;
}

// A call that runs out of its own time got no answer: it is not taken for the reply of an older
// (epoch 0, headerless) coordinator. A Register held past its deadline by the coordinator of
// epoch 1 said "answered by a coordinator of an older epoch (fenced)" in a chaos
// run, which sent the reader after a fencing that had not happened.
TEST_F(ServerTest, ARegisterHeldPastItsDeadlineIsNotCalledFenced) {
  Start(2, absl::Seconds(10), /*epoch=*/1);  // a coordinator that took the job over
  auto api = Connect();
  ASSERT_NE(api, nullptr);
  const auto held = api->Register(NodeWorker(0, 4000), absl::Seconds(1));  // 1 of 2: parked
  ASSERT_FALSE(held.ok());
  EXPECT_THAT(std::string(held.status().message()), Not(HasSubstr("older epoch"))) << held.status();
}

TEST_F(ServerTest, StaleNonceIsRefusedAtConnect) {
  Start(1);
  DistFileContents stale = contents_;
  stale.nonce = std::string(32, 'a');
  std::string path = dir_ + "/stale";
  ASSERT_TRUE(PublishDistFile(path, stale).ok());
  ConnectOptions o = Options();
  o.dist_file = path;
  auto c = ConnectToCoordinator(o);
  EXPECT_TRUE(absl::IsFailedPrecondition(c.status())) << c.status();
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("stale"));
}

TEST_F(ServerTest, WatchStreamsUntilTheJobFinishes) {
  Start(1);
  auto op = OperatorClient::Connect(Options(TokenRole::kControl));
  ASSERT_TRUE(op.ok());
  std::thread finisher([&] {
    auto api = Connect();
    WorkerIdentity who;
    who.host = "h";
    who.pid = 5;
    ASSERT_TRUE(api->Register(who, absl::Seconds(5)).ok());
    absl::SleepFor(absl::Milliseconds(300));
    ASSERT_TRUE(api->ReportDone(absl::OkStatus()).ok());
  });
  int updates = 0;
  JobStatus last;
  absl::Status st = (*op)->Watch(absl::Milliseconds(100), [&](const JobStatus& s) {
    ++updates;
    last = s;
    return true;
  });
  finisher.join();
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_GE(updates, 2);
  EXPECT_EQ(last.state, JobState::kSucceeded);
}

}  // namespace
}  // namespace ddp
