// The node's relay: batching, per-beat outcomes, call failures, the batch window, late replies, a
// relay that goes away (fake sender); the join and shard calls it carries (one node call per
// batch, each worker's own result, a heartbeat while a Rejoin waits, the call window, a relay that
// goes away while a Register waits); and end to end against a real coordinator, where three
// workers register, fetch their shards and heartbeat through one relay, one node call each.
#include "client/heartbeat_relay.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/relay_link.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "tests/client/live_coordinator.h"

namespace ddp {
namespace {

namespace pb = ::slurm_ddp::v1;
using ::testing::HasSubstr;

pb::HeartbeatRequest Beat(int rank, int64_t step) {
  pb::HeartbeatRequest b;
  b.mutable_worker()->set_rank(rank);
  b.mutable_worker()->set_pid(1000 + rank);
  b.mutable_progress()->set_step(step);
  return b;
}

// A sender that records each call's beats and answers each beat with a reason naming its rank
// (or refuses the ranks in `refuse`).
struct RecordingSender {
  absl::Mutex mu;
  std::vector<std::vector<int>> calls;  // ranks per call
  std::vector<int> refuse;
  absl::Duration delay = absl::ZeroDuration();
  absl::Status fail = absl::OkStatus();

  NodeBeatSender sender() {
    return [this](const pb::NodeHeartbeatRequest& req, pb::NodeHeartbeatReply* reply) {
      absl::SleepFor(delay);
      EXPECT_EQ(req.node_rank(), 7);
      std::vector<int> ranks;
      for (const pb::HeartbeatRequest& b : req.beats()) {
        ranks.push_back(b.worker().rank());
        pb::RankHeartbeatReply* r = reply->add_replies();
        if (std::find(refuse.begin(), refuse.end(), b.worker().rank()) != refuse.end()) {
          r->set_code(static_cast<int>(absl::StatusCode::kNotFound));
          r->set_error("no such rank");
        } else {
          r->mutable_reply()->set_reason("for rank " + std::to_string(b.worker().rank()));
          r->mutable_reply()->set_membership_generation(b.progress().step());
        }
      }
      {
        absl::MutexLock lock(&mu);
        calls.push_back(ranks);
      }
      return fail;
    };
  }
  std::vector<std::vector<int>> all_calls() {
    absl::MutexLock lock(&mu);
    return calls;
  }
};

std::unique_ptr<HeartbeatRelay> StartRelay(RecordingSender* s, absl::Duration window) {
  HeartbeatRelayOptions o;
  o.node_rank = 7;
  o.batch_window = window;
  auto relay = HeartbeatRelay::StartWithSender(o, s->sender());
  EXPECT_TRUE(relay.ok()) << relay.status();
  return relay.ok() ? *std::move(relay) : nullptr;
}

// The worker's own copy of its end (after exec it is the worker's; here the relay keeps its own).
std::unique_ptr<RelayLink> Link(HeartbeatRelay* relay) {
  absl::StatusOr<int> fd = relay->AddWorker();
  EXPECT_TRUE(fd.ok()) << fd.status();
  return std::make_unique<RelayLink>(::dup(*fd));
}

struct Outcome {
  absl::Status status;
  pb::HeartbeatReply reply;
};

// Each link sends one heartbeat (rank i, step 10 + i) from its own thread.
std::vector<Outcome> BeatTogether(std::vector<std::unique_ptr<RelayLink>>& links,
                                  absl::Duration timeout) {
  std::vector<Outcome> out(links.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < links.size(); ++i) {
    threads.emplace_back([&, i] {
      out[i].status = links[i]->RoundTrip(Beat(static_cast<int>(i), 10 + static_cast<int64_t>(i)),
                                          /*now=*/false, timeout, &out[i].reply);
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

TEST(HeartbeatRelayTest, TheNodesBeatsGoAsOneCallAndEachWorkerGetsItsOwnReply) {
  RecordingSender s;
  auto relay = StartRelay(&s, absl::Seconds(30));  // only "everyone is waiting" flushes
  std::vector<std::unique_ptr<RelayLink>> links;
  for (int i = 0; i < 4; ++i) links.push_back(Link(relay.get()));
  for (int round = 0; round < 3; ++round) {
    const std::vector<Outcome> out = BeatTogether(links, absl::Seconds(10));
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_TRUE(out[i].status.ok()) << out[i].status;
      EXPECT_EQ(out[i].reply.reason(), "for rank " + std::to_string(i));
      EXPECT_EQ(out[i].reply.membership_generation(), 10 + static_cast<int64_t>(i));
    }
  }
  std::vector<std::vector<int>> calls = s.all_calls();
  ASSERT_EQ(calls.size(), 3u);
  for (std::vector<int>& ranks : calls) {
    std::sort(ranks.begin(), ranks.end());
    EXPECT_EQ(ranks, (std::vector<int>{0, 1, 2, 3}));
  }
  EXPECT_EQ(relay->calls(), 3);
  EXPECT_EQ(relay->beats(), 12);
}

// Workers added right before their beats: wherever the relay's loop is when the later ones are
// added, their beats are waited for. (A worker added between the loop's taking the new sockets
// and its poll once went uncounted, and the first beat was sent alone; the others then waited for
// a batch window longer than their deadline. One trial in many hit it.)
TEST(HeartbeatRelayTest, WorkersAddedRightBeforeTheirBeatsAreWaitedFor) {
  for (int trial = 0; trial < 200; ++trial) {
    RecordingSender s;
    auto relay = StartRelay(&s, absl::Seconds(30));
    std::vector<std::unique_ptr<RelayLink>> links;
    for (int i = 0; i < 3; ++i) links.push_back(Link(relay.get()));
    for (const Outcome& o : BeatTogether(links, absl::Seconds(10))) {
      ASSERT_TRUE(o.status.ok()) << "trial " << trial << ": " << o.status;
    }
    ASSERT_EQ(relay->calls(), 1) << "trial " << trial;
  }
}

TEST(HeartbeatRelayTest, ARefusedBeatFailsAloneWithTheCoordinatorsCode) {
  RecordingSender s;
  s.refuse = {1};
  auto relay = StartRelay(&s, absl::Seconds(30));
  std::vector<std::unique_ptr<RelayLink>> links;
  for (int i = 0; i < 3; ++i) links.push_back(Link(relay.get()));
  const std::vector<Outcome> out = BeatTogether(links, absl::Seconds(10));
  EXPECT_TRUE(out[0].status.ok());
  EXPECT_EQ(out[1].status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(out[1].status.message(), HasSubstr("no such rank"));
  EXPECT_TRUE(out[2].status.ok());
}

TEST(HeartbeatRelayTest, AFailedNodeCallFailsEveryBeatWithItsError) {
  RecordingSender s;
  s.fail = absl::UnavailableError("NodeHeartbeat: coordinator at h:1 unreachable");
  auto relay = StartRelay(&s, absl::Seconds(30));
  std::vector<std::unique_ptr<RelayLink>> links;
  for (int i = 0; i < 2; ++i) links.push_back(Link(relay.get()));
  for (const Outcome& o : BeatTogether(links, absl::Seconds(10))) {
    EXPECT_EQ(o.status.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(o.status.message(), HasSubstr("unreachable"));
  }
}

TEST(HeartbeatRelayTest, ALoneWorkerWaitsAtMostTheBatchWindow) {
  RecordingSender s;
  auto relay = StartRelay(&s, absl::Milliseconds(150));
  auto alone = Link(relay.get());
  auto silent = Link(relay.get());  // a worker that is being respawned sends nothing
  const absl::Time start = absl::Now();
  pb::HeartbeatReply reply;
  ASSERT_TRUE(alone->RoundTrip(Beat(0, 1), /*now=*/false, absl::Seconds(10), &reply).ok());
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(140));
  EXPECT_LT(took, absl::Seconds(3));
  EXPECT_EQ(reply.reason(), "for rank 0");
}

// A worker that waits on its beat (it has just rejoined: ProgressReporter::SendNow) is not held
// for the node's other workers or the batch window; a beat already waiting goes along with it.
TEST(HeartbeatRelayTest, ABeatAWorkerWaitsOnGoesAtOnceWithWhatIsWaiting) {
  RecordingSender s;
  auto relay = StartRelay(&s, absl::Seconds(30));  // batching alone would hold beats 30 s
  auto batched = Link(relay.get());
  auto urgent = Link(relay.get());
  auto silent = Link(relay.get());  // a worker that sends nothing (a warm replacement)
  Outcome first;
  std::thread t([&] {
    first.status = batched->RoundTrip(Beat(0, 1), /*now=*/false, absl::Seconds(20), &first.reply);
  });
  absl::SleepFor(absl::Milliseconds(200));  // rank 0's beat waits in the relay
  const absl::Time start = absl::Now();
  pb::HeartbeatReply reply;
  ASSERT_TRUE(urgent->RoundTrip(Beat(1, 2), /*now=*/true, absl::Seconds(20), &reply).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(reply.reason(), "for rank 1");
  t.join();
  ASSERT_TRUE(first.status.ok()) << first.status;
  EXPECT_EQ(first.reply.reason(), "for rank 0");
  std::vector<std::vector<int>> calls = s.all_calls();
  ASSERT_EQ(calls.size(), 1u);
  std::sort(calls[0].begin(), calls[0].end());
  EXPECT_EQ(calls[0], (std::vector<int>{0, 1}));
}

TEST(HeartbeatRelayTest, AReplyThatComesTooLateIsNotTakenForTheNextOne) {
  RecordingSender s;
  s.delay = absl::Milliseconds(600);
  auto relay = StartRelay(&s, absl::Milliseconds(10));
  auto link = Link(relay.get());
  pb::HeartbeatReply reply;
  absl::Status st = link->RoundTrip(Beat(0, 1), /*now=*/false, absl::Milliseconds(200), &reply);
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(st.message(), HasSubstr("node's relay"));
  // The late reply to step 1 arrives while this call waits; it must answer step 2 only.
  ASSERT_TRUE(link->RoundTrip(Beat(0, 2), /*now=*/false, absl::Seconds(10), &reply).ok());
  EXPECT_EQ(reply.membership_generation(), 2);
}

// Fake node calls: NodeRegister answers worker i (in request order) with rank 10 * pid; a pid in
// `refuse` is refused alone; NodeRejoin waits for `release_rejoin`; NodeGetShard answers each
// request's epoch back with the rank it names.
struct FakeNodeCalls {
  absl::Mutex mu;
  std::vector<std::string> calls;  // "register 3" (method, requests)
  std::vector<int> refuse;
  absl::Notification release_rejoin;
  std::atomic<int> cancelled{0};

  void Record(const std::string& what) {
    absl::MutexLock lock(&mu);
    calls.push_back(what);
  }
  std::vector<std::string> all() {
    absl::MutexLock lock(&mu);
    return calls;
  }
  NodeCallSenders senders(RecordingSender* beats) {
    NodeCallSenders s;
    s.beat = beats->sender();
    s.register_workers = [this](const pb::NodeRegisterRequest& req, absl::Duration timeout,
                                pb::NodeJoinReply* reply) {
      EXPECT_EQ(req.node_rank(), 7);
      EXPECT_GE(timeout, absl::Seconds(9));  // the longest of the requests' deadlines
      Record("register " + std::to_string(req.workers_size()));
      for (const pb::RegisterRequest& w : req.workers()) {
        pb::JoinResult* r = reply->add_results();
        if (std::find(refuse.begin(), refuse.end(), w.pid()) != refuse.end()) {
          r->set_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
          r->set_error("bad nonce");
        } else {
          r->mutable_reply()->set_rank(10 * w.pid());
          r->mutable_reply()->set_local_rank(w.local_rank());
        }
      }
      return absl::OkStatus();
    };
    s.rejoin = [this](const pb::NodeRejoinRequest& req, absl::Duration, pb::NodeJoinReply* reply) {
      Record("rejoin " + std::to_string(req.workers_size()));
      if (!release_rejoin.WaitForNotificationWithTimeout(absl::Seconds(20))) {
        return absl::DeadlineExceededError("NodeRejoin: timed out");
      }
      if (cancelled.load() > 0) return absl::CancelledError("NodeRejoin: cancelled");
      for (const pb::RejoinRequest& w : req.workers()) {
        reply->add_results()->mutable_reply()->set_rank(w.worker().rank() + 100);
      }
      return absl::OkStatus();
    };
    s.get_shard = [this](const pb::NodeGetShardRequest& req, absl::Duration,
                         pb::NodeGetShardReply* reply) {
      Record("shard " + std::to_string(req.shards_size()));
      for (const pb::GetShardRequest& g : req.shards()) {
        pb::GetShardReply* r = reply->add_results()->mutable_reply();
        r->set_epoch(g.epoch());
        r->set_rank(g.worker().rank());
      }
      return absl::OkStatus();
    };
    s.cancel = [this] {
      cancelled.fetch_add(1);
      if (!release_rejoin.HasBeenNotified()) release_rejoin.Notify();
    };
    return s;
  }
};

std::unique_ptr<HeartbeatRelay> StartCallRelay(RecordingSender* beats, FakeNodeCalls* calls,
                                               absl::Duration call_window) {
  HeartbeatRelayOptions o;
  o.node_rank = 7;
  o.batch_window = absl::Seconds(30);
  o.call_window = call_window;
  o.register_window = call_window;
  auto relay = HeartbeatRelay::StartWithSenders(o, calls->senders(beats));
  EXPECT_TRUE(relay.ok()) << relay.status();
  return relay.ok() ? *std::move(relay) : nullptr;
}

pb::RegisterRequest Who(int local_rank) {
  pb::RegisterRequest r;
  r.set_local_rank(local_rank);
  r.set_pid(100 + local_rank);
  return r;
}

TEST(HeartbeatRelayTest, TheNodesRegistersGoAsOneCallAndARefusedOneFailsAlone) {
  RecordingSender beats;
  FakeNodeCalls fake;
  fake.refuse = {102};
  auto relay = StartCallRelay(&beats, &fake, absl::Seconds(30));  // only "every worker" flushes
  std::vector<std::unique_ptr<RelayLink>> links;
  for (int i = 0; i < 4; ++i) links.push_back(Link(relay.get()));
  std::vector<absl::StatusOr<pb::RegisterReply>> out(4, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back(
        [&, i] { out[i] = links[i]->Register(Who(i), absl::Seconds(10), absl::Seconds(20)); });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < 4; ++i) {
    if (i == 2) {
      EXPECT_EQ(out[i].status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(out[i].status().message(), HasSubstr("bad nonce"));
      continue;
    }
    ASSERT_TRUE(out[i].ok()) << i << ": " << out[i].status();
    EXPECT_EQ(out[i]->rank(), 10 * (100 + i));
    EXPECT_EQ(out[i]->local_rank(), i);
  }
  EXPECT_EQ(fake.all(), (std::vector<std::string>{"register 4"}));
  EXPECT_EQ(relay->node_calls(), 1);
  EXPECT_EQ(relay->node_requests(), 4);
}

// While the survivors' Rejoin waits in the coordinator, their heartbeats still go (on the same
// socket), and the replacement's Register goes at once (every worker has a call out) in a node
// call of its own; the survivors' answers come when the rejoin call returns.
TEST(HeartbeatRelayTest, HeartbeatsAndTheReplacementsRegisterGoWhileARejoinWaits) {
  RecordingSender beats;
  FakeNodeCalls fake;
  auto relay = StartCallRelay(&beats, &fake, absl::Seconds(30));
  std::vector<std::unique_ptr<RelayLink>> links;
  for (int i = 0; i < 3; ++i) links.push_back(Link(relay.get()));
  std::vector<absl::StatusOr<pb::RegisterReply>> rejoined(2, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      pb::RejoinRequest r;
      r.mutable_worker()->set_rank(i);
      rejoined[i] = links[i]->Rejoin(r, absl::Seconds(10), absl::Seconds(30));
    });
  }
  // Survivors 0 and 1 wait; the third worker (the dead one's slot) has sent nothing, so the
  // rejoins wait for it (the window is 30 s) until its replacement registers.
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_TRUE(fake.all().empty());
  const absl::Time start = absl::Now();
  absl::StatusOr<pb::RegisterReply> replacement = absl::UnknownError("not run");
  std::thread reg(
      [&] { replacement = links[2]->Register(Who(2), absl::Seconds(10), absl::Seconds(20)); });
  // The rejoin call is out (it holds the survivors) and the Register goes in its own call.
  reg.join();
  ASSERT_TRUE(replacement.ok()) << replacement.status();
  EXPECT_EQ(replacement->rank(), 1020);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  // A survivor's heartbeat is answered while its Rejoin is still out.
  pb::HeartbeatReply reply;
  ASSERT_TRUE(links[0]->RoundTrip(Beat(0, 3), /*now=*/true, absl::Seconds(10), &reply).ok());
  EXPECT_EQ(reply.reason(), "for rank 0");
  fake.release_rejoin.Notify();
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(rejoined[i].ok()) << rejoined[i].status();
    EXPECT_EQ(rejoined[i]->rank(), 100 + i);
  }
  std::vector<std::string> calls = fake.all();  // two calls, each on its own thread
  std::sort(calls.begin(), calls.end());
  EXPECT_EQ(calls, (std::vector<std::string>{"register 1", "rejoin 2"}));
}

TEST(HeartbeatRelayTest, ALoneShardRequestWaitsAtMostTheCallWindow) {
  RecordingSender beats;
  FakeNodeCalls fake;
  auto relay = StartCallRelay(&beats, &fake, absl::Milliseconds(150));
  auto alone = Link(relay.get());
  auto silent = Link(relay.get());
  pb::GetShardRequest g;
  g.set_epoch(4);
  g.mutable_worker()->set_rank(3);
  const absl::Time start = absl::Now();
  absl::StatusOr<pb::GetShardReply> r = alone->GetShard(g, absl::Seconds(5), absl::Seconds(10));
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->epoch(), 4);
  EXPECT_EQ(r->rank(), 3);
  EXPECT_GE(took, absl::Milliseconds(140));
  EXPECT_LT(took, absl::Seconds(3));
  EXPECT_EQ(fake.all(), (std::vector<std::string>{"shard 1"}));
}

// A NodeHeartbeat that hangs (an unreachable coordinator: the call retries until its deadline)
// holds no other call of the node's workers.
TEST(HeartbeatRelayTest, AHangingHeartbeatCallHoldsNoOtherCall) {
  RecordingSender beats;
  beats.delay = absl::Seconds(3);
  FakeNodeCalls fake;
  auto relay = StartCallRelay(&beats, &fake, absl::Milliseconds(1));
  auto link = Link(relay.get());
  std::thread beat([&] {
    pb::HeartbeatReply reply;
    EXPECT_TRUE(link->RoundTrip(Beat(0, 1), /*now=*/true, absl::Seconds(10), &reply).ok());
  });
  absl::SleepFor(absl::Milliseconds(200));  // the heartbeat call is out and hangs
  pb::GetShardRequest g;
  g.set_epoch(2);
  const absl::Time start = absl::Now();
  absl::StatusOr<pb::GetShardReply> r = link->GetShard(g, absl::Seconds(5), absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  beat.join();
}

// The coordinator's "not now" for one request (UNAVAILABLE in its result: a replacement that
// registers before a restored coordinator has heard of its predecessor's loss) is asked again,
// as the worker's own call would have been; any other refusal is final.
TEST(HeartbeatRelayTest, ARequestTheCoordinatorAnswersUnavailableIsAskedAgain) {
  RecordingSender beats;
  FakeNodeCalls fake;
  NodeCallSenders senders = fake.senders(&beats);
  std::atomic<int> tries{0};
  senders.register_workers = [&](const pb::NodeRegisterRequest& req, absl::Duration,
                                 pb::NodeJoinReply* reply) {
    pb::JoinResult* r = reply->add_results();
    if (tries.fetch_add(1) < 2) {
      r->set_code(static_cast<int>(absl::StatusCode::kUnavailable));
      r->set_error("not heard from since the restart; retry");
    } else {
      r->mutable_reply()->set_rank(7);
    }
    EXPECT_EQ(req.workers_size(), 1);
    return absl::OkStatus();
  };
  HeartbeatRelayOptions o;
  o.node_rank = 7;
  o.call_window = absl::Milliseconds(1);
  o.register_window = absl::Milliseconds(1);
  auto relay = HeartbeatRelay::StartWithSenders(o, senders);
  ASSERT_TRUE(relay.ok());
  auto link = Link(relay->get());
  absl::StatusOr<pb::RegisterReply> r =
      link->Register(Who(0), absl::Seconds(10), absl::Seconds(11));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rank(), 7);
  EXPECT_EQ(tries.load(), 3);
  // A refusal of another kind is not asked again.
  FakeNodeCalls refusing;
  refusing.refuse = {100};
  auto relay2 = StartCallRelay(&beats, &refusing, absl::Milliseconds(1));
  auto link2 = Link(relay2.get());
  r = link2->Register(Who(0), absl::Seconds(10), absl::Seconds(11));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refusing.all().size(), 1u);
}

// The task ends while a Register waits for the world: the node call is cancelled and the worker
// learns at once that its task is gone, instead of waiting out its deadline.
TEST(HeartbeatRelayTest, ARelayThatEndsCancelsTheCallsInFlight) {
  RecordingSender beats;
  FakeNodeCalls fake;
  auto relay = StartCallRelay(&beats, &fake, absl::Milliseconds(10));
  auto link = Link(relay.get());
  absl::StatusOr<pb::RegisterReply> rejoined = absl::UnknownError("not run");
  std::thread t([&] {
    pb::RejoinRequest r;
    rejoined = link->Rejoin(r, absl::Seconds(20), absl::Seconds(30));
  });
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time start = absl::Now();
  relay.reset();
  t.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(fake.cancelled.load(), 1);
  EXPECT_FALSE(rejoined.ok());
}

TEST(HeartbeatRelayTest, AWorkerWhoseTaskIsGoneSeesUnavailable) {
  RecordingSender s;
  auto relay = StartRelay(&s, absl::Milliseconds(10));
  auto link = Link(relay.get());
  relay.reset();  // the task ended: its end of every socket is closed
  pb::HeartbeatReply reply;
  absl::Status st = link->RoundTrip(Beat(0, 1), /*now=*/false, absl::Seconds(5), &reply);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
}

// A real coordinator: three workers register, then heartbeat through one relay; the coordinator
// answers them in one NodeHeartbeat and each rank's progress is its own.
TEST(HeartbeatRelayTest, ThroughARealCoordinatorEachRankKeepsItsOwnProgress) {
  LiveCoordinator c("relay", /*world_size=*/3, /*max_restarts=*/0);
  ASSERT_TRUE(c.server.ok()) << c.server.status();
  const DistFileContents& contents = c.contents;
  const ConnectOptions co = c.connect(contents.token);
  // The task and its workers find the coordinator through the job's dist_file, as in a job.
  DistFileContents published = contents;
  published.grpc_address = co.address;
  published.tls_cert = co.tls_cert;
  const std::string dist_file = ::testing::TempDir() + "/relay_dist_file";
  ASSERT_TRUE(PublishDistFile(dist_file, published).ok());
  ConnectOptions by_file;
  by_file.dist_file = dist_file;
  by_file.expected_job_id = "relay";
  by_file.dist_file_timeout = absl::Seconds(5);

  HeartbeatRelayOptions ro;
  ro.connect = by_file;
  ro.node_rank = 0;
  ro.batch_window = absl::Seconds(30);
  ro.call_window = absl::Seconds(30);  // only "every worker has one" sends a node call
  ro.register_window = absl::Seconds(30);
  auto relay = HeartbeatRelay::Start(ro);
  ASSERT_TRUE(relay.ok()) << relay.status();
  std::vector<std::unique_ptr<CoordinatorApi>> workers;
  for (int i = 0; i < 3; ++i) {
    ConnectOptions wo = by_file;
    absl::StatusOr<int> fd = (*relay)->AddWorker();
    ASSERT_TRUE(fd.ok());
    wo.heartbeat_relay_fd = ::dup(*fd);
    auto api = ConnectToCoordinator(wo);
    ASSERT_TRUE(api.ok()) << api.status();
    workers.push_back(*std::move(api));
  }
  std::vector<std::thread> threads;
  std::vector<int> ranks(3, -1);
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      WorkerIdentity who;
      who.host = "n0";
      who.local_rank = i;
      who.local_world_size = 3;
      who.pid = 1000 + i;  // Beat()'s pids: rank i is local rank i
      who.nonce = contents.nonce;
      auto a = workers[i]->Register(who, absl::Seconds(10));
      if (a.ok()) ranks[i] = a->rank;
    });
  }
  for (std::thread& t : threads) t.join();
  threads.clear();
  // The three registrations went as one NodeRegister, and each worker has its own rank.
  EXPECT_EQ((*relay)->node_calls(), 1);
  EXPECT_EQ((*relay)->node_requests(), 3);
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2}));
  std::vector<absl::StatusOr<ShardAssignment>> shards(3, absl::UnknownError("not run"));
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      ShardRequest req;
      req.epoch = 0;
      req.dataset_size = 30;
      req.seed = 5;
      shards[i] = workers[i]->GetShard(req);
    });
  }
  for (std::thread& t : threads) t.join();
  threads.clear();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(shards[i].ok()) << shards[i].status();
    EXPECT_EQ(shards[i]->rank, ranks[i]);
    EXPECT_EQ(shards[i]->world_size, 3);
  }
  EXPECT_EQ((*relay)->node_calls(), 2);  // one NodeGetShard
  EXPECT_EQ((*relay)->node_requests(), 6);
  // The workers opened no connection: their Hello went through the relay, and so do their
  // store's calls (a StoreGet that waits for another worker's StoreSet).
  EXPECT_EQ((*relay)->unary_calls(), 3);  // the three Hellos
  absl::StatusOr<std::vector<uint8_t>> got = absl::UnknownError("not run");
  std::thread getter([&] { got = workers[1]->StoreGet("relay/key", absl::Seconds(10)); });
  absl::SleepFor(absl::Milliseconds(100));
  ASSERT_TRUE(workers[0]->StoreSet("relay/key", {'v', '1'}).ok());
  getter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(std::string(got->begin(), got->end()), "v1");
  absl::StatusOr<int64_t> added = workers[2]->StoreAdd("relay/count", 5);
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(*added, 5);
  EXPECT_EQ((*relay)->unary_calls(), 6);
  std::vector<absl::Status> results(3);
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      ProgressReport p;
      p.phase = WorkerPhase::kTraining;
      p.step = 100 + ranks[i];
      auto r = workers[i]->Heartbeat(p);
      results[i] = r.status();
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& st : results) EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ((*relay)->calls(), 1);
  EXPECT_EQ((*relay)->beats(), 3);
  const JobStatus status = c.job.Status();
  ASSERT_EQ(status.ranks.size(), 3u);
  for (const RankStatus& r : status.ranks) EXPECT_EQ(r.step, 100 + r.rank) << r.rank;

  // Over the wire by hand: each beat is judged alone; too many beats refuse the call.
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = co.tls_cert;
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride(kTlsServerName);
  auto stub = pb::Coordinator::NewStub(
      grpc::CreateCustomChannel(co.address, grpc::SslCredentials(ssl), args));
  pb::NodeHeartbeatRequest req;
  *req.add_beats() = Beat(0, 5);
  *req.add_beats() = Beat(1, 5);
  req.mutable_beats(1)->mutable_worker()->set_pid(999);  // not the process that registered
  *req.add_beats() = Beat(2, -1);
  pb::NodeHeartbeatReply reply;
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + contents.token);
  ASSERT_TRUE(stub->NodeHeartbeat(&ctx, req, &reply).ok());
  ASSERT_EQ(reply.replies_size(), 3);
  EXPECT_EQ(reply.replies(0).code(), 0) << reply.replies(0).error();
  EXPECT_NE(reply.replies(1).code(), 0);
  EXPECT_EQ(reply.replies(2).code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  pb::NodeHeartbeatRequest big;
  for (int i = 0; i <= 4096; ++i) *big.add_beats() = Beat(0, 1);
  grpc::ClientContext ctx2;
  ctx2.AddMetadata("authorization", "Bearer " + contents.token);
  const grpc::Status refused = stub->NodeHeartbeat(&ctx2, big, &reply);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("4097 beats"));
  grpc::ClientContext ctx3;
  ctx3.AddMetadata("authorization", "Bearer " + contents.view_token);
  EXPECT_EQ(stub->NodeHeartbeat(&ctx3, req, &reply).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  {
    // A call the relay does not make for a worker is refused by name.
    absl::StatusOr<int> fd = (*relay)->AddWorker();
    ASSERT_TRUE(fd.ok());
    RelayLink link(::dup(*fd));
    absl::StatusOr<std::string> unknown =
        link.Unary("Stop", "", absl::Seconds(5), absl::Seconds(10));
    EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument) << unknown.status();
    EXPECT_THAT(unknown.status().message(), HasSubstr("does not make a call named 'Stop'"));
  }
}

}  // namespace
}  // namespace ddp
