#include "bench/loadgen/status_probe.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/loadgen/bench_credentials.h"
#include "common/job_status.h"
#include "google/protobuf/arena.h"
#include "proto/convert.h"
#include "proto/coordinator.grpc.pb.h"

namespace pb = ::slurm_ddp::v1;

namespace ddp::bench {

struct StatusProbe::Impl {
  std::string auth;
  std::unique_ptr<pb::Coordinator::Stub> stub;

  grpc::Status Fetch(pb::JobStatus* reply) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", auth);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub->GetStatus(&ctx, pb::GetStatusRequest(), reply);
  }
};

StatusProbe::StatusProbe(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StatusProbe::~StatusProbe() = default;

absl::StatusOr<std::unique_ptr<StatusProbe>> StatusProbe::Open(const std::string& address,
                                                               const std::string& token,
                                                               const std::string& tls_cert) {
  auto impl = std::make_unique<Impl>();
  impl->auth = "Bearer " + token;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);  // 16,384 ranks make a reply of about 1 MB
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  impl->stub = pb::Coordinator::NewStub(
      grpc::CreateCustomChannel(address, BenchChannelCredentials(tls_cert, &args), args));
  return std::unique_ptr<StatusProbe>(new StatusProbe(std::move(impl)));
}

absl::StatusOr<JobSnapshot> StatusProbe::Once() {
  google::protobuf::Arena arena;
  auto* reply = google::protobuf::Arena::CreateMessage<pb::JobStatus>(&arena);
  grpc::Status s = impl_->Fetch(reply);
  if (!s.ok()) {
    return absl::UnavailableError(absl::StrCat("GetStatus: ", s.error_message()));
  }
  JobSnapshot snap;
  snap.state = JobStateName(FromProto(reply->state()));
  snap.world_size = reply->world_size();
  snap.registered = reply->registered();
  snap.bytes = reply->ByteSizeLong();
  snap.failure = reply->failure().text();
  snap.membership_generation = reply->membership_generation();
  snap.restarts = reply->restarts();
  for (const pb::RankStatus& r : reply->ranks()) {
    const RankState state = FromProto(r.state());
    if (state == RankState::kLost || state == RankState::kFailed || state == RankState::kStalled) {
      ++snap.unhealthy_ranks;
    }
  }
  return snap;
}

StatusSeries StatusProbe::Measure(absl::Duration window, absl::Duration pause) {
  StatusSeries series;
  std::vector<double> ms;
  const absl::Time end = absl::Now() + window;
  while (absl::Now() < end) {
    google::protobuf::Arena arena;
    auto* reply = google::protobuf::Arena::CreateMessage<pb::JobStatus>(&arena);
    const absl::Time t0 = absl::Now();
    const bool ok = impl_->Fetch(reply).ok();
    const double took = absl::ToDoubleMilliseconds(absl::Now() - t0);
    if (ok) {
      ms.push_back(took);
    } else {
      ++series.errors;
    }
    absl::SleepFor(pause);
  }
  series.latency = Summarize(&ms);
  return series;
}

}  // namespace ddp::bench
