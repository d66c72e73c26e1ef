#include "coordinator/rpc/service.h"

#include <grpcpp/impl/codegen/server_callback_handlers.h>
#include <grpcpp/impl/rpc_service_method.h>

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/rpc/status_watcher.h"
#include "coordinator/rpc/validation.h"
#include "proto/convert.h"
#include "proto/coordinator.grpc.pb.h"

namespace ddp {

namespace pb = ::slurm_ddp::v1;

namespace {

using Done = std::function<void(const absl::Status&)>;

constexpr size_t kSmall = 1024;         // requests of a few scalar fields
constexpr size_t kIdentity = 4 * 1024;  // a host name, a nonce and scalars
constexpr size_t kKeyed = 8 * 1024;     // one key (or a path) and scalars
constexpr size_t kMessage = 64 * 1024;  // a free-text message (clamped to kMaxReasonBytes)

absl::Duration StoreTimeout(int64_t timeout_ms) {
  return timeout_ms == 0 ? absl::Seconds(300) : absl::Milliseconds(timeout_ms);
}

absl::Status TooManyRequests(const char* method, int n) {
  return absl::InvalidArgumentError(absl::StrCat(method, ": ", n, " requests exceed the limit of ",
                                                 CoordinatorService::kMaxNodeBeats));
}

// The replies of a NodeRegister or NodeRejoin: one result per worker, each filled when its own
// Register or Rejoin would have answered (on whichever thread completes it); the call answers
// with the last.
//
// With `refusals_early` (NodeRegister) a refusal answers the call at once, and every worker
// still waiting gets UNAVAILABLE and sends its registration again (the same process joins its
// slot again: Membership::Join). Else a refusal meant for a worker (a registration to retry, or
// one that ends the worker) would wait for the generation its node-mates wait for, which may
// need that very worker: a replacement refused a moment too early (its slot not yet vacated)
// could then never retry, and the node's call waited out the registration deadline. A Rejoin is
// not sent again (once its generation is complete a second one is refused), so NodeRejoin waits.
class JoinGather {
 public:
  JoinGather(const char* method, int n, pb::NodeJoinReply* reply, Done done, bool refusals_early)
      : method_(method),
        refusals_early_(refusals_early),
        remaining_(n),
        filled_(static_cast<size_t>(n), false),
        reply_(reply),
        done_(std::move(done)) {
    reply_->mutable_results()->Reserve(n);
    for (int i = 0; i < n; ++i) reply_->add_results();
  }
  // Called once per index (a call after the answer changes nothing).
  void Set(int i, const absl::StatusOr<RankAssignment>& result) {
    bool answer = false;
    {
      absl::MutexLock lock(&mu_);
      if (answered_) return;  // reply_ belongs to a call that has ended
      pb::JoinResult* out = reply_->mutable_results(i);
      if (result.ok()) {
        ToProto(*result, out->mutable_reply());
      } else {
        ToWire(result.status(), out);
      }
      filled_[static_cast<size_t>(i)] = true;
      answer = --remaining_ == 0;
      if (!answer && !result.ok() && refusals_early_) {
        const absl::Status again = absl::UnavailableError(absl::StrCat(
            method_, " answered early for another worker of this node; send it again"));
        for (size_t j = 0; j < filled_.size(); ++j) {
          if (!filled_[j]) ToWire(again, reply_->mutable_results(static_cast<int>(j)));
        }
        answer = true;
      }
      answered_ = answer;
    }
    if (answer) done_(absl::OkStatus());
  }
  bool answered() {
    absl::MutexLock lock(&mu_);
    return answered_;
  }

