// A warm worker (ddp-trainer --warm-workers): a worker process a node's task starts ahead of need.
// It loads LibTorch and opens the data like any worker, then waits on its warm link for the slot
// of a worker that died: the task sends the local rank and, with it, that local rank's heartbeat
// relay socket (SCM_RIGHTS), so the warm worker heartbeats through the slot's own socket. Its
// process start and data open, about half a second on 2 cores, are then no part of a recovery.
//
//   task:   MakeWarmLink(); start the worker with worker_end inherited (DDP_WORKER_WARM_FD);
//           close worker_end; on a loss SendWarmActivation(task_end, local_rank, relay_fd).
//   worker: AwaitWarmActivation(fd, stop) -> local rank and relay socket; go on as a replacement,
//           and close fd after the first committed step.
//   task:   WarmLinkClosed(task_end) -> start the next warm worker.
//
// The next warm worker starts only when the activated one has committed its first step (or
// ended): its start-up (LibTorch loading, the data open) would otherwise take CPU from the
// recovery it was started for.
//
// One SOCK_SEQPACKET socketpair per warm worker; one packet ("ddp-warm v1 <local rank>") with at
// most one descriptor. The worker ends when the task closes its end first or a stop signal comes
// (CANCELLED): it was not needed.
#ifndef SLURM_DDP_TRAINER_LAUNCHER_WARM_LINK_H_
#define SLURM_DDP_TRAINER_LAUNCHER_WARM_LINK_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ddp {

struct WarmLinkEnds {
  int task_end = -1;    // close-on-exec: stays with the task
  int worker_end = -1;  // close-on-exec too; the spawn passes it to the warm worker
};

// INTERNAL naming the errno when no socketpair can be made.
absl::StatusOr<WarmLinkEnds> MakeWarmLink();

// The warm worker on `task_end` now holds `local_rank`; `relay_fd` (-1: none, the worker then
// heartbeats the coordinator itself) travels with it. UNAVAILABLE when the worker is gone.
absl::Status SendWarmActivation(int task_end, int local_rank, int relay_fd);

struct WarmActivation {
  int local_rank = -1;
  int relay_fd = -1;  // a descriptor of this process now (close-on-exec), or -1
};

// Waits for the activation, looking at `stop` every `poll` (a stop signal's flag). CANCELLED when
// `stop` turned true or the task closed its end first; INVALID_ARGUMENT for a malformed packet.
absl::StatusOr<WarmActivation> AwaitWarmActivation(int worker_end,
                                                   const std::function<bool()>& stop,
                                                   absl::Duration poll = absl::Milliseconds(100));

// True once the worker has closed its end of the link (or is gone); never blocks.
bool WarmLinkClosed(int task_end);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_LAUNCHER_WARM_LINK_H_
