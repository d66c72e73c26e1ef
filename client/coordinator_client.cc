#include "client/coordinator_client.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/relay_link.h"
#include "client/rpc_channel.h"
#include "common/dist_file.h"
#include "common/job_result.h"
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

using Stub = pb::Coordinator::Stub;

class GrpcCoordinatorClient final : public CoordinatorApi {
 public:
  // `channel` null: every call goes through `relay`; `nonce` and `rpc_timeout` come from the
  // channel when there is one.
  GrpcCoordinatorClient(std::unique_ptr<RpcChannel> channel, std::unique_ptr<RelayLink> relay,
                        std::string nonce, absl::Duration rpc_timeout)
      : ch_(std::move(channel)),
        relay_(std::move(relay)),
        nonce_(ch_ != nullptr ? ch_->endpoint().nonce : std::move(nonce)),
        rpc_timeout_(ch_ != nullptr ? ch_->rpc_timeout() : rpc_timeout),
        client_id_(NewClientId()) {}

  // Proves the coordinator is there and serves `job_id` (empty: any), through the relay.
  absl::Status RelayedHello(const std::string& job_id) {
    pb::HelloRequest req;
    req.set_nonce(nonce_);
    pb::HelloReply reply;
    RETURN_IF_ERROR(Unary("Hello", rpc_timeout_, req, &reply, &Stub::Hello));
    if (!job_id.empty() && reply.job_id() != job_id) {
      return absl::FailedPreconditionError(
          absl::StrCat("the coordinator serves job ", reply.job_id(), ", not ", job_id));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<RankAssignment> Register(const WorkerIdentity& who,
                                          absl::Duration timeout) override {
    WorkerIdentity self = who;
    if (self.pid == 0) self.pid = static_cast<int>(::getpid());
    if (self.nonce.empty()) self.nonce = nonce_;
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
    return Unary("StoreSet", rpc_timeout_, req, &reply, &Stub::StoreSet);
  }

  absl::StatusOr<std::vector<uint8_t>> StoreGet(const std::string& key,
                                                absl::Duration timeout) override {
    pb::StoreGetRequest req;
    req.set_key(key);
    req.set_timeout_ms(ToMillis(timeout));
    pb::StoreGetReply reply;
    RETURN_IF_ERROR(Unary("StoreGet", timeout + kBlockingSlack, req, &reply, &Stub::StoreGet));
    return ToBytes(reply.value());
  }

  absl::StatusOr<int64_t> StoreAdd(const std::string& key, int64_t delta) override {
    pb::StoreAddRequest req;
    req.set_key(key);
    req.set_delta(delta);
    // Every try of this call carries the same id, so a retry after a lost reply adds once.
    req.set_request_id(absl::StrCat(client_id_, ":", next_add_.fetch_add(1)));
    pb::StoreAddReply reply;
    RETURN_IF_ERROR(Unary("StoreAdd", rpc_timeout_, req, &reply, &Stub::StoreAdd));
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
    RETURN_IF_ERROR(Unary("StoreCompareSet", rpc_timeout_, req, &reply, &Stub::StoreCompareSet));
    return ToBytes(reply.value());
  }

  absl::StatusOr<bool> StoreDelete(const std::string& key) override {
    pb::StoreDeleteRequest req;
    req.set_key(key);
    pb::StoreDeleteReply reply;
    RETURN_IF_ERROR(Unary("StoreDelete", rpc_timeout_, req, &reply, &Stub::StoreDelete));
    return reply.deleted();
  }

  absl::StatusOr<bool> StoreCheck(const std::vector<std::string>& keys) override {
    pb::StoreCheckRequest req;
    for (const std::string& k : keys) req.add_keys(k);
    pb::StoreCheckReply reply;
    RETURN_IF_ERROR(Unary("StoreCheck", rpc_timeout_, req, &reply, &Stub::StoreCheck));
    return reply.all_exist();
  }

  absl::StatusOr<int64_t> StoreNumKeys() override {
    pb::StoreNumKeysRequest req;
    pb::StoreNumKeysReply reply;
    RETURN_IF_ERROR(Unary("StoreNumKeys", rpc_timeout_, req, &reply, &Stub::StoreNumKeys));
    return reply.num_keys();
  }

  absl::Status StoreWait(const std::vector<std::string>& keys, absl::Duration timeout) override {
    pb::StoreWaitRequest req;
    for (const std::string& k : keys) req.add_keys(k);
    req.set_timeout_ms(ToMillis(timeout));
    pb::StoreWaitReply reply;
    return Unary("StoreWait", timeout + kBlockingSlack, req, &reply, &Stub::StoreWait);
  }

  absl::StatusOr<ShardAssignment> GetShard(const ShardRequest& request) override {
    pb::GetShardRequest req;
    ToProto(request, &req);
    SetWorker(req.mutable_worker());
    pb::GetShardReply reply;
    if (relay_ != nullptr) {
      ASSIGN_OR_RETURN(reply, relay_->GetShard(req, rpc_timeout_, rpc_timeout_ + kRelaySlack));
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
      RETURN_IF_ERROR(relay_->RoundTrip(req, now, rpc_timeout_ + kRelaySlack, &reply));
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
    return Unary("CommitCheckpoint", rpc_timeout_, req, &reply, &Stub::CommitCheckpoint);
  }

  absl::Status ReportDone(const absl::Status& outcome) override {
    pb::ReportDoneRequest req;
    ToProto(outcome, &req);
    req.set_message(WireText(req.message()));
    SetWorker(req.mutable_worker());
    pb::ReportDoneReply reply;
    return Unary("ReportDone", rpc_timeout_, req, &reply, &Stub::ReportDone);
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
    RETURN_IF_ERROR(LauncherOnly("ReportLost"));
    absl::Status st = ch_->Call("ReportLost", ch_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
      return ch_->stub().ReportLost(ctx, req, &reply);
    });
    if (!st.ok()) return st;
    return FromProto(reply);
  }

  absl::Status Ping() override {
    pb::HelloRequest req;
    req.set_nonce(nonce_);
    pb::HelloReply reply;
    return Unary("Hello", rpc_timeout_, req, &reply, &Stub::Hello);
  }

  absl::StatusOr<SpareDecision> StandBy(const SpareReport& spare) override {
    SpareReport self = spare;
    if (self.pid == 0) self.pid = static_cast<int>(::getpid());
    if (self.nonce.empty()) self.nonce = nonce_;
    self.host = WireText(self.host, 255);
    pb::StandByRequest req;
    ToProto(self, &req);
    pb::StandByReply reply;
    RETURN_IF_ERROR(LauncherOnly("StandBy"));
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
    RETURN_IF_ERROR(LauncherOnly("Fences"));
    RETURN_IF_ERROR(ch_->Call("Fences", ch_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
      return ch_->stub().Fences(ctx, req, &reply);
    }));
    return FromProto(reply);
  }

 private:
  // A call of the worker's own: through the node's relay when there is one (the task makes it as
  // it is, RelayedUnary), else on the worker's connection.
  template <typename Req, typename Reply>
  absl::Status Unary(const char* method, absl::Duration timeout, const Req& req, Reply* reply,
                     grpc::Status (Stub::*call)(grpc::ClientContext*, const Req&, Reply*)) {
    if (relay_ != nullptr) {
      ASSIGN_OR_RETURN(const std::string bytes, relay_->Unary(method, req.SerializeAsString(),
                                                              timeout, timeout + kRelaySlack));
      if (!reply->ParseFromString(bytes)) {
        return absl::InternalError(absl::StrCat(method, ": the relayed reply does not parse"));
      }
      return absl::OkStatus();
    }
    return ch_->Call(method, timeout, [&](grpc::ClientContext* ctx) {
      return (ch_->stub().*call)(ctx, req, reply);
    });
  }

  // The launcher's calls need a connection of their own (a worker whose task relays its calls
  // has none).
  absl::Status LauncherOnly(const char* method) const {
    if (ch_ != nullptr) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat(method, ": a relayed worker has no connection of its own"));
  }

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

