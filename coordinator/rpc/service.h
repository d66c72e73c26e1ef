// The gRPC service slurm_ddp.v1.Coordinator. Each method is registered as a bidirectional stream
// with a raw (ByteBuffer) callback handler, so gRPC hands a call over on its headers: the call
// passes the CallGate (token role, room) before its body is read, then reads one request
// message (unary_call.h, status_watcher.h). Handlers parse, validate (validation.h), translate
// (proto/convert.h) and make one call on Job or KvStore; they hold no logic. Blocked calls
// (Register, Rejoin, StoreGet, StoreWait) park instead of pinning a thread.
//
//   method                                                    token role    request bound
//   Hello                                                     any           1 KiB
//   Register GetShard Heartbeat CommitCheckpoint ReportDone   worker        4..64 KiB
//   ReportLost Rejoin StoreGet StoreAdd StoreDelete           worker        1..64 KiB
//   NodeHeartbeat NodeRegister NodeRejoin NodeGetShard        worker        kMaxRequestBytes
//   StoreNumKeys                                              worker        1 KiB
//   StoreSet StoreCompareSet StoreCheck StoreWait             worker        kMaxRequestBytes
//   GetStatus WatchStatus                                     view/control  1 KiB
//   Stop                                                      control       64 KiB
// GetStatus answers with the status snapshot's pre-serialized bytes (a memcpy per read); it is
// asynchronous, served on a completion queue and thread of its own (async_queues.h), so
// operators are not queued behind the workers' calls. Register and Rejoin (and their node
// calls), which wait for the world, are asynchronous too, spread over completion queues of their
// own (async_queues.h), so thousands of them waiting do not lengthen every other call's completion
// (see there).
//
// Thread safety: handlers run on gRPC's threads concurrently; PollWatchers runs on the server's
// ticker thread. Job and KvStore are thread-safe; the watcher list is guarded by a mutex.
#ifndef SLURM_DDP_COORDINATOR_RPC_SERVICE_H_
#define SLURM_DDP_COORDINATOR_RPC_SERVICE_H_

#include <grpcpp/completion_queue.h>
#include <grpcpp/impl/service_type.h>
#include <grpcpp/support/async_stream.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/clock.h"
#include "coordinator/job/job.h"
#include "coordinator/kv_store.h"
#include "coordinator/ops/status_cache.h"
#include "coordinator/rpc/call_gate.h"
#include "coordinator/rpc/unary_call.h"
#include "proto/coordinator.pb.h"

namespace ddp {

class StatusWatcher;

class CoordinatorService final : public grpc::Service {
 public:
  // Beats in one NodeHeartbeat, requests in one NodeRegister, NodeRejoin or NodeGetShard (a
  // node's workers; proto/coordinator.proto, NODE HEARTBEATS and NODE CALLS).
  static constexpr int kMaxNodeBeats = 4096;

  // All pointers must outlive the service.
  CoordinatorService(Job* job, KvStore* store, CallGate* gate, StatusCache* cache,
                     const Clock* clock);
  CoordinatorService(const CoordinatorService&) = delete;
  CoordinatorService& operator=(const CoordinatorService&) = delete;

  // Streams due status updates to WatchStatus callers (called by the server's ticker).
  void PollWatchers();
  // The HTTP endpoint's port, reported by Hello (0 = none).
  void SetHttpPort(int port) { http_port_.store(port, std::memory_order_relaxed); }
  // The methods served, in registration order ("Hello", ...).
  const std::vector<std::string>& method_names() const { return names_; }
  size_t watchers() const;
  // A method served on a completion queue of the coordinator's own (async_queues.h).
  struct AsyncMethod {
    int index;                        // among the service's methods
    const UnaryCall::Method* method;  // its name, roles and bounded body
  };
  // GetStatus, served on a queue and thread of its own.
  const AsyncMethod& status_method() const { return status_; }
  // Register and Rejoin, which wait for the world, served on queues of their own.
  const std::vector<AsyncMethod>& parked_methods() const { return parked_; }
  // Asks for the next call of the asynchronous method `index` on `cq`; `tag` comes back when it
  // arrives.
  void RequestCall(int index, grpc::ServerContext* ctx,
                   grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream,
                   grpc::ServerCompletionQueue* cq, void* tag);
  // GetStatus calls answered OK so far.
  uint64_t status_calls() const { return status_calls_.load(std::memory_order_relaxed); }

 private:
  // Registers `name` as a raw bidi callback method served by UnaryCall.
  void AddUnary(const std::string& name, RoleMask roles, size_t max_request_bytes,
                UnaryCall::Body body);
  // Registers `name` as a raw asynchronous bidi method (served by AsyncQueues).
  AsyncMethod AddAsync(const std::string& name, RoleMask roles, size_t max_request_bytes,
                       UnaryCall::Body body);
  // The method's body behind its request bound (checked on the size, before parsing).
  const UnaryCall::Method* AddMethodBody(const std::string& name, RoleMask roles,
                                         size_t max_request_bytes, UnaryCall::Body body);
  // Adds `name`'s path to the service; returns the method's index.
  int AddMethodPath(const std::string& name);
  void AddWatchStatus();
  // GetStatus: the status snapshot's pre-serialized bytes.
  void AddGetStatus();
  void AddWorkerMethods();
  void AddStoreMethods();
  // A parked store call (`id`) whose client goes away is ended now, giving its slot back.
  void CancelWhenGone(const CallInfo& call, KvStore::WaiterId id);
  void AddOperatorMethods();
  // One worker's heartbeat (Heartbeat, and each beat of a NodeHeartbeat).
  absl::Status OneHeartbeat(const slurm_ddp::v1::HeartbeatRequest& req,
                            slurm_ddp::v1::HeartbeatReply* resp);
  // One worker's Register, Rejoin, GetShard: the call of its own, and each request of a
  // NodeRegister, NodeRejoin, NodeGetShard (NODE CALLS).
  void OneRegister(const slurm_ddp::v1::RegisterRequest& req, Job::RegisterCallback done);
  void OneRejoin(const slurm_ddp::v1::RejoinRequest& req, Job::RegisterCallback done);
  absl::Status OneGetShard(const slurm_ddp::v1::GetShardRequest& req,
                           slurm_ddp::v1::GetShardReply* resp);
  // A GetShard of `rank` (process `pid`), validated and answered as the call of its own.
  absl::StatusOr<ShardAssignment> ShardFor(int rank, int pid, const ShardRequest& request);
  void AddNodeMethods();
  void Register(const std::string& name, grpc::internal::MethodHandler* handler);
  void AddWatcher(StatusWatcher* watcher);
  void RemoveWatcher(StatusWatcher* watcher);

  Job* const job_;
  KvStore* const store_;
  CallGate* const gate_;
  StatusCache* const cache_;
  const Clock* const clock_;

  std::deque<std::string> paths_;  // "/slurm_ddp.v1.Coordinator/Hello"; gRPC keeps the pointers
  std::deque<UnaryCall::Method> methods_;  // stable addresses for the calls
  std::vector<std::string> names_;
  AsyncMethod status_{-1, nullptr};
  std::vector<AsyncMethod> parked_;
  std::atomic<uint64_t> status_calls_{0};
  std::atomic<int> http_port_{0};
  mutable absl::Mutex watchers_mu_;
  std::set<StatusWatcher*> watchers_ ABSL_GUARDED_BY(watchers_mu_);
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_RPC_SERVICE_H_
