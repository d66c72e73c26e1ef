// NODE CALLS (proto/coordinator.proto) against a real coordinator over TLS: NodeRegister,
// NodeGetShard and NodeRejoin carry several workers' calls in one, each request is judged as the
// call of its own (a refused request fails alone, in its place in the reply), the joins answer
// once the world (or the next membership generation) is complete, and a recovery re-forms through
// them: the survivors rejoin in one call per node, the replacement registers through its node's.
// A registration may carry its first GetShard, answered with it.
#include <grpcpp/grpcpp.h>

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/dist_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "tests/client/live_coordinator.h"

namespace ddp {
namespace {

namespace pb = ::slurm_ddp::v1;
using ::testing::HasSubstr;

constexpr int kNodes = 2;
constexpr int kPerNode = 2;

class NodeCallsTest : public ::testing::Test {
 protected:
  NodeCallsTest() : c_("nodes", kNodes * kPerNode, /*max_restarts=*/1) {}

  void SetUp() override {
    ASSERT_TRUE(c_.server.ok()) << c_.server.status();
    const ConnectOptions co = c_.connect(c_.contents.token);
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = co.tls_cert;
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride(kTlsServerName);
    stub_ = pb::Coordinator::NewStub(
        grpc::CreateCustomChannel(co.address, grpc::SslCredentials(ssl), args));
  }

  std::unique_ptr<grpc::ClientContext> Context(const std::string& token = "") {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->AddMetadata("authorization", "Bearer " + (token.empty() ? c_.contents.token : token));
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return ctx;
  }

  pb::RegisterRequest Worker(int node, int local, int pid) const {
    pb::RegisterRequest w;
    w.set_host(absl::StrCat("n", node));
    w.set_node_rank(node);
    w.set_local_rank(local);
    w.set_local_world_size(kPerNode);
    w.set_pid(pid);
    w.set_nonce(c_.contents.nonce);
    return w;
  }

  // The task of `node` reports its worker `pid` (local rank `local`) killed; the decision.
  pb::LostAction ReportKilled(int node, int local, int pid) {
    pb::ReportLostRequest lost;
    lost.set_node_rank(node);
    lost.set_local_rank(local);
    lost.set_pid(pid);
    lost.set_what("killed by signal 9");
    lost.set_signal(9);
    pb::ReportLostReply decision;
    auto ctx = Context();
    const grpc::Status st = stub_->ReportLost(ctx.get(), lost, &decision);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return decision.action();
  }

  static pb::GetShardRequest Shard(int rank, int pid) {
    pb::GetShardRequest q;
    q.mutable_worker()->set_rank(rank);
    q.mutable_worker()->set_pid(pid);
    q.set_epoch(0);
    q.set_dataset_size(1000);
    q.set_shuffle(true);
    return q;
  }

