#include "client/relay_senders.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/rpc_channel.h"
#include "proto/coordinator.grpc.pb.h"

namespace ddp {

namespace pb = ::slurm_ddp::v1;

namespace {

using Stub = pb::Coordinator::Stub;

// The node's own connection to the coordinator, opened on first use (and again after a failure
// to open), shared by every call. Cancel ends the calls in flight and fails later ones.
class CoordinatorSender {
 public:
  explicit CoordinatorSender(ConnectOptions options) : options_(std::move(options)) {
    options_.dist_file_timeout = absl::ZeroDuration();  // the workers found it already
  }

  // Runs `fn(stub, ctx)` as `method` with the channel's retries, within `timeout` (zero: the
  // channel's own deadline).
  template <typename Fn>
  absl::Status Run(const char* method, absl::Duration timeout, Fn fn) {
    absl::StatusOr<RpcChannel*> ch = Channel();
    if (!ch.ok()) return absl::UnavailableError(absl::StrCat(method, ": ", ch.status().message()));
    RpcChannel* c = *ch;
    if (timeout <= absl::ZeroDuration()) timeout = c->rpc_timeout();
    if (Cancelled()) {
      return absl::CancelledError(absl::StrCat(method, ": the node's task is ending"));
    }
    return c->Call(method, timeout, [&](grpc::ClientContext* ctx) {
      // Cancelled meanwhile: the call still runs, and ends at once (the channel reads a context
      // only after a call has run in it).
      const bool tracked = Track(ctx);
      if (!tracked) ctx->TryCancel();
      grpc::Status st = fn(c->stub(), ctx);
      if (tracked) Untrack(ctx);
      return st;
    });
  }

  void Cancel() {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    for (grpc::ClientContext* ctx : active_) ctx->TryCancel();
  }

 private:
  absl::StatusOr<RpcChannel*> Channel() {
    absl::MutexLock lock(&open_mu_);
    if (channel_ == nullptr) {
      absl::StatusOr<std::unique_ptr<RpcChannel>> ch = RpcChannel::Open(options_);
      if (!ch.ok()) return ch.status();
      channel_ = *std::move(ch);
    }
    return channel_.get();
  }
  bool Cancelled() {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }
  bool Track(grpc::ClientContext* ctx) {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return false;
    active_.insert(ctx);
    return true;
  }
  void Untrack(grpc::ClientContext* ctx) {
    absl::MutexLock lock(&mu_);
    active_.erase(ctx);
  }

  ConnectOptions options_;
  absl::Mutex open_mu_;
  std::unique_ptr<RpcChannel> channel_ ABSL_GUARDED_BY(open_mu_);
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::set<grpc::ClientContext*> active_ ABSL_GUARDED_BY(mu_);
};

// The worker calls that the relay makes as they are (RelayedUnary), by name: each parses its
// request, calls the coordinator and serializes the reply.
using RelayedMethod =
    std::function<grpc::Status(Stub&, grpc::ClientContext*, const std::string&, std::string*)>;

template <typename Req, typename Reply>
RelayedMethod Relayed(grpc::Status (Stub::*method)(grpc::ClientContext*, const Req&, Reply*)) {
  return [method](Stub& stub, grpc::ClientContext* ctx, const std::string& in, std::string* out) {
    Req req;
    if (!req.ParseFromString(in)) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the relayed request does not parse");
    }
    Reply reply;
    grpc::Status st = (stub.*method)(ctx, req, &reply);
    if (st.ok()) reply.SerializeToString(out);
    return st;
  };
}

const std::map<std::string, RelayedMethod>& RelayedMethods() {
  static const auto* methods = new std::map<std::string, RelayedMethod>{
      {"Hello", Relayed(&Stub::Hello)},
      {"StoreSet", Relayed(&Stub::StoreSet)},
      {"StoreGet", Relayed(&Stub::StoreGet)},
      {"StoreAdd", Relayed(&Stub::StoreAdd)},
      {"StoreCompareSet", Relayed(&Stub::StoreCompareSet)},
      {"StoreDelete", Relayed(&Stub::StoreDelete)},
      {"StoreCheck", Relayed(&Stub::StoreCheck)},
      {"StoreNumKeys", Relayed(&Stub::StoreNumKeys)},
      {"StoreWait", Relayed(&Stub::StoreWait)},
      {"CommitCheckpoint", Relayed(&Stub::CommitCheckpoint)},
      {"ReportDone", Relayed(&Stub::ReportDone)},
  };
  return *methods;
}

// A node call through `c`: `method` names it in errors and the channel's retries.
template <typename Req, typename Reply>
std::function<absl::Status(const Req&, absl::Duration, Reply*)> NodeCall(
    std::shared_ptr<CoordinatorSender> c, const char* method,
    grpc::Status (Stub::*call)(grpc::ClientContext*, const Req&, Reply*)) {
  return [c = std::move(c), method, call](const Req& req, absl::Duration timeout, Reply* reply) {
    return c->Run(method, timeout, [&](Stub& stub, grpc::ClientContext* ctx) {
      return (stub.*call)(ctx, req, reply);
    });
  };
}

}  // namespace

NodeCallSenders CoordinatorSenders(const ConnectOptions& options) {
  auto c = std::make_shared<CoordinatorSender>(options);
  NodeCallSenders s;
  s.beat = [c](const pb::NodeHeartbeatRequest& req, pb::NodeHeartbeatReply* reply) {
    return c->Run("NodeHeartbeat", absl::ZeroDuration(), [&](Stub& stub, grpc::ClientContext* ctx) {
      return stub.NodeHeartbeat(ctx, req, reply);
    });
  };
  s.register_workers = NodeCall(c, "NodeRegister", &Stub::NodeRegister);
  s.rejoin = NodeCall(c, "NodeRejoin", &Stub::NodeRejoin);
  s.get_shard = NodeCall(c, "NodeGetShard", &Stub::NodeGetShard);
  s.unary = [c](const std::string& method, const std::string& request, absl::Duration timeout,
                std::string* reply) {
    const auto it = RelayedMethods().find(method);
    if (it == RelayedMethods().end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the node's relay does not make a call named '", method.substr(0, 64), "'"));
    }
    return c->Run(it->first.c_str(), timeout, [&](Stub& stub, grpc::ClientContext* ctx) {
      return it->second(stub, ctx, request, reply);
    });
  };
  s.cancel = [c] { c->Cancel(); };
  return s;
}

}  // namespace ddp
