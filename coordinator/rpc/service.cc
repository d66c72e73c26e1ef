#include "coordinator/rpc/service.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/rpc/status_watcher.h"
#include "coordinator/rpc/validation.h"
#include "proto/convert.h"

namespace ddp {

namespace pb = ::slurm_ddp::v1;

namespace {

// Finishes the default reactor of `ctx` with `status`.
grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpc(status));
  return reactor;
}

absl::Duration StoreTimeout(int64_t timeout_ms) {
  return timeout_ms == 0 ? absl::Seconds(300) : absl::Milliseconds(timeout_ms);
}

}  // namespace

CoordinatorService::CoordinatorService(Job* job, KvStore* store, const TokenChecker* auth,
                                       StatusCache* cache, const Clock* clock,
                                       std::function<void(const std::string&)> log)
    : job_(job), store_(store), auth_(auth), cache_(cache), clock_(clock), log_(std::move(log)) {}

grpc::ServerUnaryReactor* CoordinatorService::Refuse(grpc::CallbackServerContext* ctx,
                                                     const char* method) {
  absl::Status st = auth_->Check(*ctx);
  if (st.ok()) return nullptr;
  if (log_) log_(absl::StrCat("refused ", method, " from ", ctx->peer(), ": ", st.message()));
  return Reply(ctx, st);
}

void CoordinatorService::PollWatchers() {
  const absl::Time now = clock_->Now();
  std::shared_ptr<const StatusSnapshot> snapshot = cache_->Get();
  absl::MutexLock lock(&watchers_mu_);
  for (StatusWatcher* w : watchers_) w->Poll(*snapshot, now);
}

void CoordinatorService::RemoveWatcher(StatusWatcher* watcher) {
  absl::MutexLock lock(&watchers_mu_);
  watchers_.erase(watcher);
}