 private:
  const char* const method_;
  const bool refusals_early_;
  absl::Mutex mu_;
  int remaining_ ABSL_GUARDED_BY(mu_);
  bool answered_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<bool> filled_ ABSL_GUARDED_BY(mu_);
  pb::NodeJoinReply* const reply_ ABSL_PT_GUARDED_BY(mu_);
  const Done done_;
};

// NodeRegister or NodeRejoin: each of the request's workers through `one` (OneRegister,
// OneRejoin), the call answered once every one of them is (or at the first refusal, with
// `refusals_early`: JoinGather). The workers after an early answer are not joined at all.
template <typename Request, typename One>
UnaryCall::Body NodeJoin(const char* method, bool refusals_early, One one) {
  return Typed<Request, pb::NodeJoinReply>(
      method,
      [method, refusals_early, one](const Request& req, pb::NodeJoinReply* resp, Done done) {
        const int n = req.workers_size();
        if (n > CoordinatorService::kMaxNodeBeats) return done(TooManyRequests(method, n));
        if (n == 0) return done(absl::OkStatus());
        auto gather =
            std::make_shared<JoinGather>(method, n, resp, std::move(done), refusals_early);
        for (int i = 0; i < n && !gather->answered(); ++i) {
          one(req.workers(i),
              [gather, i](absl::StatusOr<RankAssignment> result) { gather->Set(i, result); });
        }
      });
}

}  // namespace

CoordinatorService::CoordinatorService(Job* job, KvStore* store, CallGate* gate, StatusCache* cache,
                                       const Clock* clock)
    : job_(job), store_(store), gate_(gate), cache_(cache), clock_(clock) {
  AddOperatorMethods();
  AddWorkerMethods();
  AddStoreMethods();
  AddWatchStatus();
}

int CoordinatorService::AddMethodPath(const std::string& name) {
  paths_.push_back(absl::StrCat("/", pb::Coordinator::service_full_name(), "/", name));
  AddMethod(new grpc::internal::RpcServiceMethod(
      paths_.back().c_str(), grpc::internal::RpcMethod::BIDI_STREAMING, nullptr));
  names_.push_back(name);
  return static_cast<int>(names_.size()) - 1;
}

void CoordinatorService::Register(const std::string& name, grpc::internal::MethodHandler* handler) {
  MarkMethodRawCallback(AddMethodPath(name), handler);
}

const UnaryCall::Method* CoordinatorService::AddMethodBody(const std::string& name, RoleMask roles,
                                                           size_t max_request_bytes,
                                                           UnaryCall::Body body) {
  // The per-method bound is checked on the request's size before it is parsed.
  // A reply waits for the journal's writer to have put every record appended so far in the file
  // (Job::AwaitJournalWritten): a client never acts on a state that a coordinator SIGKILLed right
  // after the reply would not restore.
  // The c10d store is not journaled: its replies do not wait.
  const bool journaled = !absl::StartsWith(name, "Store");
  UnaryCall::Body bounded = [job = job_, journaled, name, max_request_bytes,
                             body = std::move(body)](const CallInfo& call,
                                                     grpc::ByteBuffer* request,
                                                     UnaryCall::Reply reply) {
    if (absl::Status st = CheckRequestSize(name, request->Length(), max_request_bytes); !st.ok()) {
      reply(st, grpc::ByteBuffer());
      return;
    }
    if (!journaled) return body(call, request, std::move(reply));
    body(call, request,
         [job, reply = std::move(reply)](const absl::Status& st, grpc::ByteBuffer bytes) {
           job->AwaitJournalWritten();
           reply(st, std::move(bytes));
         });
  };
  methods_.push_back(UnaryCall::Method{name, roles, std::move(bounded)});
  return &methods_.back();
}

void CoordinatorService::AddUnary(const std::string& name, RoleMask roles, size_t max_request_bytes,
                                  UnaryCall::Body body) {
  const UnaryCall::Method* method = AddMethodBody(name, roles, max_request_bytes, std::move(body));
  Register(name, new grpc::internal::CallbackBidiHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
                     [this, method](grpc::CallbackServerContext* ctx) {
                       return new UnaryCall(ctx, method, gate_);
                     }));
}

CoordinatorService::AsyncMethod CoordinatorService::AddAsync(const std::string& name,
                                                             RoleMask roles,
                                                             size_t max_request_bytes,
                                                             UnaryCall::Body body) {
  const UnaryCall::Method* method = AddMethodBody(name, roles, max_request_bytes, std::move(body));
  const int index = AddMethodPath(name);
  MarkMethodRaw(index);  // asynchronous, on a completion queue of the coordinator's own
  return AsyncMethod{index, method};
}

void CoordinatorService::AddGetStatus() {
  status_ = AddAsync("GetStatus", kViewRoles, kSmall,
                     [this](const CallInfo&, grpc::ByteBuffer*, UnaryCall::Reply reply) {
                       std::shared_ptr<const StatusSnapshot> snapshot = cache_->Get();
                       grpc::Slice slice(snapshot->proto_bytes);
                       status_calls_.fetch_add(1, std::memory_order_relaxed);
                       reply(absl::OkStatus(), grpc::ByteBuffer(&slice, 1));
                     });
}

void CoordinatorService::RequestCall(
    int index, grpc::ServerContext* ctx,
    grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream,
    grpc::ServerCompletionQueue* cq, void* tag) {
  RequestAsyncBidiStreaming(index, ctx, stream, cq, cq, tag);
}