  LiveCoordinator c_;
  std::unique_ptr<pb::Coordinator::Stub> stub_;
};

TEST_F(NodeCallsTest, EachRequestIsJudgedAloneAndARecoveryReformsThroughThem) {
  pb::NodeRegisterRequest reg[kNodes];
  pb::NodeJoinReply joined[kNodes];
  grpc::Status status[kNodes];
  for (int n = 0; n < kNodes; ++n) {
    reg[n].set_node_rank(n);
    for (int l = 0; l < kPerNode; ++l) *reg[n].add_workers() = Worker(n, l, 100 + n * 10 + l);
  }
  // Node 0's first NodeRegister carries a third, malformed request: it is refused in its place,
  // and the call is answered at once, not when the world is complete: the other two are told to
  // send theirs again (a refusal must reach its worker while its node-mates wait).
  {
    pb::NodeRegisterRequest with_bad = reg[0];
    *with_bad.add_workers() = Worker(0, 7, 999);
    with_bad.mutable_workers(2)->set_local_world_size(0);  // refused by validation
    pb::NodeJoinReply early;
    auto ctx = Context();
    ASSERT_TRUE(stub_->NodeRegister(ctx.get(), with_bad, &early).ok());
    ASSERT_EQ(early.results_size(), 3);
    for (int l = 0; l < kPerNode; ++l) {
      EXPECT_EQ(early.results(l).code(), static_cast<int>(absl::StatusCode::kUnavailable));
      EXPECT_THAT(early.results(l).error(), HasSubstr("send it again"));
    }
    EXPECT_EQ(early.results(2).code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  }
  // Start-up: one NodeRegister per node (node 0's two send theirs again).
  std::vector<std::thread> threads;
  for (int n = 0; n < kNodes; ++n) {
    threads.emplace_back([&, n] {
      auto ctx = Context();
      status[n] = stub_->NodeRegister(ctx.get(), reg[n], &joined[n]);
    });
  }
  for (std::thread& t : threads) t.join();
  threads.clear();
  std::set<int> ranks;
  int rank_of[kNodes][kPerNode];
  for (int n = 0; n < kNodes; ++n) {
    ASSERT_TRUE(status[n].ok()) << status[n].error_message();
    ASSERT_EQ(joined[n].results_size(), reg[n].workers_size());
    for (int l = 0; l < kPerNode; ++l) {
      const pb::JoinResult& r = joined[n].results(l);
      ASSERT_EQ(r.code(), 0) << r.error();
      EXPECT_EQ(r.reply().world_size(), kNodes * kPerNode);
      EXPECT_EQ(r.reply().membership_generation(), 0);
      EXPECT_EQ(r.reply().node_rank(), n);
      EXPECT_EQ(r.reply().local_rank(), l);
      rank_of[n][l] = r.reply().rank();
      ranks.insert(r.reply().rank());
    }
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));

  // Shards: node 0's, plus a request under a pid that is not the registered one.
  pb::NodeGetShardRequest shards;
  shards.set_node_rank(0);
  for (int l = 0; l < kPerNode; ++l) *shards.add_shards() = Shard(rank_of[0][l], 100 + l);
  *shards.add_shards() = Shard(rank_of[0][0], 555);
  pb::NodeGetShardReply got;
  {
    auto ctx = Context();
    ASSERT_TRUE(stub_->NodeGetShard(ctx.get(), shards, &got).ok());
  }
  ASSERT_EQ(got.results_size(), 3);
  for (int l = 0; l < kPerNode; ++l) {
    ASSERT_EQ(got.results(l).code(), 0) << got.results(l).error();
    EXPECT_EQ(got.results(l).reply().rank(), rank_of[0][l]);
    EXPECT_EQ(got.results(l).reply().world_size(), kNodes * kPerNode);
  }
  EXPECT_NE(got.results(2).code(), 0);

  // Node 1's local rank 1 dies: its task reports it and carries its replacement's Register; the
  // three survivors rejoin in one NodeRejoin per node.
  EXPECT_EQ(ReportKilled(1, 1, 111), pb::LOST_ACTION_RESPAWN);
  pb::NodeRejoinRequest rejoin[kNodes];
  pb::NodeJoinReply rejoined[kNodes];
  pb::NodeRegisterRequest replacement;
  pb::NodeJoinReply replaced;
  for (int n = 0; n < kNodes; ++n) {
    rejoin[n].set_node_rank(n);
    for (int l = 0; l < kPerNode; ++l) {
      if (n == 1 && l == 1) continue;
      pb::RejoinRequest* q = rejoin[n].add_workers();
      q->mutable_worker()->set_rank(rank_of[n][l]);
      q->mutable_worker()->set_pid(100 + n * 10 + l);
      q->set_membership_generation(0);
      q->set_committed_step(7);
      q->set_reason("allreduce failed");
    }
  }
  replacement.set_node_rank(1);
  *replacement.add_workers() = Worker(1, 1, 211);
  // A replacement started with the job's flags asks for the start of epoch 0, where the job began;
  // the survivors are further on.
  *replacement.mutable_workers(0)->mutable_first_shard() = Shard(-1, -1);
  for (int n = 0; n < kNodes; ++n) {
    threads.emplace_back([&, n] {
      auto ctx = Context();
      status[n] = stub_->NodeRejoin(ctx.get(), rejoin[n], &rejoined[n]);
    });
  }
  grpc::Status replaced_status;
  threads.emplace_back([&] {
    auto ctx = Context();
    replaced_status = stub_->NodeRegister(ctx.get(), replacement, &replaced);
  });
  for (std::thread& t : threads) t.join();
  for (int n = 0; n < kNodes; ++n) {
    ASSERT_TRUE(status[n].ok()) << status[n].error_message();
    ASSERT_EQ(rejoined[n].results_size(), rejoin[n].workers_size());
    for (int i = 0; i < rejoined[n].results_size(); ++i) {
      const pb::JoinResult& r = rejoined[n].results(i);
      ASSERT_EQ(r.code(), 0) << r.error();
      EXPECT_EQ(r.reply().membership_generation(), 1);
      EXPECT_EQ(r.reply().rank(), rejoin[n].workers(i).worker().rank());
      EXPECT_TRUE(r.reply().state_from_peers());
    }
  }
  ASSERT_TRUE(replaced_status.ok()) << replaced_status.error_message();
  ASSERT_EQ(replaced.results_size(), 1);
  ASSERT_EQ(replaced.results(0).code(), 0) << replaced.results(0).error();
  EXPECT_EQ(replaced.results(0).reply().rank(), rank_of[1][1]);
  EXPECT_EQ(replaced.results(0).reply().membership_generation(), 1);
  EXPECT_EQ(c_.job.Status().restarts, 1);
  // Not answered after the first generation: judged first, it would have set epoch 0's terms to
  // its own, and the survivors' request (resumed at their position) would be refused.
  EXPECT_FALSE(replaced.results(0).reply().has_first_shard());
  pb::NodeGetShardRequest resumed;
  resumed.set_node_rank(0);
  for (int l = 0; l < kPerNode; ++l) {
    pb::GetShardRequest* q = resumed.add_shards();
    *q = Shard(rank_of[0][l], 100 + l);
    q->set_resume_consumed(28);
    q->set_resume_world_size(kNodes * kPerNode);
  }
  pb::NodeGetShardReply resumed_got;
  {
    auto ctx = Context();
    ASSERT_TRUE(stub_->NodeGetShard(ctx.get(), resumed, &resumed_got).ok());
  }
  ASSERT_EQ(resumed_got.results_size(), kPerNode);
  for (int l = 0; l < kPerNode; ++l) {
    ASSERT_EQ(resumed_got.results(l).code(), 0) << resumed_got.results(l).error();
    EXPECT_EQ(resumed_got.results(l).reply().consumed(), 28);
  }

  // A rejoin from the generation before is refused alone, in its place.
  pb::NodeRejoinRequest stale = rejoin[0];
  pb::NodeJoinReply refused;
  {
    auto ctx = Context();
    ASSERT_TRUE(stub_->NodeRejoin(ctx.get(), stale, &refused).ok());
  }
  ASSERT_EQ(refused.results_size(), stale.workers_size());
  for (const pb::JoinResult& r : refused.results()) {
    EXPECT_EQ(r.code(), static_cast<int>(absl::StatusCode::kFailedPrecondition)) << r.error();
  }
}

TEST_F(NodeCallsTest, ARegistrationCarriesItsFirstShardJudgedAsItsOwnGetShard) {
  // Node 0 registers through one NodeRegister, node 1's workers each with a Register of their
  // own. Three ask for their first shard inside the registration; node 0's second asks with a
  // malformed request; node 1's second does not ask.
  pb::NodeRegisterRequest reg;
  reg.set_node_rank(0);
  for (int l = 0; l < kPerNode; ++l) {
    pb::RegisterRequest* w = reg.add_workers();
    *w = Worker(0, l, 100 + l);
    *w->mutable_first_shard() = Shard(-1, -1);  // its worker field is ignored
  }
  reg.mutable_workers(1)->mutable_first_shard()->set_dataset_size(0);
  pb::RegisterRequest own[kPerNode];
  for (int l = 0; l < kPerNode; ++l) own[l] = Worker(1, l, 110 + l);
  *own[0].mutable_first_shard() = Shard(-1, -1);
  pb::NodeJoinReply joined;
  pb::RegisterReply own_reply[kPerNode];
  grpc::Status node_status;
  grpc::Status own_status[kPerNode];
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    auto ctx = Context();
    node_status = stub_->NodeRegister(ctx.get(), reg, &joined);
  });
  for (int l = 0; l < kPerNode; ++l) {
    threads.emplace_back([&, l] {
      auto ctx = Context();
      own_status[l] = stub_->Register(ctx.get(), own[l], &own_reply[l]);
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(node_status.ok()) << node_status.error_message();
  ASSERT_EQ(joined.results_size(), kPerNode);
  for (int l = 0; l < kPerNode; ++l) {
    ASSERT_TRUE(own_status[l].ok()) << own_status[l].error_message();
    ASSERT_EQ(joined.results(l).code(), 0) << joined.results(l).error();  // registered alike
  }

  // Granted: the shard of the rank the registration gave, in the complete world.
  const pb::RegisterReply& a = joined.results(0).reply();
  ASSERT_TRUE(a.has_first_shard());
  ASSERT_EQ(a.first_shard().code(), 0) << a.first_shard().error();
  EXPECT_EQ(a.first_shard().reply().rank(), a.rank());
  EXPECT_EQ(a.first_shard().reply().world_size(), kNodes * kPerNode);
  EXPECT_EQ(a.first_shard().reply().dataset_size(), 1000);
  EXPECT_EQ(a.first_shard().reply().epoch(), 0);
  ASSERT_TRUE(own_reply[0].has_first_shard());
  ASSERT_EQ(own_reply[0].first_shard().code(), 0) << own_reply[0].first_shard().error();
  EXPECT_EQ(own_reply[0].first_shard().reply().rank(), own_reply[0].rank());
  // Refused alone: the registration stands, the shard carries the error GetShard gives.
  const pb::RegisterReply& b = joined.results(1).reply();
  ASSERT_TRUE(b.has_first_shard());
  EXPECT_EQ(b.first_shard().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(b.first_shard().error(), HasSubstr("dataset_size"));
  // Not asked: none.
  EXPECT_FALSE(own_reply[1].has_first_shard());

  // The same answer a GetShard of its own gets now, for the ranks that asked and the one that
  // did not.
  for (const auto& [reply, pid] : {std::pair<const pb::RegisterReply*, int>{&a, 100},
                                   {&own_reply[0], 110},
                                   {&own_reply[1], 111}}) {
    pb::GetShardReply direct;
    auto ctx = Context();
    ASSERT_TRUE(stub_->GetShard(ctx.get(), Shard(reply->rank(), pid), &direct).ok());
    if (reply->has_first_shard()) {
      EXPECT_EQ(direct.SerializeAsString(), reply->first_shard().reply().SerializeAsString());
    }
    EXPECT_EQ(direct.rank(), reply->rank());
  }
}

// A recovery: node 0's local rank 0 was reported lost, and its task's relay carries its
// replacement's registration with one for local rank 1, whose slot its live worker still holds
// (a replacement a moment too early). The refusal is answered at once, and the replacement that
// would wait for the generation is told to send its registration again: held until the
// generation formed, the refused worker could not have retried, and the generation could need it.
TEST_F(NodeCallsTest, ARefusalInANodeRegisterIsAnsweredWhileItsNodeMateWouldWait) {
  std::vector<std::thread> threads;
  grpc::Status status[kNodes];
  for (int n = 0; n < kNodes; ++n) {
    threads.emplace_back([&, n] {
      pb::NodeRegisterRequest reg;
      reg.set_node_rank(n);
      for (int l = 0; l < kPerNode; ++l) *reg.add_workers() = Worker(n, l, 100 + n * 10 + l);
      pb::NodeJoinReply joined;
      auto ctx = Context();
      status[n] = stub_->NodeRegister(ctx.get(), reg, &joined);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const grpc::Status& st : status) ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(ReportKilled(0, 0, 100), pb::LOST_ACTION_RESPAWN);
  pb::NodeRegisterRequest both;
  both.set_node_rank(0);
  *both.add_workers() = Worker(0, 0, 200);
  *both.add_workers() = Worker(0, 1, 201);
  pb::NodeJoinReply reply;
  auto ctx = Context();
  const grpc::Status st = stub_->NodeRegister(ctx.get(), both, &reply);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(reply.results_size(), 2);
  EXPECT_EQ(reply.results(0).code(), static_cast<int>(absl::StatusCode::kUnavailable))
      << reply.results(0).error();
  EXPECT_EQ(reply.results(1).code(), static_cast<int>(absl::StatusCode::kAlreadyExists))
      << reply.results(1).error();
  // The replacement sends its registration again and the generation forms with the survivors.
  pb::NodeRegisterRequest again;
  again.set_node_rank(0);
  *again.add_workers() = Worker(0, 0, 200);
  pb::NodeRejoinRequest rejoin;
  const int survivors[][2] = {{1, 101}, {2, 110}, {3, 111}};  // rank, pid
  for (const auto& [rank, pid] : survivors) {
    pb::RejoinRequest* q = rejoin.add_workers();
    q->mutable_worker()->set_rank(rank);
    q->mutable_worker()->set_pid(pid);
    q->set_committed_step(3);
    q->set_reason("allreduce failed");
  }
  pb::NodeJoinReply registered;
  pb::NodeJoinReply rejoined;
  grpc::Status again_status;
  grpc::Status rejoin_status;
  threads.clear();
  threads.emplace_back([&] {
    auto c = Context();
    again_status = stub_->NodeRegister(c.get(), again, &registered);
  });
  threads.emplace_back([&] {
    auto c = Context();
    rejoin_status = stub_->NodeRejoin(c.get(), rejoin, &rejoined);
  });
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(again_status.ok()) << again_status.error_message();
  ASSERT_TRUE(rejoin_status.ok()) << rejoin_status.error_message();
  ASSERT_EQ(registered.results(0).code(), 0) << registered.results(0).error();
  EXPECT_EQ(registered.results(0).reply().membership_generation(), 1);
  for (const pb::JoinResult& r : rejoined.results()) {
    ASSERT_EQ(r.code(), 0) << r.error();
    EXPECT_EQ(r.reply().membership_generation(), 1);
  }
}

TEST_F(NodeCallsTest, TooManyRequestsOrTheViewTokenRefuseTheWholeCall) {
  pb::NodeGetShardRequest big;
  for (int i = 0; i <= 4096; ++i) *big.add_shards() = Shard(0, 1);
  pb::NodeGetShardReply reply;
  auto ctx = Context();
  const grpc::Status refused = stub_->NodeGetShard(ctx.get(), big, &reply);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("4097 requests"));
  pb::NodeRegisterRequest reg;
  *reg.add_workers() = Worker(0, 0, 1);
  pb::NodeJoinReply joined;
  auto view = Context(c_.contents.view_token);
  EXPECT_EQ(stub_->NodeRegister(view.get(), reg, &joined).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  pb::NodeRejoinRequest rejoin;
  for (int i = 0; i <= 4096; ++i) rejoin.add_workers()->set_committed_step(1);
  auto ctx2 = Context();
  const grpc::Status too_many = stub_->NodeRejoin(ctx2.get(), rejoin, &joined);
  EXPECT_EQ(too_many.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(too_many.error_message(), HasSubstr("4097 requests"));
}

}  // namespace
}  // namespace ddp
