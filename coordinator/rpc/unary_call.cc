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
    : method_(method), gate_(gate) {
  absl::Status admitted = gate_->Enter(*ctx, method_->name, method_->roles, &info_.role);
  if (!admitted.ok()) {
    Finish(ToGrpc(admitted));  // the body is never read
    return;
  }
  admitted_ = true;
  StartRead(&request_);
}

void UnaryCall::OnReadDone(bool ok) {
  if (!ok) {
    Finish(ToGrpc(NoRequestMessage(method_->name)));
    return;
  }
  method_->body(info_, &request_, [this](const absl::Status& st, grpc::ByteBuffer reply) {
    Answer(st, std::move(reply));
  });
}

void UnaryCall::Answer(const absl::Status& status, grpc::ByteBuffer reply) {
  // Nothing may touch `this` after Finish: OnDone may delete it on another thread.
  if (!status.ok()) {
    Finish(ToGrpc(status));
    return;
  }
  reply_ = std::move(reply);
  StartWriteAndFinish(&reply_, grpc::WriteOptions(), grpc::Status::OK);
}

void UnaryCall::OnDone() {
  if (admitted_) gate_->Leave();
  delete this;
}

}  // namespace ddp