void CoordinatorService::AddWatchStatus() {
  Register("WatchStatus",
           new grpc::internal::CallbackBidiHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
               [this](grpc::CallbackServerContext* ctx) {
                 return new StatusWatcher(
                     ctx, gate_, [this](StatusWatcher* w) { AddWatcher(w); },
                     [this](StatusWatcher* w) { RemoveWatcher(w); });
               }));
}

void CoordinatorService::AddOperatorMethods() {
  AddUnary("Hello", kAnyRole, kSmall,
           [this](const CallInfo& call, grpc::ByteBuffer* bytes, UnaryCall::Reply reply) {
             pb::HelloRequest req;
             absl::Status st = ParseRequest("Hello", bytes, &req);
             const JobConfig& config = job_->config();
             // An empty nonce comes from a client given an address and token (no dist_file).
             if (st.ok() && !config.nonce.empty() && !req.nonce().empty() &&
                 req.nonce() != config.nonce) {
               st = absl::FailedPreconditionError(
                   "nonce mismatch: the dist_file is stale (another coordinator start)");
             }
             if (!st.ok()) return reply(st, grpc::ByteBuffer());
             pb::HelloReply resp;
             resp.set_job_id(config.job_id);
             resp.set_generation(config.generation);
             resp.set_world_size(config.world_size);
             resp.set_http_port(http_port_.load(std::memory_order_relaxed));
             if (call.role == Role::kView || call.role == Role::kControl) {
               resp.set_view_token(gate_->auth().view_token());
             }
             reply(absl::OkStatus(), SerializeReply(resp));
           });
  AddGetStatus();
  AddUnary("Stop", kControlRoles, kMessage,
           Typed<pb::StopRequest, pb::StopReply>(
               "Stop", [this](const pb::StopRequest& req, pb::StopReply* resp, Done done) {
                 absl::Status st =
                     job_->Stop(req.mode() == pb::StopRequest::GRACEFUL, ClampReason(req.reason()));
                 resp->set_state(ToProto(cache_->Get()->status.state));
                 done(st);
               }));
}

absl::Status CoordinatorService::OneHeartbeat(const pb::HeartbeatRequest& req,
                                              pb::HeartbeatReply* resp) {
  const ProgressReport progress = FromProto(req.progress());
  if (absl::Status st = ValidateProgress(progress); !st.ok()) return st;
  absl::StatusOr<HeartbeatReply> r =
      job_->Heartbeat(req.worker().rank(), req.worker().pid(), progress);
  if (!r.ok()) return r.status();
  ToProto(*r, resp);
  return absl::OkStatus();
}

