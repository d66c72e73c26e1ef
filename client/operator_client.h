// The operator's connection to a coordinator (ddpctl, dashboards): status, watch, stop. Like
// coordinator_client.h this header exposes no gRPC or protobuf type.
//
// Thread safety: safe to use from several threads at once.
#ifndef SLURM_DDP_CLIENT_OPERATOR_CLIENT_H_
#define SLURM_DDP_CLIENT_OPERATOR_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "common/job_status.h"

namespace ddp {

class RpcChannel;

class OperatorClient {
 public:
  // Same discovery and verification as ConnectToCoordinator (options.expected_job_id may be
  // empty to accept whichever job the dist_file names). With a dist_file, options.role says
  // which token to use: kView to look (status, watch, dashboard), kControl to stop as well.
  static absl::StatusOr<std::unique_ptr<OperatorClient>> Connect(const ConnectOptions& options);
  ~OperatorClient();
  OperatorClient(const OperatorClient&) = delete;
  OperatorClient& operator=(const OperatorClient&) = delete;

  absl::StatusOr<JobStatus> GetStatus();
  // Calls `on_status` with each update (every `interval`, and the final one) until the job
  // finishes, `on_status` returns false, or the stream breaks. A coordinator that sends nothing
  // for `silence` (default: 3 intervals + 5 s) is given up on with UNAVAILABLE, so a hung or
  // vanished coordinator never hangs the caller.
  absl::Status Watch(absl::Duration interval,
                     const std::function<bool(const JobStatus&)>& on_status,
                     absl::Duration silence = absl::ZeroDuration());
  // graceful: checkpoint and stop; otherwise abort now. Returns the job state after the request.
  absl::StatusOr<JobState> Stop(bool graceful, const std::string& reason);
  // host:port of the coordinator.
  std::string address() const;
  // What Hello reported.
  const std::string& job_id() const;
  int world_size() const;
  // http://<coordinator host>:<http port>/?token=<view token>: view-only, safe to share (it can
  // neither stop the job nor touch its store). NOT_FOUND when the coordinator serves no HTTP
  // endpoint; PERMISSION_DENIED when no view token is known (a worker token given by address).
  absl::StatusOr<std::string> DashboardUrl() const;

 private:
  explicit OperatorClient(std::unique_ptr<RpcChannel> channel);
  std::unique_ptr<RpcChannel> ch_;
};

}  // namespace ddp

#endif  // SLURM_DDP_CLIENT_OPERATOR_CLIENT_H_
