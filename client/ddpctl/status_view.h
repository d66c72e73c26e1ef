// How ddpctl shows a JobStatus to people: the compact status view (status, watch on a TTY) and
// the one-line form (watch into a pipe or file). They render the status's decided fields (each
// rank's flag, behind_by and final, the job's exit_code: common/job_status.h, DecideStatus or
// FromJson) and never derive them.
//
// Thread safety: pure functions.
#ifndef SLURM_DDP_CLIENT_DDPCTL_STATUS_VIEW_H_
#define SLURM_DDP_CLIENT_DDPCTL_STATUS_VIEW_H_

#include <string>

#include "common/exit_codes.h"
#include "common/job_status.h"

namespace ddp {

struct ViewOptions {
  int max_ranks = 32;  // rank rows to show (flagged ranks first, then by rank); <= 0: all
  int events = 5;      // recent events to show
};

// The multi-line human view. A failed job names the failed rank and the reason first.
std::string FormatStatus(const JobStatus& status, const ViewOptions& options);
// One line: state, epoch/step, loss, throughput, ranks working/flagged.
std::string FormatLine(const JobStatus& status);
// "[#######.......]" for `fraction` in [0, 1].
std::string ProgressBar(double fraction, int width);
// "1h02m", "3m05s", "12s"; "-" when negative.
std::string FormatDuration(double seconds);

}  // namespace ddp

#endif  // SLURM_DDP_CLIENT_DDPCTL_STATUS_VIEW_H_
