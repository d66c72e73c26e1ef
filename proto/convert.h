// Every conversion between the generated protobuf messages and the plain types of common/ (used
// by the coordinator's service and by the client), and between absl::Status and grpc::Status.
// The only code that knows both worlds: handlers and client calls translate through here.
//
// Enums from the wire that this build does not know map to a documented fallback: JobState ->
// kFailed, RankState -> kStarting, StepPhase -> kNone, WorkerPhase -> kStarting, FailureKind ->
// kWorkerError (still a failure), Command -> kContinue.
//
// Thread safety: pure functions; safe from any thread.
#ifndef SLURM_DDP_PROTO_CONVERT_H_
#define SLURM_DDP_PROTO_CONVERT_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "common/coordinator_api.h"
#include "common/failure_cause.h"
#include "common/job_status.h"
#include "proto/coordinator.pb.h"

namespace ddp {

// --- enums --------------------------------------------------------------------------------------
slurm_ddp::v1::JobState ToProto(JobState in);
JobState FromProto(slurm_ddp::v1::JobState in);
slurm_ddp::v1::RankState ToProto(RankState in);
RankState FromProto(slurm_ddp::v1::RankState in);
slurm_ddp::v1::StepPhase ToProto(StepPhase in);
StepPhase FromProto(slurm_ddp::v1::StepPhase in);
slurm_ddp::v1::WorkerPhase ToProto(WorkerPhase in);
WorkerPhase FromProto(slurm_ddp::v1::WorkerPhase in);
slurm_ddp::v1::FailureKind ToProto(FailureKind in);
FailureKind FromProto(slurm_ddp::v1::FailureKind in);
slurm_ddp::v1::Command ToProto(Command in);
Command FromProto(slurm_ddp::v1::Command in);

// --- status -------------------------------------------------------------------------------------
void ToProto(const FailureCause& in, slurm_ddp::v1::FailureCause* out);
FailureCause FromProto(const slurm_ddp::v1::FailureCause& in);
void ToProto(const JobStatus& in, slurm_ddp::v1::JobStatus* out);
// Every field but `ranks` (in.ranks is not read): the snapshot appends each rank's bytes.
void ToProtoWithoutRanks(const JobStatus& in, slurm_ddp::v1::JobStatus* out);
void ToProto(const RankStatus& in, slurm_ddp::v1::RankStatus* out);
JobStatus FromProto(const slurm_ddp::v1::JobStatus& in);

// --- worker calls (requests leave WorkerRef to the caller) --------------------------------------
void ToProto(const WorkerIdentity& in, slurm_ddp::v1::RegisterRequest* out);
WorkerIdentity FromProto(const slurm_ddp::v1::RegisterRequest& in);
void ToProto(const RankAssignment& in, slurm_ddp::v1::RegisterReply* out);
RankAssignment FromProto(const slurm_ddp::v1::RegisterReply& in);
void ToProto(const ShardRequest& in, slurm_ddp::v1::GetShardRequest* out);
ShardRequest FromProto(const slurm_ddp::v1::GetShardRequest& in);
void ToProto(const ShardAssignment& in, slurm_ddp::v1::GetShardReply* out);
ShardAssignment FromProto(const slurm_ddp::v1::GetShardReply& in);
void ToProto(const ProgressReport& in, slurm_ddp::v1::Progress* out);
ProgressReport FromProto(const slurm_ddp::v1::Progress& in);
void ToProto(const HeartbeatReply& in, slurm_ddp::v1::HeartbeatReply* out);
HeartbeatReply FromProto(const slurm_ddp::v1::HeartbeatReply& in);
void ToProto(const CommittedCheckpoint& in, slurm_ddp::v1::CommitCheckpointRequest* out);
CommittedCheckpoint FromProto(const slurm_ddp::v1::CommitCheckpointRequest& in);
// A worker's outcome: OK, or its code (1..16; anything else reads UNKNOWN) and message.
void ToProto(const absl::Status& outcome, slurm_ddp::v1::ReportDoneRequest* out);
absl::Status FromProto(const slurm_ddp::v1::ReportDoneRequest& in);
// One beat's outcome in a NodeHeartbeat (its reply is set apart): OK, or the code (1..16; anything
// else reads UNKNOWN) and error its own Heartbeat would have got.
void ToProto(const absl::Status& outcome, slurm_ddp::v1::RankHeartbeatReply* out);
absl::Status FromProto(const slurm_ddp::v1::RankHeartbeatReply& in);
// The same for any message with `code` and `error` fields (RankHeartbeatReply, JoinResult,
// ShardResult, UnaryResult): one request's outcome inside a node or relayed call.
absl::StatusCode WireCode(int code);  // 0..16 as is, anything else UNKNOWN
template <typename Result>
void ToWire(const absl::Status& outcome, Result* out) {
  out->set_code(static_cast<int>(outcome.code()));
  out->set_error(std::string(outcome.message()));
}
template <typename Result>
absl::Status FromWire(const Result& in) {
  if (in.code() == 0) return absl::OkStatus();
  return absl::Status(WireCode(in.code()), in.error());
}
void ToProto(const LostWorker& in, slurm_ddp::v1::ReportLostRequest* out);
LostWorker FromProto(const slurm_ddp::v1::ReportLostRequest& in);

// --- in-job recovery (convert_recovery.cc) ------------------------------------------------------
// LostAction from the wire that this build does not know reads kStop (the safe choice).
slurm_ddp::v1::LostAction ToProto(LostAction in);
LostAction FromProto(slurm_ddp::v1::LostAction in);
void ToProto(const LostDecision& in, slurm_ddp::v1::ReportLostReply* out);
LostDecision FromProto(const slurm_ddp::v1::ReportLostReply& in);
// Spares (StandBy). An action this build does not know reads kWait (ask again).
void ToProto(const SpareReport& in, slurm_ddp::v1::StandByRequest* out);
SpareReport FromProto(const slurm_ddp::v1::StandByRequest& in);
void ToProto(const SpareDecision& in, slurm_ddp::v1::StandByReply* out);
SpareDecision FromProto(const slurm_ddp::v1::StandByReply& in);
// Fencing (Fences).
void ToProto(int node_rank, const std::vector<LiveWorker>& in, slurm_ddp::v1::FencesRequest* out);
std::vector<LiveWorker> FromProto(const slurm_ddp::v1::FencesRequest& in);
void ToProto(const std::vector<FenceOrder>& in, slurm_ddp::v1::FencesReply* out);
std::vector<FenceOrder> FromProto(const slurm_ddp::v1::FencesReply& in);
void ToProto(const RejoinRequest& in, slurm_ddp::v1::RejoinRequest* out);
RejoinRequest FromProto(const slurm_ddp::v1::RejoinRequest& in);
// The recovery fields of a rank assignment and of a job status (called by the functions above).
void RecoveryToProto(const RankAssignment& in, slurm_ddp::v1::RegisterReply* out);
void RecoveryFromProto(const slurm_ddp::v1::RegisterReply& in, RankAssignment* out);
void RecoveryToProto(const JobStatus& in, slurm_ddp::v1::JobStatus* out);
void RecoveryFromProto(const slurm_ddp::v1::JobStatus& in, JobStatus* out);
// Straggler detection (convert_straggler.cc; called by the functions above): a heartbeat's
// section totals, a rank's score, and the job's stragglers, step breakdown and time use.
void StragglerToProto(const SectionTotals& in, slurm_ddp::v1::Progress* out);
void StragglerFromProto(const slurm_ddp::v1::Progress& in, SectionTotals* out);
void StragglerToProto(const RankScore& in, slurm_ddp::v1::RankStatus* out);
void StragglerFromProto(const slurm_ddp::v1::RankStatus& in, RankScore* out);
void StragglerToProto(const JobStatus& in, slurm_ddp::v1::JobStatus* out);
void StragglerFromProto(const slurm_ddp::v1::JobStatus& in, JobStatus* out);

// --- RPC status ---------------------------------------------------------------------------------
grpc::Status ToGrpc(const absl::Status& in);
absl::Status FromGrpc(const grpc::Status& in);

}  // namespace ddp

#endif  // SLURM_DDP_PROTO_CONVERT_H_