void CoordinatorService::AddWorkerMethods() {
  parked_.push_back(AddAsync(
      "Register", kWorkerRoles, kIdentity,
      Typed<pb::RegisterRequest, pb::RegisterReply>(
          "Register", [this](const pb::RegisterRequest& req, pb::RegisterReply* resp, Done done) {
            OneRegister(req, [resp, done](absl::StatusOr<RankAssignment> result) {
              if (result.ok()) ToProto(*result, resp);
              done(result.status());
            });
          })));
  AddUnary("GetShard", kWorkerRoles, kSmall,
           Typed<pb::GetShardRequest, pb::GetShardReply>(
               "GetShard", [this](const pb::GetShardRequest& req, pb::GetShardReply* resp,
                                  Done done) { done(OneGetShard(req, resp)); }));
  AddUnary("Heartbeat", kWorkerRoles, kIdentity,
           Typed<pb::HeartbeatRequest, pb::HeartbeatReply>(
               "Heartbeat", [this](const pb::HeartbeatRequest& req, pb::HeartbeatReply* resp,
                                   Done done) { done(OneHeartbeat(req, resp)); }));
  // Each beat is judged as its own Heartbeat; one refused beat fails alone.
  AddUnary("NodeHeartbeat", kWorkerRoles, kMaxRequestBytes,
           Typed<pb::NodeHeartbeatRequest, pb::NodeHeartbeatReply>(
               "NodeHeartbeat", [this](const pb::NodeHeartbeatRequest& req,
                                       pb::NodeHeartbeatReply* resp, Done done) {
                 if (req.beats_size() > kMaxNodeBeats) {
                   return done(absl::InvalidArgumentError(
                       absl::StrCat("NodeHeartbeat: ", req.beats_size(),
                                    " beats exceed the limit of ", kMaxNodeBeats)));
                 }
                 resp->mutable_replies()->Reserve(req.beats_size());
                 for (const pb::HeartbeatRequest& beat : req.beats()) {
                   pb::RankHeartbeatReply* out = resp->add_replies();
                   ToProto(OneHeartbeat(beat, out->mutable_reply()), out);
                 }
                 done(absl::OkStatus());
               }));
  AddUnary("CommitCheckpoint", kWorkerRoles, kKeyed,
           Typed<pb::CommitCheckpointRequest, pb::CommitCheckpointReply>(
               "CommitCheckpoint", [this](const pb::CommitCheckpointRequest& req,
                                          pb::CommitCheckpointReply*, Done done) {
                 const CommittedCheckpoint checkpoint = FromProto(req);
                 absl::Status st = ValidateCheckpoint(checkpoint);
                 if (st.ok()) {
                   st = job_->CommitCheckpoint(req.worker().rank(), req.worker().pid(), checkpoint);
                 }
                 done(st);
               }));
  AddUnary(
      "ReportDone", kWorkerRoles, kMessage,
      Typed<pb::ReportDoneRequest, pb::ReportDoneReply>(
          "ReportDone", [this](const pb::ReportDoneRequest& req, pb::ReportDoneReply*, Done done) {
            const absl::Status outcome = ClampOutcome(FromProto(req));
            done(job_->ReportDone(req.worker().rank(), req.worker().pid(), outcome));
          }));
  AddUnary("ReportLost", kWorkerRoles, kMessage,
           Typed<pb::ReportLostRequest, pb::ReportLostReply>(
               "ReportLost",
               [this](const pb::ReportLostRequest& req, pb::ReportLostReply* resp, Done done) {
                 LostWorker lost = FromProto(req);
                 lost.what = ClampReason(lost.what);
                 absl::StatusOr<LostDecision> decision = job_->ReportLost(lost);
                 if (decision.ok()) ToProto(*decision, resp);
                 done(decision.status());
               }));
  AddUnary("StandBy", kWorkerRoles, kIdentity,
           Typed<pb::StandByRequest, pb::StandByReply>(
               "StandBy", [this](const pb::StandByRequest& req, pb::StandByReply* resp, Done done) {
                 const SpareReport spare = FromProto(req);
                 absl::Status st = ValidateSpare(spare, job_->config().world_size);
                 if (!st.ok()) return done(st);
                 absl::StatusOr<SpareDecision> decision = job_->StandBy(spare);
                 if (decision.ok()) ToProto(*decision, resp);
                 done(decision.status());
               }));
  AddUnary("Fences", kWorkerRoles, kMessage,
           Typed<pb::FencesRequest, pb::FencesReply>(
               "Fences", [this](const pb::FencesRequest& req, pb::FencesReply* resp, Done done) {
                 const std::vector<LiveWorker> live = FromProto(req);
                 absl::Status st = ValidateLiveWorkers(req.node_rank(), live);
                 if (!st.ok()) return done(st);
                 absl::StatusOr<std::vector<FenceOrder>> fences =
                     job_->Fences(req.node_rank(), live);
                 if (fences.ok()) ToProto(*fences, resp);
                 done(fences.status());
               }));
  parked_.push_back(AddAsync(
      "Rejoin", kWorkerRoles, kMessage,
      Typed<pb::RejoinRequest, pb::RegisterReply>(
          "Rejoin", [this](const pb::RejoinRequest& req, pb::RegisterReply* resp, Done done) {
            OneRejoin(req, [resp, done](absl::StatusOr<RankAssignment> result) {
              if (result.ok()) ToProto(*result, resp);
              done(result.status());
            });
          })));
  AddNodeMethods();
}

void CoordinatorService::OneRegister(const pb::RegisterRequest& req, Job::RegisterCallback done) {
  WorkerIdentity who = FromProto(req);
  absl::Status st = ValidateIdentity(who, job_->config().world_size);
  if (!st.ok()) return done(st);
  if (std::optional<ShardRequest> first = std::move(who.first_shard)) {
    who.first_shard.reset();
    // Answered once the registration is: the worker then has its rank (completions run outside
    // the job's lock, so the job may be called back). Only in the job's first generation, where
    // every rank starts at the same place: a replacement joins a job whose ranks are somewhere in
    // an epoch, and its request, judged first, would set the epoch's terms for the others. It
    // asks once it knows where the job is.
    done = [this, first = *first, pid = who.pid,
            done = std::move(done)](absl::StatusOr<RankAssignment> result) {
      if (result.ok() && result->membership_generation == 0) {
        result->first_shard = ShardFor(result->rank, pid, first);
      }
      done(std::move(result));
    };
  }
  job_->Register(who, std::move(done));
}