grpc::ServerUnaryReactor* CoordinatorService::Hello(grpc::CallbackServerContext* ctx,
                                                    const pb::HelloRequest* req,
                                                    pb::HelloReply* resp) {
  if (auto* r = Refuse(ctx, "Hello")) return r;
  const JobConfig& config = job_->config();
  // An empty nonce comes from a client given an address and token (no dist_file to verify).
  if (!config.nonce.empty() && !req->nonce().empty() && req->nonce() != config.nonce) {
    return Reply(ctx, absl::FailedPreconditionError(
                          "nonce mismatch: the dist_file is stale (another coordinator start)"));
  }
  resp->set_job_id(config.job_id);
  resp->set_generation(config.generation);
  resp->set_world_size(config.world_size);
  resp->set_http_port(http_port_.load(std::memory_order_relaxed));
  return Reply(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* CoordinatorService::Register(grpc::CallbackServerContext* ctx,
                                                       const pb::RegisterRequest* req,
                                                       pb::RegisterReply* resp) {
  if (auto* r = Refuse(ctx, "Register")) return r;
  const WorkerIdentity who = FromProto(*req);
  absl::Status st = ValidateIdentity(who, job_->config().world_size);
  if (!st.ok()) return Reply(ctx, st);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  job_->Register(who, [reactor, resp](absl::StatusOr<RankAssignment> result) {
    if (result.ok()) ToProto(*result, resp);
    reactor->Finish(ToGrpc(result.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::StoreSet(grpc::CallbackServerContext* ctx,
                                                       const pb::StoreSetRequest* req,
                                                       pb::StoreSetReply*) {
  if (auto* r = Refuse(ctx, "StoreSet")) return r;
  absl::Status st = ValidateKey(req->key());
  if (st.ok()) st = ValidateValue(req->value());
  if (st.ok()) store_->Set(req->key(), req->value());
  return Reply(ctx, st);
}

grpc::ServerUnaryReactor* CoordinatorService::StoreGet(grpc::CallbackServerContext* ctx,
                                                       const pb::StoreGetRequest* req,
                                                       pb::StoreGetReply* resp) {
  if (auto* r = Refuse(ctx, "StoreGet")) return r;
  absl::Status st = ValidateKey(req->key());
  if (st.ok()) st = ValidateTimeoutMs(req->timeout_ms());
  if (!st.ok()) return Reply(ctx, st);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  store_->Get(req->key(), clock_->Now() + StoreTimeout(req->timeout_ms()),
              [reactor, resp](absl::StatusOr<std::string> value) {
                if (value.ok()) resp->set_value(*std::move(value));
                reactor->Finish(ToGrpc(value.status()));
              });
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::StoreAdd(grpc::CallbackServerContext* ctx,
                                                       const pb::StoreAddRequest* req,
                                                       pb::StoreAddReply* resp) {
  if (auto* r = Refuse(ctx, "StoreAdd")) return r;
  absl::Status st = ValidateKey(req->key());
  if (!st.ok()) return Reply(ctx, st);
  if (req->request_id().size() > 64) {
    return Reply(ctx, absl::InvalidArgumentError("StoreAdd request_id longer than 64 bytes"));
  }
  absl::StatusOr<int64_t> sum = store_->Add(req->key(), req->delta(), req->request_id());
  if (sum.ok()) resp->set_value(*sum);
  return Reply(ctx, sum.status());
}

grpc::ServerUnaryReactor* CoordinatorService::StoreCompareSet(grpc::CallbackServerContext* ctx,
                                                              const pb::StoreCompareSetRequest* req,
                                                              pb::StoreCompareSetReply* resp) {
  if (auto* r = Refuse(ctx, "StoreCompareSet")) return r;
  absl::Status st = ValidateKey(req->key());
  if (st.ok()) st = ValidateValue(req->desired());
  if (st.ok()) resp->set_value(store_->CompareSet(req->key(), req->expected(), req->desired()));
  return Reply(ctx, st);
}

grpc::ServerUnaryReactor* CoordinatorService::StoreDelete(grpc::CallbackServerContext* ctx,
                                                          const pb::StoreDeleteRequest* req,
                                                          pb::StoreDeleteReply* resp) {
  if (auto* r = Refuse(ctx, "StoreDelete")) return r;
  absl::Status st = ValidateKey(req->key());
  if (st.ok()) resp->set_deleted(store_->Delete(req->key()));
  return Reply(ctx, st);
}

grpc::ServerUnaryReactor* CoordinatorService::StoreCheck(grpc::CallbackServerContext* ctx,
                                                         const pb::StoreCheckRequest* req,
                                                         pb::StoreCheckReply* resp) {
  if (auto* r = Refuse(ctx, "StoreCheck")) return r;
  std::vector<std::string> keys(req->keys().begin(), req->keys().end());
  absl::Status st = ValidateKeys(keys);
  if (st.ok()) resp->set_all_exist(store_->Check(keys));
  return Reply(ctx, st);
}

grpc::ServerUnaryReactor* CoordinatorService::StoreNumKeys(grpc::CallbackServerContext* ctx,
                                                           const pb::StoreNumKeysRequest*,
                                                           pb::StoreNumKeysReply* resp) {
  if (auto* r = Refuse(ctx, "StoreNumKeys")) return r;
  resp->set_num_keys(store_->NumKeys());
  return Reply(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* CoordinatorService::StoreWait(grpc::CallbackServerContext* ctx,
                                                        const pb::StoreWaitRequest* req,
                                                        pb::StoreWaitReply*) {
  if (auto* r = Refuse(ctx, "StoreWait")) return r;
  std::vector<std::string> keys(req->keys().begin(), req->keys().end());
  absl::Status st = ValidateKeys(keys);
  if (st.ok()) st = ValidateTimeoutMs(req->timeout_ms());
  if (!st.ok()) return Reply(ctx, st);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  store_->Wait(std::move(keys), clock_->Now() + StoreTimeout(req->timeout_ms()),
               [reactor](absl::Status done) { reactor->Finish(ToGrpc(done)); });
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::GetShard(grpc::CallbackServerContext* ctx,
                                                       const pb::GetShardRequest* req,
                                                       pb::GetShardReply* resp) {
  if (auto* r = Refuse(ctx, "GetShard")) return r;
  const ShardRequest request = FromProto(*req);
  absl::Status st = ValidateShardRequest(request);
  if (!st.ok()) return Reply(ctx, st);
  absl::StatusOr<ShardAssignment> a =
      job_->GetShard(req->worker().rank(), req->worker().pid(), request);
  if (a.ok()) ToProto(*a, resp);
  return Reply(ctx, a.status());
}

grpc::ServerUnaryReactor* CoordinatorService::Heartbeat(grpc::CallbackServerContext* ctx,
                                                        const pb::HeartbeatRequest* req,
                                                        pb::HeartbeatReply* resp) {
  if (auto* r = Refuse(ctx, "Heartbeat")) return r;
  const ProgressReport progress = FromProto(req->progress());
  absl::Status st = ValidateProgress(progress);
  if (!st.ok()) return Reply(ctx, st);
  absl::StatusOr<HeartbeatReply> reply =
      job_->Heartbeat(req->worker().rank(), req->worker().pid(), progress);
  if (reply.ok()) ToProto(*reply, resp);
  return Reply(ctx, reply.status());
}

grpc::ServerUnaryReactor* CoordinatorService::CommitCheckpoint(
    grpc::CallbackServerContext* ctx, const pb::CommitCheckpointRequest* req,
    pb::CommitCheckpointReply*) {
  if (auto* r = Refuse(ctx, "CommitCheckpoint")) return r;
  const CommittedCheckpoint checkpoint = FromProto(*req);
  absl::Status st = ValidateCheckpoint(checkpoint);
  if (!st.ok()) return Reply(ctx, st);
  return Reply(ctx, job_->CommitCheckpoint(req->worker().rank(), req->worker().pid(), checkpoint));
}

grpc::ServerUnaryReactor* CoordinatorService::ReportDone(grpc::CallbackServerContext* ctx,
                                                         const pb::ReportDoneRequest* req,
                                                         pb::ReportDoneReply*) {
  if (auto* r = Refuse(ctx, "ReportDone")) return r;
  const absl::Status outcome = ClampOutcome(FromProto(*req));
  return Reply(ctx, job_->ReportDone(req->worker().rank(), req->worker().pid(), outcome));
}

grpc::ServerUnaryReactor* CoordinatorService::ReportLost(grpc::CallbackServerContext* ctx,
                                                         const pb::ReportLostRequest* req,
                                                         pb::ReportLostReply* resp) {
  if (auto* r = Refuse(ctx, "ReportLost")) return r;
  LostWorker lost = FromProto(*req);
  lost.what = ClampReason(lost.what);
  absl::StatusOr<LostDecision> decision = job_->ReportLost(lost);
  if (decision.ok()) ToProto(*decision, resp);
  return Reply(ctx, decision.status());
}

grpc::ServerUnaryReactor* CoordinatorService::Rejoin(grpc::CallbackServerContext* ctx,
                                                     const pb::RejoinRequest* req,
                                                     pb::RegisterReply* resp) {
  if (auto* r = Refuse(ctx, "Rejoin")) return r;
  RejoinRequest request = FromProto(*req);
  request.reason = ClampReason(request.reason);
  if (request.committed_step < 0 || request.membership_generation < 0) {
    return Reply(ctx, absl::InvalidArgumentError("Rejoin: negative step or generation"));
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  job_->Rejoin(req->worker().rank(), req->worker().pid(), request,
               [reactor, resp](absl::StatusOr<RankAssignment> result) {
                 if (result.ok()) ToProto(*result, resp);
                 reactor->Finish(ToGrpc(result.status()));
               });
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::GetStatus(grpc::CallbackServerContext* ctx,
                                                        const grpc::ByteBuffer*,
                                                        grpc::ByteBuffer* resp) {
  if (auto* r = Refuse(ctx, "GetStatus")) return r;
  std::shared_ptr<const StatusSnapshot> snapshot = cache_->Get();
  grpc::Slice slice(snapshot->proto_bytes);
  *resp = grpc::ByteBuffer(&slice, 1);
  return Reply(ctx, absl::OkStatus());
}

grpc::ServerWriteReactor<pb::JobStatus>* CoordinatorService::WatchStatus(
    grpc::CallbackServerContext* ctx, const pb::WatchStatusRequest* req) {
  absl::Status st = auth_->Check(*ctx);
  if (!st.ok()) {
    if (log_) log_(absl::StrCat("refused WatchStatus from ", ctx->peer(), ": ", st.message()));
    return new RefusedWatch(ToGrpc(st));
  }
  int64_t ms = req->interval_ms() == 0 ? 1000 : std::max<int64_t>(req->interval_ms(), 100);
  auto* watcher = new StatusWatcher(absl::Milliseconds(std::min<int64_t>(ms, 3600000)),
                                    [this](StatusWatcher* w) { RemoveWatcher(w); });
  absl::MutexLock lock(&watchers_mu_);
  watchers_.insert(watcher);
  return watcher;
}

grpc::ServerUnaryReactor* CoordinatorService::Stop(grpc::CallbackServerContext* ctx,
                                                   const pb::StopRequest* req,
                                                   pb::StopReply* resp) {
  if (auto* r = Refuse(ctx, "Stop")) return r;
  absl::Status st =
      job_->Stop(req->mode() == pb::StopRequest::GRACEFUL, ClampReason(req->reason()));
  resp->set_state(ToProto(cache_->Get()->status.state));
  return Reply(ctx, st);
}

}  // namespace ddp
