// When task 0 starts its coordinator again (docs/operations.md, "When the coordinator dies"): a
// coordinator that dies while workers still run (a signal, or a non-zero exit) is restarted with
// --resume-from-journal, up to --coordinator-restarts times. Never after it exited 0 (it ended
// the job). A restarted coordinator that exits non-zero by itself (it refused its journal, or
// found nothing to resume) is not restarted again: the job then ends as it does when its
// coordinator is gone for good.
//
// Thread safety: a plain value, used by the launcher's one thread.
#ifndef SLURM_DDP_TRAINER_LAUNCHER_COORDINATOR_RESTARTS_H_
#define SLURM_DDP_TRAINER_LAUNCHER_COORDINATOR_RESTARTS_H_

#include <string>

#include "trainer/launcher/child_process.h"

namespace ddp {

class CoordinatorRestarts {
 public:
  // `coordinator_restarts`: --coordinator-restarts; 0 never restarts.
  explicit CoordinatorRestarts(int coordinator_restarts) : max_(coordinator_restarts) {}

  struct Decision {
    bool restart = false;
    std::string why;  // for the launcher's log: "restarting it (1 of 3)" or why not
  };
  // The coordinator's current run ended with `status` while workers still run.
  Decision OnExit(const ExitStatus& status);

  int used() const { return used_; }

 private:
  const int max_;
  int used_ = 0;
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_LAUNCHER_COORDINATOR_RESTARTS_H_
