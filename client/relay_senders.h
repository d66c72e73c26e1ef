// Internal to client/: where a node's relay (client/heartbeat_relay.h) sends its calls by
// default: the node task's own connection to the coordinator, opened on first use through the
// dist_file (and again after a failure to open), shared by the heartbeats, the node calls and
// the workers' own calls. The workers' own calls are made by name from an allowlist (Hello, the
// c10d store's calls, CommitCheckpoint, ReportDone); any other name is refused. `cancel` ends
// the calls in flight and fails later ones.
//
// Thread safety: the returned functions are safe to call from any thread at once.
#ifndef SLURM_DDP_CLIENT_RELAY_SENDERS_H_
#define SLURM_DDP_CLIENT_RELAY_SENDERS_H_

#include "client/coordinator_client.h"
#include "client/heartbeat_relay.h"

namespace ddp {

NodeCallSenders CoordinatorSenders(const ConnectOptions& options);

}  // namespace ddp

#endif  // SLURM_DDP_CLIENT_RELAY_SENDERS_H_
