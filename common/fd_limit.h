// The file-descriptor limit of a process that holds many connections.
//
// A coordinator holds one descriptor per connection: one per node task with per-node traffic
// (ddp-trainer's default), one per rank in a step with a task per GPU, and a few for operators,
// its journal and its logs. Slurm starts a step's tasks with the submitting shell's soft
// RLIMIT_NOFILE (PropagateResourceLimits), often 1024, while the hard limit is usually far
// higher: a coordinator left at 1024 stops accepting connections past it, and the ranks beyond
// wait at their registration deadline. Servers raise the soft limit to the hard one at start,
// as Go's runtime does for every program; RaiseFdLimitToHard does that, and
// DescribeFdLimit says whether the job can still outgrow it.
//
// Free functions; thread-compatible (setrlimit is process-wide: call it before threads start).
#ifndef SLURM_DDP_COMMON_FD_LIMIT_H_
#define SLURM_DDP_COMMON_FD_LIMIT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace ddp {

struct FdLimit {
  uint64_t before = 0;  // the soft limit the process started with
  uint64_t soft = 0;    // the soft limit now in force
  uint64_t hard = 0;
};

// Raises RLIMIT_NOFILE's soft limit to its hard limit (children started later inherit it).
absl::StatusOr<FdLimit> RaiseFdLimitToHard();

// The descriptors a coordinator of `world_size` ranks needs with a connection per rank (a task
// per GPU): a connection per rank and one per node task (counted as one per 8 ranks), an eighth
// more for a connect storm (a rank whose TLS handshake outlives its connect deadline connects
// again while the server still holds the first socket: 16,384 ranks and 2,048 node tasks on 2
// cores went past 19,100 descriptors), and 64 for operators, the journal, logs and the HTTP
// endpoint. gRPC 1.51 stops accepting for good once an accept fails for want of a descriptor.
// Per-node traffic needs one per node task instead.
uint64_t CoordinatorFdsWanted(int64_t world_size);

// What a gRPC server holding `connections` needs during their connect storm: an eighth more
// (see above). CoordinatorFdsWanted and the scale benchmark's host check use it.
uint64_t WithConnectStormMargin(uint64_t connections);

// The log line for `limit` in a process that may need `wanted` descriptors: that the soft limit
// was raised, or a warning naming what falls short and how to raise it; empty when nothing
// changed and nothing falls short.
std::string DescribeFdLimit(const FdLimit& limit, uint64_t wanted);

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_FD_LIMIT_H_
