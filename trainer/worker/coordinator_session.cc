#include "trainer/worker/coordinator_session.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/coordinator_client.h"
#include "trainer/ddp/grpc_store.h"

namespace ddp {
namespace {

// The coordinator is lost after --coordinator-grace without an answer; the stop that follows
// ends within --stop-timeout.
ProgressReporterOptions ReporterOptions(const CoordinatorSession::Options& s) {
  ProgressReporterOptions o;
  o.coordinator_grace = s.coordinator_grace;
  o.lost_stop_timeout = s.stop_timeout;
  o.heartbeat_deadline = s.rpc_timeout;
  return o;
}

ProgressReporterOptions WithPrefix(ProgressReporterOptions o, const std::string& prefix) {
  o.log_prefix = prefix;
  return o;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorSession>> CoordinatorSession::Open(
    const Options& o, const WorkerPlacement& p) {
  ConnectOptions co;
  co.dist_file = p.dist_file;
  co.expected_job_id = p.job_id;
  co.min_generation = p.generation;
  co.dist_file_timeout = o.registration_timeout;
  co.rpc_timeout = o.rpc_timeout;
  co.heartbeat_relay_fd = p.heartbeat_fd;
  auto api = ConnectToCoordinator(co);
  if (!api.ok()) {
    return absl::Status(
        api.status().code(),
        absl::StrCat(api.status().message(), " (coordinator log: ", p.coordinator_log, ")"));
  }
  WorkerIdentity who;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  who.host = host;
  if (const char* name = std::getenv("SLURMD_NODENAME"); name != nullptr) who.node_name = name;
  who.node_rank = p.node_rank;
  who.local_rank = p.local_rank;
  who.local_world_size = p.local_world_size;
  who.pid = getpid();
  who.first_shard = o.first_shard;
  auto rank = (*api)->Register(who, o.registration_timeout);
  if (!rank.ok()) {
    return absl::Status(rank.status().code(),
                        absl::StrCat("registration failed: ", rank.status().message()));
  }
  ProgressReporterOptions reporter = ReporterOptions(o);
  reporter.period = rank->heartbeat_interval;  // sized by the world (Job::HeartbeatInterval)
  return std::make_unique<CoordinatorSession>(*std::move(api), *rank, std::move(reporter),
                                              o.first_shard);
}

std::optional<ShardAssignment> CoordinatorSession::TakeFirstShard(const ShardRequest& request) {
  if (!first_shard_request_ || !rank_.first_shard || !rank_.first_shard->ok()) return std::nullopt;
  std::optional<ShardAssignment> out;
  if (*first_shard_request_ == request) out = **rank_.first_shard;
  first_shard_request_.reset();  // the first GetShard is this one, whether it matched or not
  rank_.first_shard.reset();
  return out;
}

CoordinatorSession::CoordinatorSession(std::unique_ptr<CoordinatorApi> api, RankAssignment rank,
                                       ProgressReporterOptions reporter,
                                       std::optional<ShardRequest> first_shard)
    : api_(std::move(api)),
      rank_(std::move(rank)),
      first_shard_request_(std::move(first_shard)),
      log_prefix_(absl::StrCat("[rank ", rank_.rank, "] ")),
      reporter_(api_.get(), WithPrefix(std::move(reporter), log_prefix_)) {
  reporter_.SetOwnGeneration(rank_.membership_generation);
}

absl::StatusOr<RankAssignment> CoordinatorSession::Rejoin(int64_t committed_step,
                                                          const std::string& reason,
                                                          absl::Duration timeout) {
  RejoinRequest request;
  request.membership_generation = rank_.membership_generation;
  request.committed_step = committed_step;
  request.reason = reason.substr(0, reason.find('\n'));
  absl::StatusOr<RankAssignment> next = api_->Rejoin(request, timeout);
  if (!next.ok()) return next.status();
  rank_ = *next;
  first_shard_request_.reset();
  log_prefix_ = absl::StrCat("[rank ", rank_.rank, "] ");
  reporter_.SetOwnGeneration(rank_.membership_generation);
  return next;
}

c10::intrusive_ptr<c10d::Store> CoordinatorSession::Store(std::chrono::milliseconds timeout,
                                                          CoordinatorStore::SetHook after_set) {
  return c10::make_intrusive<CoordinatorStore>(*api_, "", timeout, std::move(after_set));
}

void CoordinatorSession::ReportOutcome(const absl::Status& outcome) {
  // A coordinator that does not answer heartbeats would only keep this worker from exiting
  // until the call's deadline.
  if (reporter_.coordinator_silent()) {
    if (rank_.rank == 0) {
      std::fprintf(stderr,
                   "%swarning: the outcome is not reported: the coordinator has not "
                   "answered for %s\n",
                   log_prefix_.c_str(), reporter_.unanswered_text().c_str());
    }
    return;
  }
  if (absl::Status st = api_->ReportDone(outcome); !st.ok() && rank_.rank == 0) {
    std::fprintf(stderr, "%swarning: could not report the outcome: %s\n", log_prefix_.c_str(),
                 std::string(st.message()).c_str());
  }
}

}  // namespace ddp
