#include "client/coordinator_client.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/relay_link.h"
#include "client/rpc_channel.h"
#include "common/dist_file.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "proto/convert.h"

namespace ddp {
namespace {

namespace pb = ::slurm_ddp::v1;

// Slack added to a blocking call's own timeout so the server's answer beats the RPC deadline.
constexpr absl::Duration kBlockingSlack = absl::Seconds(5);
// What a relayed call may take beyond the node call's deadline (the batch window and the hop
// through the task); well under ProgressReporter's suspend margin.
constexpr absl::Duration kRelaySlack = absl::Milliseconds(500);

std::string ToString(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }
std::vector<uint8_t> ToBytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}
int64_t ToMillis(absl::Duration d) { return std::max<int64_t>(1, absl::ToInt64Milliseconds(d)); }

class GrpcCoordinatorClient final : public CoordinatorApi {
 public:
  GrpcCoordinatorClient(std::unique_ptr<RpcChannel> channel, std::unique_ptr<RelayLink> relay)
      : ch_(std::move(channel)), relay_(std::move(relay)), client_id_(NewClientId()) {}

  absl::StatusOr<RankAssignment> Register(const WorkerIdentity& who,
                                          absl::Duration timeout) override {
    WorkerIdentity self = who;
    if (self.pid == 0) self.pid = static_cast<int>(::getpid());
    if (self.nonce.empty()) self.nonce = ch_->endpoint().nonce;
    self.host = WireText(self.host, 255);
    self.node_name = WireText(self.node_name, 255);
    pb::RegisterRequest req;
    ToProto(self, &req);
    pb::RegisterReply reply;
    if (relay_ != nullptr) {
      ASSIGN_OR_RETURN(reply, relay_->Register(req, timeout, timeout + kRelaySlack));
    } else {
      RETURN_IF_ERROR(ch_->Call("Register", timeout, [&](grpc::ClientContext* ctx) {
        return ch_->stub().Register(ctx, req, &reply);
      }));
    }
    absl::MutexLock lock(&mu_);
    rank_ = reply.rank();
    pid_ = self.pid;
    return FromProto(reply);
  }

  absl::Status StoreSet(const std::string& key, const std::vector<uint8_t>& value) override {
    pb::StoreSetRequest req;
    req.set_key(key);
    req.set_value(ToString(value));
    pb::StoreSetReply reply;
    return ch_->Call("StoreSet", ch_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
      return ch_->stub().StoreSet(ctx, req, &reply);
    });
  }

  absl::StatusOr<std::vector<uint8_t>> StoreGet(const std::string& key,
                                                absl::Duration timeout) override {
    pb::StoreGetRequest req;
    req.set_key(key);
    req.set_timeout_ms(ToMillis(timeout));
    pb::StoreGetReply reply;
    RETURN_IF_ERROR(ch_->Call("StoreGet", timeout + kBlockingSlack, [&](grpc::ClientContext* ctx) {
      return ch_->stub().StoreGet(ctx, req, &reply);
    }));
    return ToBytes(reply.value());
  }

