// One unary call of the coordinator's protocol. The service registers every method as a
// bidirectional stream (service.h), so gRPC hands the call over on its headers, before reading
// its body; UnaryCall then passes the CallGate (token, role, room) and only an admitted call
// reads its one request message, bounded by the server's receive limit. A refused call is
// answered at once: its body is never buffered beyond the transport's window, nor parsed. On
// the wire this is an ordinary unary call (one message each way).
//
// The method's Body gets the request bytes and a Reply to call exactly once, at once or later
// from another thread (a Register that waits for the world, a StoreGet that waits for its key).
// Typed() adapts a body written on the request and reply protobuf types; a request that does not
// parse (malformed, or a string that is not valid UTF-8) is INVALID_ARGUMENT.
//
// A view or control call whose request message does not arrive within the gate's first-message
// timeout is cancelled (call_gate.h). A body that parks (StoreGet, StoreWait) registers what to do
// when the client goes away (CallInfo::cancel), so that a cancelled call is answered, and its
// slot given back, at once rather than at its own timeout.
//
// Lifetime: created by gRPC per call; deletes itself in OnDone, which comes only after the
// Reply ran and after OnReadDone (so the body) returned. Thread safety: Reply may run on any
// thread, once; OnCancel may run on any thread, concurrently with the body.
#ifndef SLURM_DDP_COORDINATOR_RPC_UNARY_CALL_H_
#define SLURM_DDP_COORDINATOR_RPC_UNARY_CALL_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/rpc/auth.h"
#include "coordinator/rpc/call_gate.h"

namespace ddp {

// What a parked call runs when its client goes away before it was answered (CallInfo::cancel).
class CancelHook {
 public:
  // Runs `f` once when the call is cancelled (the client cancelled or disconnected, or its
  // deadline passed), or at once if it already was; never after the call was answered. Call it
  // from the body only (before the body returns); `f` may answer the call.
  virtual void WhenCancelled(std::function<void()> f) = 0;

 protected:
  ~CancelHook() = default;
};

// Who is calling, as the gate admitted it.
struct CallInfo {
  Role role = Role::kNone;
  CancelHook* cancel = nullptr;  // null where the call cannot tell (asynchronous methods)
};

class UnaryCall final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                        public CancelHook {
 public:
  // Answers the call: OK with `reply`, or the error.
  using Reply = std::function<void(const absl::Status&, grpc::ByteBuffer reply)>;
  using Body = std::function<void(const CallInfo&, grpc::ByteBuffer* request, Reply reply)>;

  struct Method {
    std::string name;  // "Heartbeat"
    RoleMask roles;    // who may call it
    Body body;
  };

  // `method` and `gate` must outlive the call.
  UnaryCall(grpc::CallbackServerContext* ctx, const Method* method, CallGate* gate);

  void OnReadDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;
  void WhenCancelled(std::function<void()> f) override;

 private:
  void Answer(const absl::Status& status, grpc::ByteBuffer reply);

  grpc::CallbackServerContext* const ctx_;
  const Method* const method_;
  CallGate* const gate_;
  CallInfo info_;
  GateTicket ticket_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer reply_;
  absl::Mutex cancel_mu_;
  bool cancelled_ ABSL_GUARDED_BY(cancel_mu_) = false;
  bool answered_ ABSL_GUARDED_BY(cancel_mu_) = false;
  std::function<void()> on_cancel_ ABSL_GUARDED_BY(cancel_mu_);
};

// Parses `bytes` as a `Message`; INVALID_ARGUMENT naming `method` when it does not parse.
template <typename Message>
absl::Status ParseRequest(const std::string& method, grpc::ByteBuffer* bytes, Message* out) {
  grpc::ProtoBufferReader reader(bytes);
  if (out->ParseFromZeroCopyStream(&reader)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      method, ": the request does not parse (malformed, or a string that is not valid UTF-8)"));
}

grpc::ByteBuffer SerializeReply(const google::protobuf::Message& reply);

// A method's request bound, checked on the request's size before it is parsed:
// RESOURCE_EXHAUSTED naming the sizes, else OK.
absl::Status CheckRequestSize(const std::string& method, size_t bytes, size_t limit);
// A call that ended without its one request message: the client went away, or the message broke
// the receive limit (gRPC has then already failed the call with RESOURCE_EXHAUSTED).
absl::Status NoRequestMessage(const std::string& method);

// A Body from `run(const CallInfo&, const Request&, Response*, std::function<void(const
// absl::Status&)> done)`: parses the request, and serializes the response when `done` gets OK.
// `run` may call `done` later; it must not keep a reference to the request.
template <typename Request, typename Response, typename Run>
UnaryCall::Body TypedWithCall(std::string method, Run run) {
  return [method = std::move(method), run = std::move(run)](
             const CallInfo& call, grpc::ByteBuffer* bytes, UnaryCall::Reply reply) {
    Request request;
    absl::Status parsed = ParseRequest(method, bytes, &request);
    bytes->Clear();  // a parked call keeps no request bytes
    if (!parsed.ok()) {
      reply(parsed, grpc::ByteBuffer());
      return;
    }
    auto response = std::make_shared<Response>();
    run(call, request, response.get(),
        [response, reply = std::move(reply)](const absl::Status& st) {
          reply(st, st.ok() ? SerializeReply(*response) : grpc::ByteBuffer());
        });
  };
}

// A Body from `run(const Request&, Response*, std::function<void(const absl::Status&)> done)`:
// parses the request, and serializes the response when `done` gets OK. `run` may call `done`
// later; it must not keep a reference to the request.
template <typename Request, typename Response, typename Run>
UnaryCall::Body Typed(std::string method, Run run) {
  return TypedWithCall<Request, Response>(
      std::move(method),
      [run = std::move(run)](const CallInfo&, const Request& request, Response* response,
                             std::function<void(const absl::Status&)> done) {
        run(request, response, std::move(done));
      });
}

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_RPC_UNARY_CALL_H_