  const std::unique_ptr<RpcChannel> ch_;  // null: a relayed worker (every call goes to relay_)
  // Null: every call goes to the coordinator. Else heartbeats, Register, Rejoin and GetShard go
  // through the node's task (client/heartbeat_relay.h).
  const std::unique_ptr<RelayLink> relay_;
  const std::string nonce_;  // the dist_file's, sent in Register and Hello
  const absl::Duration rpc_timeout_;
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
  if (options.heartbeat_relay_fd >= 0) {
    std::function<bool()> job_ended;
    if (!options.dist_file.empty() && !options.expected_job_id.empty()) {
      job_ended = [dist_file = options.dist_file, job_id = options.expected_job_id,
                   generation = options.min_generation] {
        return ReadJobResultOf(dist_file, job_id, generation).has_value();
      };
    }
    relay = std::make_unique<RelayLink>(options.heartbeat_relay_fd, std::move(job_ended));
  }
  if (relay != nullptr && !options.dist_file.empty()) {
    // Every call goes through the node's task, which holds the node's one connection: the worker
    // reads the dist_file for the nonce and proves it through the relay (Hello).
    const DistFileExpectation expect{options.expected_job_id, options.min_generation};
    ASSIGN_OR_RETURN(const DistFileContents file,
                     options.dist_file_timeout <= absl::ZeroDuration()
                         ? ReadDistFile(options.dist_file, expect)
                         : WaitForDistFile(options.dist_file, expect, options.dist_file_timeout));
    auto client = std::make_unique<GrpcCoordinatorClient>(nullptr, std::move(relay), file.nonce,
                                                          options.rpc_timeout);
    RETURN_IF_ERROR(client->RelayedHello(file.job_id));
    return std::unique_ptr<CoordinatorApi>(std::move(client));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<RpcChannel> channel, RpcChannel::Open(options));
  return std::unique_ptr<CoordinatorApi>(new GrpcCoordinatorClient(
      std::move(channel), std::move(relay), std::string(), absl::ZeroDuration()));
}

}  // namespace ddp
