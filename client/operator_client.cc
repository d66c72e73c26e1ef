#include "client/operator_client.h"

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/rpc_channel.h"
#include "common/status_macros.h"
#include "google/protobuf/arena.h"
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
const std::string& OperatorClient::job_id() const { return ch_->endpoint().job_id; }
int OperatorClient::world_size() const { return ch_->world_size(); }

absl::StatusOr<std::string> OperatorClient::DashboardUrl() const {
  const DistFileContents& e = ch_->endpoint();
  if (e.http_port <= 0) {
    return absl::NotFoundError(
        absl::StrCat("the coordinator at ", e.grpc_address,
                     " serves no HTTP endpoint (started with --http-port -1)"));
  }
  if (e.view_token.empty()) {
    return absl::PermissionDeniedError(
        "no view token for the dashboard URL: use the dist_file, or a view or control token");
  }
  const std::string host = e.grpc_address.substr(0, e.grpc_address.rfind(':'));
  return absl::StrCat("http://", host, ":", e.http_port, "/?token=", e.view_token);
}

absl::StatusOr<JobStatus> OperatorClient::GetStatus() {
  pb::GetStatusRequest req;
  // One arena for the reply: a large job's status holds thousands of RankStatus messages.
  google::protobuf::Arena arena;
  auto* reply = google::protobuf::Arena::CreateMessage<pb::JobStatus>(&arena);
  RETURN_IF_ERROR(ch_->Call("GetStatus", ch_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
    return ch_->stub().GetStatus(ctx, req, reply);
  }));
  return FromProto(*reply);
}

absl::Status OperatorClient::Watch(absl::Duration interval,
                                   const std::function<bool(const JobStatus&)>& on_status,
                                   absl::Duration silence) {
  if (silence <= absl::ZeroDuration()) silence = interval * 3 + absl::Seconds(5);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + ch_->token());
  pb::WatchStatusRequest req;
  req.set_interval_ms(absl::ToInt64Milliseconds(interval));
  // The watchdog cancels the stream when the coordinator goes silent.
  absl::Mutex mu;
  absl::Time last = absl::Now();
  bool done = false;
  bool silent = false;
  std::thread watchdog([&] {
    absl::MutexLock lock(&mu);
    while (!done) {
      const absl::Time deadline = last + silence;
      if (absl::Now() >= deadline) {
        silent = true;
        ctx.TryCancel();
        return;
      }
      mu.AwaitWithDeadline(absl::Condition(&done), deadline);
    }
  });
  auto stop_watchdog = [&] {
    {
      absl::MutexLock lock(&mu);
      done = true;
    }
    watchdog.join();
  };
  std::unique_ptr<grpc::ClientReader<pb::JobStatus>> reader = ch_->stub().WatchStatus(&ctx, req);
  pb::JobStatus msg;
  while (reader->Read(&msg)) {
    {
      absl::MutexLock lock(&mu);
      last = absl::Now();
    }
    if (!on_status(FromProto(msg))) {
      stop_watchdog();
      ctx.TryCancel();
      reader->Finish();
      return absl::OkStatus();
    }
  }
  stop_watchdog();
  grpc::Status s = reader->Finish();
  if (silent) {
    return absl::UnavailableError(absl::StrCat("WatchStatus: no update from the coordinator at ",
                                               address(), " for ", absl::FormatDuration(silence),
                                               "; giving up"));
  }
  if (s.ok()) return absl::OkStatus();
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return absl::UnavailableError(
        absl::StrCat("WatchStatus: lost the coordinator at ", address(), ": ", s.error_message()));
  }
  const absl::Status st = FromGrpc(s);
  return absl::Status(st.code(), absl::StrCat("WatchStatus: ", st.message()));
}

absl::StatusOr<JobState> OperatorClient::Stop(bool graceful, const std::string& reason) {
  pb::StopRequest req;
  req.set_mode(graceful ? pb::StopRequest::GRACEFUL : pb::StopRequest::NOW);
  req.set_reason(WireText(reason));
  pb::StopReply reply;
  RETURN_IF_ERROR(ch_->Call("Stop", ch_->rpc_timeout(), [&](grpc::ClientContext* ctx) {
    return ch_->stub().Stop(ctx, req, &reply);
  }));
  return FromProto(reply.state());
}

}  // namespace ddp