  absl::StatusOr<int64_t> StoreAdd(const std::string& key, int64_t delta) override {
    pb::StoreAddRequest req;
    req.set_key(key);
    req.set_delta(delta);
    // Every try of this call carries the same id, so a retry after a lost reply adds once.
    req.set_request_id(absl::StrCat(client_id_, ":", next_add_.fetch_add(1)));
    pb::StoreAddReply reply;
    RETURN_IF_ERROR(ch_->Call("StoreAdd", ch_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
      return ch_->stub().StoreAdd(ctx, req, &reply);
    }));
    return reply.value();
  }

  absl::StatusOr<std::vector<uint8_t>> StoreCompareSet(
      const std::string& key, const std::vector<uint8_t>& expected,
      const std::vector<uint8_t>& desired) override {
    pb::StoreCompareSetRequest req;
    req.set_key(key);
    req.set_expected(ToString(expected));
    req.set_desired(ToString(desired));
    pb::StoreCompareSetReply reply;
    RETURN_IF_ERROR(ch_->Call("StoreCompareSet", ch_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
      return ch_->stub().StoreCompareSet(ctx, req, &reply);
    }));
    return ToBytes(reply.value());
  }

  absl::StatusOr<bool> StoreDelete(const std::string& key) override {
    pb::StoreDeleteRequest req;
    req.set_key(key);
    pb::StoreDeleteReply reply;
    RETURN_IF_ERROR(ch_->Call("StoreDelete", ch_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
      return ch_->stub().StoreDelete(ctx, req, &reply);
    }));
    return reply.deleted();
  }

  absl::StatusOr<bool> StoreCheck(const std::vector<std::string>& keys) override {
    pb::StoreCheckRequest req;
    for (const std::string& k : keys) req.add_keys(k);
    pb::StoreCheckReply reply;
    RETURN_IF_ERROR(ch_->Call("StoreCheck", ch_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
      return ch_->stub().StoreCheck(ctx, req, &reply);
    }));
    return reply.all_exist();
  }

  absl::StatusOr<int64_t> StoreNumKeys() override {
    pb::StoreNumKeysRequest req;
    pb::StoreNumKeysReply reply;
    RETURN_IF_ERROR(ch_->Call("StoreNumKeys", ch_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
      return ch_->stub().StoreNumKeys(ctx, req, &reply);
    }));
    return reply.num_keys();
  }

  absl::Status StoreWait(const std::vector<std::string>& keys, absl::Duration timeout) override {
    pb::StoreWaitRequest req;
    for (const std::string& k : keys) req.add_keys(k);
    req.set_timeout_ms(ToMillis(timeout));
    pb::StoreWaitReply reply;
    return ch_->Call("StoreWait", timeout + kBlockingSlack, [&](grpc::ClientContext* ctx) {
      return ch_->stub().StoreWait(ctx, req, &reply);
    });
  }

  absl::StatusOr<ShardAssignment> GetShard(const ShardRequest& request) override {
    pb::GetShardRequest req;
    ToProto(request, &req);
    SetWorker(req.mutable_worker());
    pb::GetShardReply reply;
    if (relay_ != nullptr) {
      ASSIGN_OR_RETURN(reply,
                       relay_->GetShard(req, ch_->rpc_timeout(), ch_->rpc_timeout() + kRelaySlack));
      return FromProto(reply);
    }
    RETURN_IF_ERROR(ch_->Call("GetShard", ch_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
      return ch_->stub().GetShard(ctx, req, &reply);
    }));
    return FromProto(reply);
  }

  absl::StatusOr<HeartbeatReply> Heartbeat(const ProgressReport& progress) override {
    return SendHeartbeat(progress, /*now=*/false);
  }
  absl::StatusOr<HeartbeatReply> HeartbeatNow(const ProgressReport& progress) override {
    return SendHeartbeat(progress, /*now=*/true);
  }
  absl::StatusOr<HeartbeatReply> SendHeartbeat(const ProgressReport& progress, bool now) {
    pb::HeartbeatRequest req;
    SetWorker(req.mutable_worker());
    ToProto(progress, req.mutable_progress());
    pb::HeartbeatReply reply;
    if (relay_ != nullptr) {
      // The task's relay answers within the node call's deadline plus its batch window.
      RETURN_IF_ERROR(relay_->RoundTrip(req, now, ch_->rpc_timeout() + kRelaySlack, &reply));
      return FromProto(reply);
    }
    RETURN_IF_ERROR(ch_->Call("Heartbeat", ch_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
      return ch_->stub().Heartbeat(ctx, req, &reply);
    }));
    return FromProto(reply);
  }

  absl::Status CommitCheckpoint(const CommittedCheckpoint& checkpoint) override {
    pb::CommitCheckpointRequest req;
    ToProto(checkpoint, &req);
    req.set_path(ToValidUtf8(checkpoint.path));  // a file name need not be UTF-8
    SetWorker(req.mutable_worker());
    pb::CommitCheckpointReply reply;
    return ch_->Call("CommitCheckpoint", ch_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
      return ch_->stub().CommitCheckpoint(ctx, req, &reply);
    });
  }

  absl::Status ReportDone(const absl::Status& outcome) override {
    pb::ReportDoneRequest req;
    ToProto(outcome, &req);
    req.set_message(WireText(req.message()));
    SetWorker(req.mutable_worker());
    pb::ReportDoneReply reply;
    return ch_->Call("ReportDone", ch_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
      return ch_->stub().ReportDone(ctx, req, &reply);
    });
  }

  absl::StatusOr<RankAssignment> Rejoin(const RejoinRequest& request,
                                        absl::Duration timeout) override {
    pb::RejoinRequest req;
    ToProto(request, &req);
    SetWorker(req.mutable_worker());
    pb::RegisterReply reply;
    if (relay_ != nullptr) {
      ASSIGN_OR_RETURN(reply, relay_->Rejoin(req, timeout + kBlockingSlack,
                                             timeout + kBlockingSlack + kRelaySlack));
    } else {
      RETURN_IF_ERROR(ch_->Call("Rejoin", timeout + kBlockingSlack, [&](grpc::ClientContext* ctx) {
        return ch_->stub().Rejoin(ctx, req, &reply);
      }));
    }
    absl::MutexLock lock(&mu_);
    rank_ = reply.rank();  // the rank may change between generations
    return FromProto(reply);
  }

  absl::StatusOr<LostDecision> ReportLost(const LostWorker& lost) override {
    pb::ReportLostRequest req;
    ToProto(lost, &req);
    req.set_what(WireText(lost.what));
    pb::ReportLostReply reply;
    absl::Status st = ch_->Call("ReportLost", ch_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
      return ch_->stub().ReportLost(ctx, req, &reply);
    });
    if (!st.ok()) return st;
    return FromProto(reply);
  }

  absl::Status Ping() override {
    pb::HelloRequest req;
    req.set_nonce(ch_->endpoint().nonce);
    pb::HelloReply reply;
    return ch_->Call("Hello", ch_->rpc_timeout(),
                     [&](grpc::ClientContext* ctx) { return ch_->stub().Hello(ctx, req, &reply); });
  }

  absl::StatusOr<SpareDecision> StandBy(const SpareReport& spare) override {
    SpareReport self = spare;
    if (self.pid == 0) self.pid = static_cast<int>(::getpid());
    if (self.nonce.empty()) self.nonce = ch_->endpoint().nonce;
    self.host = WireText(self.host, 255);
    pb::StandByRequest req;
    ToProto(self, &req);
    pb::StandByReply reply;
    RETURN_IF_ERROR(ch_->Call("StandBy", ch_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
      return ch_->stub().StandBy(ctx, req, &reply);
    }));
    return FromProto(reply);
  }

  absl::StatusOr<std::vector<FenceOrder>> Fences(int node_rank,
                                                 const std::vector<LiveWorker>& live) override {
    pb::FencesRequest req;
    ToProto(node_rank, live, &req);
    pb::FencesReply reply;
    RETURN_IF_ERROR(ch_->Call("Fences", ch_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
      return ch_->stub().Fences(ctx, req, &reply);
    }));
    return FromProto(reply);
  }

 private:
  void SetWorker(pb::WorkerRef* ref) const {
    absl::MutexLock lock(&mu_);
    ref->set_rank(rank_);
    ref->set_pid(pid_);
  }

  // Unique per client object (StoreAdd request ids): random, else pid and address of this.
  std::string NewClientId() const {
    absl::StatusOr<std::string> r = RandomHex(12);
    return r.ok() ? *r : absl::StrCat(::getpid(), "-", reinterpret_cast<uintptr_t>(this));
  }

  const std::unique_ptr<RpcChannel> ch_;
  // Null: every call goes to the coordinator. Else heartbeats, Register, Rejoin and GetShard go
  // through the node's task (client/heartbeat_relay.h).
  const std::unique_ptr<RelayLink> relay_;
  const std::string client_id_;
  std::atomic<uint64_t> next_add_{0};
  mutable absl::Mutex mu_;
  int rank_ ABSL_GUARDED_BY(mu_) = -1;
  int pid_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorApi>> ConnectToCoordinator(
    const ConnectOptions& options) {
  std::unique_ptr<RelayLink> relay;
  if (options.heartbeat_relay_fd >= 0)
    relay = std::make_unique<RelayLink>(options.heartbeat_relay_fd);
  ASSIGN_OR_RETURN(std::unique_ptr<RpcChannel> channel, RpcChannel::Open(options));
  return std::unique_ptr<CoordinatorApi>(
      new GrpcCoordinatorClient(std::move(channel), std::move(relay)));
}

}  // namespace ddp
