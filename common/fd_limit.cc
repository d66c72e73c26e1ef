#include "common/fd_limit.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ddp {

absl::StatusOr<FdLimit> RaiseFdLimitToHard() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) {
    return absl::InternalError(absl::StrCat("getrlimit(RLIMIT_NOFILE): ", std::strerror(errno)));
  }
  FdLimit out;
  out.before = lim.rlim_cur;
  out.hard = lim.rlim_max;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) {
      return absl::InternalError(
          absl::StrCat("setrlimit(RLIMIT_NOFILE, ", lim.rlim_max, "): ", std::strerror(errno)));
    }
  }
  out.soft = lim.rlim_cur;
  return out;
}

uint64_t CoordinatorFdsWanted(int64_t world_size) {
  const uint64_t ranks = world_size > 0 ? static_cast<uint64_t>(world_size) : 0;
  return WithConnectStormMargin(ranks + (ranks + 7) / 8) + 64;
}

uint64_t WithConnectStormMargin(uint64_t connections) { return connections + connections / 8; }

std::string DescribeFdLimit(const FdLimit& limit, uint64_t wanted) {
  if (limit.soft < wanted) {
    return absl::StrCat(
        "warning: file descriptors: this process may hold ", limit.soft,
        " at most (RLIMIT_NOFILE's hard limit is ", limit.hard,
        "); with a connection per rank (a task per GPU) this job needs about ", wanted,
        " (a connection per rank and per node task, and an eighth more for the handshakes a "
        "connect storm leaves open), and gRPC stops accepting once it runs out: the ranks not "
        "yet in miss the registration deadline. Per-node traffic (ddp-trainer's default: one "
        "connection per node task) needs one per node. Raise the hard limit where the job "
        "starts (limits.conf, or the shell that submits it: Slurm propagates its limits)");
  }
  if (limit.soft != limit.before) {
    return absl::StrCat("file descriptors: soft limit raised from ", limit.before, " to ",
                        limit.soft, " (RLIMIT_NOFILE's hard limit)");
  }
  return "";
}

}  // namespace ddp