void CoordinatorService::OneRejoin(const pb::RejoinRequest& req, Job::RegisterCallback done) {
  RejoinRequest request = FromProto(req);
  request.reason = ClampReason(request.reason);
  if (request.committed_step < 0 || request.membership_generation < 0) {
    return done(absl::InvalidArgumentError("Rejoin: negative step or generation"));
  }
  job_->Rejoin(req.worker().rank(), req.worker().pid(), request, std::move(done));
}

absl::Status CoordinatorService::OneGetShard(const pb::GetShardRequest& req,
                                             pb::GetShardReply* resp) {
  absl::StatusOr<ShardAssignment> a =
      ShardFor(req.worker().rank(), req.worker().pid(), FromProto(req));
  if (a.ok()) ToProto(*a, resp);
  return a.status();
}

absl::StatusOr<ShardAssignment> CoordinatorService::ShardFor(int rank, int pid,
                                                             const ShardRequest& request) {
  RETURN_IF_ERROR(ValidateShardRequest(request));
  return job_->GetShard(rank, pid, request);
}

// NODE CALLS (proto/coordinator.proto): each request is judged as the call of its own.
void CoordinatorService::AddNodeMethods() {
  parked_.push_back(
      AddAsync("NodeRegister", kWorkerRoles, kMaxRequestBytes,
               NodeJoin<pb::NodeRegisterRequest>(
                   "NodeRegister", /*refusals_early=*/true,
                   [this](const pb::RegisterRequest& one, Job::RegisterCallback done) {
                     OneRegister(one, std::move(done));
                   })));
  parked_.push_back(AddAsync("NodeRejoin", kWorkerRoles, kMaxRequestBytes,
                             NodeJoin<pb::NodeRejoinRequest>(
                                 "NodeRejoin", /*refusals_early=*/false,
                                 [this](const pb::RejoinRequest& one, Job::RegisterCallback done) {
                                   OneRejoin(one, std::move(done));
                                 })));
  AddUnary("NodeGetShard", kWorkerRoles, kMaxRequestBytes,
           Typed<pb::NodeGetShardRequest, pb::NodeGetShardReply>(
               "NodeGetShard",
               [this](const pb::NodeGetShardRequest& req, pb::NodeGetShardReply* resp, Done done) {
                 const int n = req.shards_size();
                 if (n > kMaxNodeBeats) return done(TooManyRequests("NodeGetShard", n));
                 resp->mutable_results()->Reserve(n);
                 for (const pb::GetShardRequest& one : req.shards()) {
                   pb::ShardResult* out = resp->add_results();
                   ToWire(OneGetShard(one, out->mutable_reply()), out);
                 }
                 done(absl::OkStatus());
               }));
}

