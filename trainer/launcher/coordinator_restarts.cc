#include "trainer/launcher/coordinator_restarts.h"

#include "absl/strings/str_cat.h"

namespace ddp {

CoordinatorRestarts::Decision CoordinatorRestarts::OnExit(const ExitStatus& status) {
  if (!status.signaled() && status.code() == 0) return {false, "it ended the job"};
  if (used_ > 0 && !status.signaled()) {
    return {false, "the restarted coordinator ended by itself; not restarting it again"};
  }
  if (max_ == 0) return {false, "not restarting it (--coordinator-restarts 0)"};
  if (used_ >= max_) {
    return {false, absl::StrCat("not restarting it: --coordinator-restarts ", max_, " used")};
  }
  ++used_;
  return {true, absl::StrCat("restarting it from its journal (", used_, " of ", max_, ")")};
}

}  // namespace ddp
