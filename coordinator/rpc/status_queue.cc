#include "coordinator/rpc/status_queue.h"

#include <utility>

#include "absl/status/status.h"
#include "coordinator/rpc/service.h"
#include "coordinator/rpc/unary_call.h"
#include "proto/convert.h"

namespace ddp {

namespace {

// The alarm's tag: not a Call.
char stop_tag;

constexpr char kMethod[] = "GetStatus";

}  // namespace

// One GetStatus call, from its request to its answer. One operation is outstanding at a time,
// so the call itself is the tag and `step_` says which operation completed.
class StatusQueue::Call {
 public:
  // Asks the server for the next call; constructed on the queue's thread (or before it runs).
  explicit Call(StatusQueue* queue) : queue_(queue), stream_(&ctx_) {
    queue_->service_->RequestStatusCall(&ctx_, &stream_, queue_->cq_.get(), this);
  }

  // Returns false when the call is over (delete it).
  bool Proceed(bool ok, bool taking_calls) {
    switch (step_) {
      case Step::kRequested:
        if (!ok) return false;  // the server shuts down: no call arrived
        if (taking_calls) new Call(queue_);
        return Admit();
      case Step::kReading:
        return Answer(ok);
      case Step::kAnswered:
        if (admitted_) queue_->gate_->Leave();
        return false;
    }
    return false;
  }

 private:
  enum class Step { kRequested, kReading, kAnswered };

  bool Admit() {
    Role role = Role::kNone;
    absl::Status st = queue_->gate_->Enter(ctx_, kMethod, kViewRoles, &role);
    if (!st.ok()) return Finish(st);  // the body is never read
    admitted_ = true;
    step_ = Step::kReading;
    stream_.Read(&request_, this);
    return true;
  }

  bool Answer(bool read) {
    if (!read) return Finish(NoRequestMessage(kMethod));
    if (absl::Status st = CheckRequestSize(kMethod, request_.Length(), kMaxStatusRequestBytes);
        !st.ok()) {
      return Finish(st);
    }
    request_.Clear();
    std::shared_ptr<const StatusSnapshot> snapshot = queue_->cache_->Get();
    grpc::Slice slice(snapshot->proto_bytes);
    reply_ = grpc::ByteBuffer(&slice, 1);
    step_ = Step::kAnswered;
    queue_->served_.fetch_add(1, std::memory_order_relaxed);
    stream_.WriteAndFinish(reply_, grpc::WriteOptions(), grpc::Status::OK, this);
    return true;
  }

  bool Finish(const absl::Status& status) {
    step_ = Step::kAnswered;
    stream_.Finish(ToGrpc(status), this);
    return true;
  }

  StatusQueue* const queue_;
  grpc::ServerContext ctx_;
  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> stream_;
  Step step_ = Step::kRequested;
  bool admitted_ = false;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer reply_;
};

StatusQueue::StatusQueue(CoordinatorService* service, CallGate* gate, StatusCache* cache,
                         std::unique_ptr<grpc::ServerCompletionQueue> cq)
    : service_(service), gate_(gate), cache_(cache), cq_(std::move(cq)) {}

StatusQueue::~StatusQueue() { Shutdown(); }

void StatusQueue::Start() {
  if (started_) return;
  started_ = true;
  new Call(this);
  thread_ = std::thread([this] { Loop(); });
}

void StatusQueue::Loop() {
  bool taking_calls = true;
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) {
    if (tag == &stop_tag) {
      // Only this thread requests calls, so none is requested after the queue shuts down.
      taking_calls = false;
      cq_->Shutdown();
      continue;
    }
    auto* call = static_cast<Call*>(tag);
    if (!call->Proceed(ok, taking_calls)) delete call;
  }
}

void StatusQueue::Shutdown() {
  if (stopped_) return;
  stopped_ = true;
  if (!started_) {
    cq_->Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_->Next(&tag, &ok)) {
    }
    return;
  }
  stop_alarm_.Set(cq_.get(), gpr_now(GPR_CLOCK_MONOTONIC), &stop_tag);
  thread_.join();
}

}  // namespace ddp