void CoordinatorService::AddStoreMethods() {
  AddUnary("StoreSet", kWorkerRoles, kMaxRequestBytes,
           Typed<pb::StoreSetRequest, pb::StoreSetReply>(
               "StoreSet", [this](const pb::StoreSetRequest& req, pb::StoreSetReply*, Done done) {
                 absl::Status st = ValidateKey(req.key());
                 if (st.ok()) st = ValidateValue(req.value());
                 if (st.ok()) st = store_->Set(req.key(), req.value());
                 done(st);
               }));
  AddUnary("StoreGet", kWorkerRoles, kKeyed,
           TypedWithCall<pb::StoreGetRequest, pb::StoreGetReply>(
               "StoreGet", [this](const CallInfo& call, const pb::StoreGetRequest& req,
                                  pb::StoreGetReply* resp, Done done) {
                 absl::Status st = ValidateKey(req.key());
                 if (st.ok()) st = ValidateTimeoutMs(req.timeout_ms());
                 if (!st.ok()) return done(st);
                 const KvStore::WaiterId id =
                     store_->Get(req.key(), clock_->Now() + StoreTimeout(req.timeout_ms()),
                                 [resp, done](absl::StatusOr<std::string> value) {
                                   if (!value.ok()) return done(value.status());
                                   resp->set_value(*std::move(value));
                                   done(absl::OkStatus());
                                 });
                 CancelWhenGone(call, id);
               }));
  AddUnary(
      "StoreAdd", kWorkerRoles, kKeyed,
      Typed<pb::StoreAddRequest, pb::StoreAddReply>(
          "StoreAdd", [this](const pb::StoreAddRequest& req, pb::StoreAddReply* resp, Done done) {
            absl::Status st = ValidateKey(req.key());
            if (!st.ok()) return done(st);
            absl::StatusOr<int64_t> sum = store_->Add(req.key(), req.delta(), req.request_id());
            if (sum.ok()) resp->set_value(*sum);
            done(sum.status());
          }));
  AddUnary("StoreCompareSet", kWorkerRoles, kMaxRequestBytes,
           Typed<pb::StoreCompareSetRequest, pb::StoreCompareSetReply>(
               "StoreCompareSet", [this](const pb::StoreCompareSetRequest& req,
                                         pb::StoreCompareSetReply* resp, Done done) {
                 absl::Status st = ValidateKey(req.key());
                 if (st.ok()) st = ValidateValue(req.desired());
                 if (!st.ok()) return done(st);
                 absl::StatusOr<std::string> now =
                     store_->CompareSet(req.key(), req.expected(), req.desired());
                 if (!now.ok()) return done(now.status());
                 resp->set_value(*std::move(now));
                 done(absl::OkStatus());
               }));
  AddUnary("StoreDelete", kWorkerRoles, kKeyed,
           Typed<pb::StoreDeleteRequest, pb::StoreDeleteReply>(
               "StoreDelete",
               [this](const pb::StoreDeleteRequest& req, pb::StoreDeleteReply* resp, Done done) {
                 absl::Status st = ValidateKey(req.key());
                 if (st.ok()) resp->set_deleted(store_->Delete(req.key()));
                 done(st);
               }));
  AddUnary("StoreCheck", kWorkerRoles, kMaxRequestBytes,
           Typed<pb::StoreCheckRequest, pb::StoreCheckReply>(
               "StoreCheck",
               [this](const pb::StoreCheckRequest& req, pb::StoreCheckReply* resp, Done done) {
                 std::vector<std::string> keys(req.keys().begin(), req.keys().end());
                 absl::Status st = ValidateKeys(keys);
                 if (st.ok()) resp->set_all_exist(store_->Check(keys));
                 done(st);
               }));
  AddUnary("StoreNumKeys", kWorkerRoles, kSmall,
           Typed<pb::StoreNumKeysRequest, pb::StoreNumKeysReply>(
               "StoreNumKeys",
               [this](const pb::StoreNumKeysRequest&, pb::StoreNumKeysReply* resp, Done done) {
                 resp->set_num_keys(store_->NumKeys());
                 done(absl::OkStatus());
               }));
  AddUnary("StoreWait", kWorkerRoles, kMaxRequestBytes,
           TypedWithCall<pb::StoreWaitRequest, pb::StoreWaitReply>(
               "StoreWait", [this](const CallInfo& call, const pb::StoreWaitRequest& req,
                                   pb::StoreWaitReply*, Done done) {
                 std::vector<std::string> keys(req.keys().begin(), req.keys().end());
                 absl::Status st = ValidateKeys(keys);
                 if (st.ok()) st = ValidateTimeoutMs(req.timeout_ms());
                 if (!st.ok()) return done(st);
                 const KvStore::WaiterId id =
                     store_->Wait(std::move(keys), clock_->Now() + StoreTimeout(req.timeout_ms()),
                                  std::move(done));
                 CancelWhenGone(call, id);
               }));
}

void CoordinatorService::CancelWhenGone(const CallInfo& call, KvStore::WaiterId id) {
  if (id == KvStore::kNotParked || call.cancel == nullptr) return;
  call.cancel->WhenCancelled([store = store_, id] {
    store->Cancel(id, absl::CancelledError("store: the caller went away"));
  });
}

void CoordinatorService::PollWatchers() {
  if (watchers() == 0) return;  // no snapshot to build for nobody
  const absl::Time now = clock_->Now();
  std::shared_ptr<const StatusSnapshot> snapshot = cache_->Get();
  absl::MutexLock lock(&watchers_mu_);
  for (StatusWatcher* w : watchers_) w->Poll(*snapshot, now);
}

void CoordinatorService::AddWatcher(StatusWatcher* watcher) {
  absl::MutexLock lock(&watchers_mu_);
  watchers_.insert(watcher);
}

void CoordinatorService::RemoveWatcher(StatusWatcher* watcher) {
  absl::MutexLock lock(&watchers_mu_);
  watchers_.erase(watcher);
}

size_t CoordinatorService::watchers() const {
  absl::MutexLock lock(&watchers_mu_);
  return watchers_.size();
}

}  // namespace ddp
