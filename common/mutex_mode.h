// Debian's abseil is built without NDEBUG, so absl::Mutex runs its deadlock detector on every
// lock acquired while another is held: a global lock-order graph (GraphCycles) that took ~15%
// of the coordinator's CPU with 4096 workers registering. The shipped binaries switch it off at
// start; the tests keep it on, so a lock-order inversion still fails them.
#ifndef SLURM_DDP_COMMON_MUTEX_MODE_H_
#define SLURM_DDP_COMMON_MUTEX_MODE_H_

#include "absl/synchronization/mutex.h"

namespace ddp {

// Call first thing in main(), before any thread starts.
inline void UseReleaseMutexMode() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_MUTEX_MODE_H_
