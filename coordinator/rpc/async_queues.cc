#include "coordinator/rpc/async_queues.h"

#include <utility>

#include "absl/status/status.h"
#include "proto/convert.h"

namespace ddp {

namespace {

// The alarm's tag: not a Call.
char stop_tag;

}  // namespace

// One call, from its request to its answer. One operation is outstanding at a time, so
// the call itself is the tag and `step_` says which operation completed.
class AsyncQueues::Call {
 public:
  // Asks the server for the next call of `method` on `cq`.
  Call(AsyncQueues* owner, const CoordinatorService::AsyncMethod* method,
       grpc::ServerCompletionQueue* cq)
      : owner_(owner), method_(method), cq_(cq), stream_(&ctx_) {
    owner_->service_->RequestCall(method_->index, &ctx_, &stream_, cq_, this);
  }

  // Returns false when the call is over (delete it).
  bool Proceed(bool ok, bool taking_calls) {
    switch (step_) {
      case Step::kRequested:
        if (!ok) return false;  // the server shuts down: no call arrived
        if (taking_calls) new Call(owner_, method_, cq_);
        return Admit();
      case Step::kReading:
        return Answer(ok);
      case Step::kAnswered:
        owner_->gate_->Leave(&ticket_);
        return false;
    }
    return false;
  }

 private:
  enum class Step { kRequested, kReading, kAnswered };

  bool Admit() {
    absl::Status st =
        owner_->gate_->Enter(ctx_, method_->method->name, method_->method->roles, &ticket_);
    if (!st.ok()) return Finish(st);  // the body is never read
    info_.role = ticket_.role;
    step_ = Step::kReading;
    owner_->gate_->AwaitRequest(&ctx_, ticket_, method_->method->name);  // before the read
    stream_.Read(&request_, this);
    return true;
  }

  bool Answer(bool read) {
    owner_->gate_->RequestArrived(&ctx_);
    if (!read) return Finish(NoRequestMessage(method_->method->name));
    // The reply may come at once or later from any thread (a Register: the one that completes
    // the world); its operation's tag brings the call back to this queue's thread.
    step_ = Step::kAnswered;
    method_->method->body(info_, &request_, [this](const absl::Status& st, grpc::ByteBuffer reply) {
      // Nothing may touch `this` after Finish: this queue's thread may delete it.
      if (!st.ok()) {
        stream_.Finish(ToGrpc(st), this);
        return;
      }
      reply_.Swap(&reply);
      stream_.WriteAndFinish(reply_, grpc::WriteOptions(), grpc::Status::OK, this);
    });
    return true;
  }

  bool Finish(const absl::Status& status) {
    step_ = Step::kAnswered;
    stream_.Finish(ToGrpc(status), this);
    return true;
  }

  AsyncQueues* const owner_;
  const CoordinatorService::AsyncMethod* const method_;
  grpc::ServerCompletionQueue* const cq_;
  grpc::ServerContext ctx_;
  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> stream_;
  Step step_ = Step::kRequested;
  GateTicket ticket_;
  CallInfo info_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer reply_;
};

AsyncQueues::AsyncQueues(CoordinatorService* service, CallGate* gate,
                         std::vector<CoordinatorService::AsyncMethod> methods, int requests_ahead,
                         std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs)
    : service_(service),
      gate_(gate),
      methods_(std::move(methods)),
      requests_ahead_(requests_ahead) {
  for (auto& cq : cqs) {
    auto q = std::make_unique<Queue>();
    q->cq = std::move(cq);
    queues_.push_back(std::move(q));
  }
}

AsyncQueues::~AsyncQueues() { Shutdown(); }

void AsyncQueues::Start() {
  if (started_) return;
  started_ = true;
  for (auto& q : queues_) {
    for (const CoordinatorService::AsyncMethod& m : methods_) {
      for (int i = 0; i < requests_ahead_; ++i) new Call(this, &m, q->cq.get());
    }
    q->thread = std::thread([this, raw = q.get()] { Loop(raw); });
  }
}

void AsyncQueues::Loop(Queue* queue) {
  bool taking_calls = true;
  void* tag = nullptr;
  bool ok = false;
  while (queue->cq->Next(&tag, &ok)) {
    if (tag == &stop_tag) {
      // Only this thread requests calls on its queue, so none is requested after it shuts down.
      taking_calls = false;
      queue->cq->Shutdown();
      continue;
    }
    auto* call = static_cast<Call*>(tag);
    if (!call->Proceed(ok, taking_calls)) delete call;
  }
}

void AsyncQueues::Shutdown() {
  if (stopped_) return;
  stopped_ = true;
  for (auto& q : queues_) {
    if (!started_) {
      q->cq->Shutdown();
      void* tag = nullptr;
      bool ok = false;
      while (q->cq->Next(&tag, &ok)) {
      }
      continue;
    }
    q->stop_alarm.Set(q->cq.get(), gpr_now(GPR_CLOCK_MONOTONIC), &stop_tag);
  }
  for (auto& q : queues_) {
    if (q->thread.joinable()) q->thread.join();
  }
}

}  // namespace ddp
