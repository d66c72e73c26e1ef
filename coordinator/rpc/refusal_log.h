// Logs refused calls (a wrong token, a role that may not call the method, a full server) at most
// once per interval, with counts: a flood of bad calls costs one log line a second, never one
// per call. The first refusal after a quiet interval is logged at once; later ones are counted
// and summarized when the interval has passed (by the next Record or by Flush, which the server's
// ticker calls):
//   refused 64 call(s) in 1.0s: 60 StoreCheck: missing authorization token, 4 Stop: ...;
//   from ipv4:10.0.0.7:41234, ipv4:10.0.0.7:41236, ipv4:10.0.0.9:5512 (+61 from other peers)
// Memory is bounded: at most kMaxReasons distinct reasons (the rest count as "other") and
// kMaxPeers example peers per line.
//
// Thread safety: every method is thread-safe; the sink runs without the lock held.
#ifndef SLURM_DDP_COORDINATOR_RPC_REFUSAL_LOG_H_
#define SLURM_DDP_COORDINATOR_RPC_REFUSAL_LOG_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/clock.h"

namespace ddp {

class RefusalLog {
 public:
  using Sink = std::function<void(const std::string&)>;
  static constexpr size_t kMaxReasons = 16;
  static constexpr size_t kMaxPeers = 3;

  // `clock` must outlive the log; `sink` may be empty (counting only).
  RefusalLog(const Clock* clock, absl::Duration interval, Sink sink);
  RefusalLog(const RefusalLog&) = delete;
  RefusalLog& operator=(const RefusalLog&) = delete;

  // Counts one refusal: `what` says which call and why ("StoreCheck: missing authorization
  // token"), `peer` who made it.
  void Record(absl::string_view what, absl::string_view peer);
  // Logs the pending summary when the interval since the last line has passed.
  void Flush();

  uint64_t total() const;  // refusals recorded so far
  uint64_t lines() const;  // lines written so far

 private:
  // The summary line, resetting the pending counts; empty when nothing is pending or the last
  // line is more recent than the interval.
  std::string TakeLineLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock* const clock_;
  const absl::Duration interval_;
  const Sink sink_;
  mutable absl::Mutex mu_;
  absl::Time last_line_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time first_pending_ ABSL_GUARDED_BY(mu_);
  uint64_t pending_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, uint64_t> reasons_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> peers_ ABSL_GUARDED_BY(mu_);
  uint64_t other_peers_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t total_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t lines_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_RPC_REFUSAL_LOG_H_
