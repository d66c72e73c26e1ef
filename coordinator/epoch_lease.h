// The coordinator's fencing (docs/architecture.md, "Standby coordinator"): a coordinator serves
// only while the dist_file names no newer epoch than its own. Every call checks Current() first
// (CallGate::SetFence). The check re-reads the dist_file when the last read is older than
// `period`, so a coordinator that was stopped (SIGSTOP, a suspended node) or cut off and comes
// back reads the file before it answers anything: once a standby has published epoch E+1, an
// epoch-E coordinator accepts no call later than `period` after that publish. A coordinator that
// takes over waits `period` after its own publish before it accepts a call, so no moment has two
// coordinators of the job accepting calls. A background thread keeps the read fresh (period / 2)
// so calls rarely pay for it.
//
// On finding a newer epoch of the same job (same job id, generation and nonce) the lease calls
// `on_fenced` once, saying which; the coordinator logs and exits there without touching the
// dist_file, the journal or the result file, which are the new coordinator's.
// The job may also have ended under the newer epoch while this coordinator did not run: that
// coordinator then wrote the job's result file (common/job_result.h, with its epoch) and removed
// the dist_file. So when the dist_file does not name this job's coordinator, the result file is
// read: a result of this job and generation written by a newer epoch fences too. Anything else
// that cannot be read (a file system hiccup, a result without an epoch) fences nothing.
//
// Thread safety: Current() from any thread; the constructor starts the thread, the destructor
// joins it.
#ifndef SLURM_DDP_COORDINATOR_EPOCH_LEASE_H_
#define SLURM_DDP_COORDINATOR_EPOCH_LEASE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/dist_file.h"

namespace ddp {

// What fenced a coordinator.
struct Supersession {
  int64_t epoch = 0;  // the newer coordinator's
  // For the log: "the dist_file names coordinator epoch 1 (node 1, 10.0.0.2:6000)", or "the job
  // ended under coordinator epoch 1 (SUCCEEDED, <dist_file>.result)".
  std::string why;
};

class EpochLease {
 public:
  struct Options {
    std::string dist_file;
    DistFileContents mine;  // this coordinator's published contents (job, nonce, epoch)
    absl::Duration period = absl::Milliseconds(250);
    // A coordinator that takes over accepts no call until ServeFrom() says when.
    bool wait_for_serve_from = false;
    std::function<void(const Supersession& by)> on_fenced;
  };
  explicit EpochLease(Options options);
  ~EpochLease();
  EpochLease(const EpochLease&) = delete;
  EpochLease& operator=(const EpochLease&) = delete;

  // OK while this coordinator may serve; UNAVAILABLE once fenced (or before serve_from).
  absl::Status Current();
  // Calls are accepted from `t` on (a coordinator that took over: its publish + period).
  void ServeFrom(absl::Time t) { serve_from_ns_.store(absl::ToUnixNanos(t)); }
  absl::Duration period() const { return options_.period; }
  // The wall time of the last call Current() let through (InfinitePast: none yet).
  absl::Time last_accepted() const;
  bool fenced() const { return fenced_.load(std::memory_order_acquire); }

 private:
  // Reads the dist_file (and, when it does not name this job's coordinator, the result file);
  // true while neither names a newer epoch of this job.
  bool Refresh() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The newer epoch that fences this coordinator, if the files name one.
  std::optional<Supersession> Superseded() const;
  void Loop();

  const Options options_;
  absl::Mutex mu_;                            // one reader of the file at a time
  std::atomic<int64_t> checked_ns_{0};        // steady clock of the last read that kept the lease
  std::atomic<int64_t> last_accepted_ns_{0};  // unix ns of the last call let through
  std::atomic<bool> fenced_{false};
  std::atomic<int64_t> serve_from_ns_;  // unix ns
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_EPOCH_LEASE_H_
