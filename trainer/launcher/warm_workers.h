// The warm worker of a ddp-trainer task (--warm-workers 1): a worker process started ahead of need
// (LibTorch loaded, data open, no rank) that takes the slot of the next worker the task loses,
// over its warm link (warm_link.h). After an activation the next warm worker starts only once the
// activated one has committed its first step (it closes its end of the link then) or ended: its
// start-up, about 0.6 s of CPU, would otherwise run beside the recovery's first step.
//
//   WarmWorkers warm(supervisor, stop_grace, {start, may_respawn, log});
//   warm.Start();                                  // with the task's workers
//   if (auto id = warm.Activate(local_rank, relay_fd)) { the slot is *id's } else { start one }
//   loop: DoWork(min(..., warm.next_poll())); if (now >= warm.next_poll()) warm.Poll();
//   warm.Stop();                                   // at the end
//
// Thread safety: the launcher's loop thread only.
#ifndef SLURM_DDP_TRAINER_LAUNCHER_WARM_WORKERS_H_
#define SLURM_DDP_TRAINER_LAUNCHER_WARM_WORKERS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainer/launcher/child_process.h"
#include "trainer/launcher/supervisor.h"

namespace ddp {

class WarmWorkers {
 public:
  struct Hooks {
    // Starts a warm worker process that inherits `warm_fd`; its supervisor id.
    std::function<absl::StatusOr<int>(int warm_fd)> start;
    std::function<bool()> may_respawn;  // the failure policy still allows replacements
    std::function<void(const std::string&)> log;
  };
  // How often Poll looks whether the activated warm worker has committed its first step.
  static constexpr absl::Duration kSettlePoll = absl::Milliseconds(50);

  WarmWorkers(Supervisor& supervisor, absl::Duration stop_grace, Hooks hooks);
  ~WarmWorkers();  // closes the links it holds
  WarmWorkers(const WarmWorkers&) = delete;
  WarmWorkers& operator=(const WarmWorkers&) = delete;

  // Starts a warm worker; a failure is logged and leaves none (replacements start cold).
  void Start();
  // Hands `local_rank` and its relay socket (or -1) to the warm worker: its id, now the slot's;
  // nullopt when none is ready or it cannot take the slot (the caller starts a process).
  std::optional<int> Activate(int local_rank, int relay_fd);
  // When Poll is due (InfiniteFuture while no activated worker is settling).
  absl::Time next_poll() const { return next_poll_; }
  // Starts the next warm worker once the activated one has committed its first step or ended.
  void Poll();

  // The warm worker waiting for a slot.
  bool IsReady(int id) const { return ready_ && ready_->id == id; }
  // The ready warm worker ended before it was needed: replacements start cold from now on.
  void OnReadyExit(const ExitStatus& status);
  // Whether `id` was started as a warm worker (its spec is a warm worker's: a slot it held is
  // started again as a new child, not respawned).
  bool StartedWarm(int id) const;
  // Stops the ready warm worker and lets the settling one's link go (the task is ending).
  void Stop();

 private:
  struct Ready {
    int id;
    int task_end;
  };
  void EndSettling();

  Supervisor& supervisor_;
  const absl::Duration stop_grace_;
  const Hooks hooks_;
  std::optional<Ready> ready_;
  std::vector<int> started_;  // every child started warm
  // The warm worker last activated and the task's end of its link, until the link closes.
  int settling_ = -1;
  int settling_link_ = -1;
  absl::Time next_poll_ = absl::InfiniteFuture();
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_LAUNCHER_WARM_WORKERS_H_
