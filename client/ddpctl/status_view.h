// How ddpctl shows a JobStatus to people: the compact status view (status, watch on a TTY),
// the one-line form (watch into a pipe or file) and the exit code a finished job maps to.
//
// Thread safety: pure functions.
#ifndef SLURM_DDP_CLIENT_DDPCTL_STATUS_VIEW_H_
#define SLURM_DDP_CLIENT_DDPCTL_STATUS_VIEW_H_

#include <string>

#include "common/exit_codes.h"
#include "common/job_status.h"

namespace ddp {

struct ViewOptions {
  int max_ranks = 32;  // rank rows to show (flagged ranks first); <= 0: all
  int events = 5;      // recent events to show
};

// The multi-line human view. A failed job names the failed rank and the reason first.
std::string FormatStatus(const JobStatus& status, const ViewOptions& options);
// One line: state, epoch/step, loss, throughput, ranks ok/lagging.
std::string FormatLine(const JobStatus& status);
// "[#######.......]" for `fraction` in [0, 1].
std::string ProgressBar(double fraction, int width);
// "1h02m", "3m05s", "12s"; "-" when negative.
std::string FormatDuration(double seconds);
// kExitOk when SUCCEEDED, kExitResumable when STOPPED, kExitFailed otherwise.
int ExitCodeForJob(const JobStatus& status);

}  // namespace ddp

#endif  // SLURM_DDP_CLIENT_DDPCTL_STATUS_VIEW_H_
