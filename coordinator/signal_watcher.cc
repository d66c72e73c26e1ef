#include "coordinator/signal_watcher.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ddp {

absl::StatusOr<std::unique_ptr<SignalWatcher>> SignalWatcher::Start(
    const std::vector<int>& signals, std::function<void(int)> on_signal) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  const int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr);
  if (rc != 0) {
    errno = rc;
    return ErrnoError("pthread_sigmask", "(signals)");
  }
  auto signal_fd = std::make_unique<ScopedFd>(::signalfd(-1, &set, SFD_CLOEXEC));
  if (signal_fd->get() < 0) return ErrnoError("signalfd", "(signals)");
  auto wake_fd = std::make_unique<ScopedFd>(::eventfd(0, EFD_CLOEXEC));
  if (wake_fd->get() < 0) return ErrnoError("eventfd", "(signal watcher)");
  return std::unique_ptr<SignalWatcher>(
      new SignalWatcher(std::move(signal_fd), std::move(wake_fd), std::move(on_signal)));
}

SignalWatcher::SignalWatcher(std::unique_ptr<ScopedFd> signal_fd, std::unique_ptr<ScopedFd> wake_fd,
                             std::function<void(int)> on_signal)
    : signal_fd_(std::move(signal_fd)),
      wake_fd_(std::move(wake_fd)),
      on_signal_(std::move(on_signal)) {
  thread_ = std::thread([this] { Loop(); });
}

SignalWatcher::~SignalWatcher() {
  const uint64_t one = 1;
  while (::write(wake_fd_->get(), &one, sizeof(one)) < 0 && errno == EINTR) {
  }
  if (thread_.joinable()) thread_.join();
}

void SignalWatcher::Loop() {
  for (;;) {
    pollfd fds[2] = {{signal_fd_->get(), POLLIN, 0}, {wake_fd_->get(), POLLIN, 0}};
    const int n = ::poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    signalfd_siginfo info;
    const ssize_t got = ::read(signal_fd_->get(), &info, sizeof(info));
    if (got != static_cast<ssize_t>(sizeof(info))) continue;
    on_signal_(static_cast<int>(info.ssi_signo));
  }
}

}  // namespace ddp
