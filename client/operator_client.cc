#include "client/operator_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "client/rpc_channel.h"
#include "common/status_macros.h"
#include "proto/convert.h"

namespace ddp {

namespace pb = ::slurm_ddp::v1;

OperatorClient::OperatorClient(std::unique_ptr<RpcChannel> channel) : ch_(std::move(channel)) {}
OperatorClient::~OperatorClient() = default;

absl::StatusOr<std::unique_ptr<OperatorClient>> OperatorClient::Connect(
    const ConnectOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<RpcChannel> channel, RpcChannel::Open(options));
  return std::unique_ptr<OperatorClient>(new OperatorClient(std::move(channel)));
}

std::string OperatorClient::address() const { return ch_->endpoint().grpc_address; }

absl::StatusOr<JobStatus> OperatorClient::GetStatus() {
  pb::GetStatusRequest req;
  pb::JobStatus reply;
  RETURN_IF_ERROR(ch_->Call("GetStatus", ch_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
    return ch_->stub().GetStatus(ctx, req, &reply);
  }));
  return FromProto(reply);
}

absl::Status OperatorClient::Watch(absl::Duration interval,
                                   const std::function<bool(const JobStatus&)>& on_status) {
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + ch_->endpoint().token);
  pb::WatchStatusRequest req;
  req.set_interval_ms(absl::ToInt64Milliseconds(interval));
  std::unique_ptr<grpc::ClientReader<pb::JobStatus>> reader = ch_->stub().WatchStatus(&ctx, req);
  pb::JobStatus msg;
  while (reader->Read(&msg)) {
    if (!on_status(FromProto(msg))) {
      ctx.TryCancel();
      reader->Finish();
      return absl::OkStatus();
    }
  }
  grpc::Status s = reader->Finish();
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat("WatchStatus: ", s.error_message()));
}

absl::StatusOr<std::string> OperatorClient::Stop(bool graceful, const std::string& reason) {
  pb::StopRequest req;
  req.set_mode(graceful ? pb::StopRequest::GRACEFUL : pb::StopRequest::NOW);
  req.set_reason(reason);
  pb::StopReply reply;
  RETURN_IF_ERROR(ch_->Call("Stop", ch_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
    return ch_->stub().Stop(ctx, req, &reply);
  }));
  return reply.state();
}

}  // namespace ddp
