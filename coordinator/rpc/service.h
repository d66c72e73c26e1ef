// The gRPC service: checks the bearer token, validates the request (validation.h), translates
// proto <-> domain (proto/convert.h) and calls Job or KvStore; it holds no logic of its own.
// Every handler uses the callback API, so a blocked Register / StoreGet / StoreWait parks a
// reactor instead of pinning a thread (thousands of workers can wait at once).
//
// Thread safety: handlers run on gRPC's threads concurrently; PollWatchers runs on the server's
// ticker thread. Job and KvStore are thread-safe; the watcher list is guarded by a mutex.
#ifndef SLURM_DDP_COORDINATOR_RPC_SERVICE_H_
#define SLURM_DDP_COORDINATOR_RPC_SERVICE_H_

#include <atomic>
#include <functional>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/clock.h"
#include "coordinator/job/job.h"
#include "coordinator/kv_store.h"
#include "coordinator/ops/status_cache.h"
#include "coordinator/rpc/auth.h"
#include "proto/coordinator.grpc.pb.h"

namespace ddp {

class StatusWatcher;

// (Built with -Wno-overloaded-virtual: the generated callback base declares sync overloads of
// every method, which ours hide on purpose. Include this header only from coordinator/rpc/.)
// GetStatus is a raw method: it answers with the snapshot's pre-serialized bytes, so a status
// read costs a memcpy, not a 4096-rank message copy and serialization per request.
class CoordinatorService final : public slurm_ddp::v1::Coordinator::WithRawCallbackMethod_GetStatus<
                                     slurm_ddp::v1::Coordinator::CallbackService> {
 public:
  // All pointers must outlive the service. `log` receives one line per refused call (may be empty).
  // Status reads (GetStatus, WatchStatus) are served from `cache`'s snapshots.
  CoordinatorService(Job* job, KvStore* store, const TokenChecker* auth, StatusCache* cache,
                     const Clock* clock, std::function<void(const std::string&)> log);

  // Streams due status updates to WatchStatus callers (called by the server's ticker).
  void PollWatchers();
  // The HTTP endpoint's port, reported by Hello (0 = none).
  void SetHttpPort(int port) { http_port_.store(port, std::memory_order_relaxed); }

  grpc::ServerUnaryReactor* Hello(grpc::CallbackServerContext* ctx,
                                  const slurm_ddp::v1::HelloRequest* req,
                                  slurm_ddp::v1::HelloReply* resp) override;
  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx,
                                     const slurm_ddp::v1::RegisterRequest* req,
                                     slurm_ddp::v1::RegisterReply* resp) override;
  grpc::ServerUnaryReactor* StoreSet(grpc::CallbackServerContext* ctx,
                                     const slurm_ddp::v1::StoreSetRequest* req,
                                     slurm_ddp::v1::StoreSetReply* resp) override;
  grpc::ServerUnaryReactor* StoreGet(grpc::CallbackServerContext* ctx,
                                     const slurm_ddp::v1::StoreGetRequest* req,
                                     slurm_ddp::v1::StoreGetReply* resp) override;
  grpc::ServerUnaryReactor* StoreAdd(grpc::CallbackServerContext* ctx,
                                     const slurm_ddp::v1::StoreAddRequest* req,
                                     slurm_ddp::v1::StoreAddReply* resp) override;
  grpc::ServerUnaryReactor* StoreCompareSet(grpc::CallbackServerContext* ctx,
                                            const slurm_ddp::v1::StoreCompareSetRequest* req,
                                            slurm_ddp::v1::StoreCompareSetReply* resp) override;
  grpc::ServerUnaryReactor* StoreDelete(grpc::CallbackServerContext* ctx,
                                        const slurm_ddp::v1::StoreDeleteRequest* req,
                                        slurm_ddp::v1::StoreDeleteReply* resp) override;
  grpc::ServerUnaryReactor* StoreCheck(grpc::CallbackServerContext* ctx,
                                       const slurm_ddp::v1::StoreCheckRequest* req,
                                       slurm_ddp::v1::StoreCheckReply* resp) override;
  grpc::ServerUnaryReactor* StoreNumKeys(grpc::CallbackServerContext* ctx,
                                         const slurm_ddp::v1::StoreNumKeysRequest* req,
                                         slurm_ddp::v1::StoreNumKeysReply* resp) override;
  grpc::ServerUnaryReactor* StoreWait(grpc::CallbackServerContext* ctx,
                                      const slurm_ddp::v1::StoreWaitRequest* req,
                                      slurm_ddp::v1::StoreWaitReply* resp) override;
  grpc::ServerUnaryReactor* GetShard(grpc::CallbackServerContext* ctx,
                                     const slurm_ddp::v1::GetShardRequest* req,
                                     slurm_ddp::v1::GetShardReply* resp) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const slurm_ddp::v1::HeartbeatRequest* req,
                                      slurm_ddp::v1::HeartbeatReply* resp) override;
  grpc::ServerUnaryReactor* CommitCheckpoint(grpc::CallbackServerContext* ctx,
                                             const slurm_ddp::v1::CommitCheckpointRequest* req,
                                             slurm_ddp::v1::CommitCheckpointReply* resp) override;
  grpc::ServerUnaryReactor* ReportDone(grpc::CallbackServerContext* ctx,
                                       const slurm_ddp::v1::ReportDoneRequest* req,
                                       slurm_ddp::v1::ReportDoneReply* resp) override;
  grpc::ServerUnaryReactor* ReportLost(grpc::CallbackServerContext* ctx,
                                       const slurm_ddp::v1::ReportLostRequest* req,
                                       slurm_ddp::v1::ReportLostReply* resp) override;
  grpc::ServerUnaryReactor* Rejoin(grpc::CallbackServerContext* ctx,
                                   const slurm_ddp::v1::RejoinRequest* req,
                                   slurm_ddp::v1::RegisterReply* resp) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                      grpc::ByteBuffer* resp) override;
  grpc::ServerWriteReactor<slurm_ddp::v1::JobStatus>* WatchStatus(
      grpc::CallbackServerContext* ctx, const slurm_ddp::v1::WatchStatusRequest* req) override;
  grpc::ServerUnaryReactor* Stop(grpc::CallbackServerContext* ctx,
                                 const slurm_ddp::v1::StopRequest* req,
                                 slurm_ddp::v1::StopReply* resp) override;

 private:
  // Finishes `ctx`'s reactor with UNAUTHENTICATED and returns it, or returns nullptr when the
  // token is right.
  grpc::ServerUnaryReactor* Refuse(grpc::CallbackServerContext* ctx, const char* method);
  void RemoveWatcher(StatusWatcher* watcher);

  Job* const job_;
  KvStore* const store_;
  const TokenChecker* const auth_;
  StatusCache* const cache_;
  const Clock* const clock_;
  const std::function<void(const std::string&)> log_;

  std::atomic<int> http_port_{0};
  absl::Mutex watchers_mu_;
  std::set<StatusWatcher*> watchers_ ABSL_GUARDED_BY(watchers_mu_);
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_RPC_SERVICE_H_
