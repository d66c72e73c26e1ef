// Delivers process signals to a callback on one watcher thread (signalfd), which is woken and
// joined on destruction: no detached thread, no async-signal-safety concerns in the callback.
//
// Start() blocks the signals in the calling thread, so it must run before any other thread of
// the process starts (threads inherit the mask); otherwise another thread could take a signal
// with its default action. The mask is left in place on destruction: a signal arriving after the
// watcher ends stays pending while the process finishes.
//
// Thread safety: Start and the destructor from the owning thread; the callback runs on the
// watcher thread, one signal at a time.
#ifndef SLURM_DDP_COORDINATOR_SIGNAL_WATCHER_H_
#define SLURM_DDP_COORDINATOR_SIGNAL_WATCHER_H_

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/file_util.h"

namespace ddp {

class SignalWatcher {
 public:
  static absl::StatusOr<std::unique_ptr<SignalWatcher>> Start(const std::vector<int>& signals,
                                                              std::function<void(int)> on_signal);
  ~SignalWatcher();  // wakes the thread, joins it, closes the descriptors
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  SignalWatcher(std::unique_ptr<ScopedFd> signal_fd, std::unique_ptr<ScopedFd> wake_fd,
                std::function<void(int)> on_signal);
  void Loop();

  const std::unique_ptr<ScopedFd> signal_fd_;
  const std::unique_ptr<ScopedFd> wake_fd_;  // an eventfd: written once to end the loop
  const std::function<void(int)> on_signal_;
  std::thread thread_;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_SIGNAL_WATCHER_H_
