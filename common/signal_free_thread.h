// A background thread that never takes a process signal. A thread inherits its creator's signal
// mask, and a process signal goes to any thread that does not block it; the binaries handle
// theirs on one thread each (the coordinator's signal watcher, the launcher's sigtimedwait), so
// every helper thread (the journal's writers, the epoch lease, a channel's follow watcher, the
// heartbeat relay and the node calls it starts) blocks them all from its first instruction.
//
// Thread safety: call from any thread; the caller's own mask is left as it was.
#ifndef SLURM_DDP_COMMON_SIGNAL_FREE_THREAD_H_
#define SLURM_DDP_COMMON_SIGNAL_FREE_THREAD_H_

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace ddp {

template <typename Fn>
std::thread SignalFreeThread(Fn&& fn) {
  sigset_t all;
  sigset_t before;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &before);
  std::thread thread(std::forward<Fn>(fn));
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  return thread;
}

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_SIGNAL_FREE_THREAD_H_
