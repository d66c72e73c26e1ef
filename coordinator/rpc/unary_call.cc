#include "coordinator/rpc/unary_call.h"

#include "proto/convert.h"

namespace ddp {

grpc::ByteBuffer SerializeReply(const google::protobuf::Message& reply) {
  const std::string bytes = reply.SerializeAsString();
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

absl::Status CheckRequestSize(const std::string& method, size_t bytes, size_t limit) {
  if (bytes <= limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat(method, " request of ", bytes, " bytes exceeds its limit of ", limit));
}

absl::Status NoRequestMessage(const std::string& method) {
  return absl::InvalidArgumentError(absl::StrCat(method, ": no request message"));
}

UnaryCall::UnaryCall(grpc::CallbackServerContext* ctx, const Method* method, CallGate* gate)
    : ctx_(ctx), method_(method), gate_(gate) {
  absl::Status admitted = gate_->Enter(*ctx, method_->name, method_->roles, &ticket_);
  if (!admitted.ok()) {
    Finish(ToGrpc(admitted));  // the body is never read
    return;
  }
  info_.role = ticket_.role;
  info_.cancel = this;
  gate_->AwaitRequest(ctx_, ticket_, method_->name);  // before the read can complete
  StartRead(&request_);
}

void UnaryCall::OnReadDone(bool ok) {
  gate_->RequestArrived(ctx_);
  if (!ok) {
    Answer(NoRequestMessage(method_->name), grpc::ByteBuffer());
    return;
  }
  // OnDone waits for this reaction to return, so the body may use `info_.cancel` until then.
  method_->body(info_, &request_, [this](const absl::Status& st, grpc::ByteBuffer reply) {
    Answer(st, std::move(reply));
  });
}

void UnaryCall::WhenCancelled(std::function<void()> f) {
  {
    absl::MutexLock lock(&cancel_mu_);
    if (answered_) return;
    if (!cancelled_) {
      on_cancel_ = std::move(f);
      return;
    }
  }
  f();
}

void UnaryCall::OnCancel() {
  std::function<void()> f;
  {
    absl::MutexLock lock(&cancel_mu_);
    cancelled_ = true;
    f = std::move(on_cancel_);
    on_cancel_ = nullptr;
  }
  if (f) f();  // may answer the call (a parked store call gives its slot back now)
}

void UnaryCall::Answer(const absl::Status& status, grpc::ByteBuffer reply) {
  {
    absl::MutexLock lock(&cancel_mu_);
    answered_ = true;
    on_cancel_ = nullptr;
  }
  // Nothing may touch `this` after Finish: OnDone may delete it on another thread.
  if (!status.ok()) {
    Finish(ToGrpc(status));
    return;
  }
  reply_ = std::move(reply);
  StartWriteAndFinish(&reply_, grpc::WriteOptions(), grpc::Status::OK);
}

void UnaryCall::OnDone() {
  gate_->Leave(&ticket_);
  delete this;
}

}  // namespace ddp
