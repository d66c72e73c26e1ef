// Conversions between the generated protobuf messages and the plain types of common/ (used by
// the coordinator's service and by the client). The only code that knows both worlds.
//
// Thread safety: pure functions; safe from any thread.
#ifndef SLURM_DDP_PROTO_CONVERT_H_
#define SLURM_DDP_PROTO_CONVERT_H_

#include "common/coordinator_api.h"
#include "common/job_status.h"
#include "proto/coordinator.pb.h"

namespace ddp {

void ToProto(const JobStatus& in, slurm_ddp::v1::JobStatus* out);
JobStatus FromProto(const slurm_ddp::v1::JobStatus& in);

void ToProto(const ProgressReport& in, slurm_ddp::v1::Progress* out);
ProgressReport FromProto(const slurm_ddp::v1::Progress& in);

void ToProto(const ShardAssignment& in, slurm_ddp::v1::GetShardReply* out);
ShardAssignment FromProto(const slurm_ddp::v1::GetShardReply& in);

void ToProto(const RankAssignment& in, slurm_ddp::v1::RegisterReply* out);
RankAssignment FromProto(const slurm_ddp::v1::RegisterReply& in);

// Parses a state name ("RUNNING"); kFailed for anything unknown.
JobState JobStateFromName(const std::string& name);

}  // namespace ddp

#endif  // SLURM_DDP_PROTO_CONVERT_H_
