#include "trainer/launcher/warm_link.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace ddp {
namespace {

constexpr absl::string_view kMagic = "ddp-warm v1 ";

}  // namespace

absl::StatusOr<WarmLinkEnds> MakeWarmLink() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::InternalError(
        absl::StrCat("warm worker link: socketpair: ", std::strerror(errno)));
  }
  return WarmLinkEnds{fds[0], fds[1]};
}

absl::Status SendWarmActivation(int task_end, int local_rank, int relay_fd) {
  const std::string text = absl::StrCat(kMagic, local_rank);
  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (relay_fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &relay_fd, sizeof(int));
  }
  ssize_t n;
  do {
    n = ::sendmsg(task_end, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(text.size())) {
    return absl::UnavailableError(
        absl::StrCat("warm worker link: send: ", n < 0 ? std::strerror(errno) : "short write"));
  }
  return absl::OkStatus();
}

absl::StatusOr<WarmActivation> AwaitWarmActivation(int worker_end,
                                                   const std::function<bool()>& stop,
                                                   absl::Duration poll) {
  const int poll_ms = static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(poll)));
  while (true) {
    if (stop()) return absl::CancelledError("stopped while warm");
    pollfd p{worker_end, POLLIN, 0};
    const int ready = ::poll(&p, 1, poll_ms);
    if (ready < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("warm worker link: poll: ", std::strerror(errno)));
    }
    if (ready <= 0) continue;
    char buf[64];
    iovec iov{buf, sizeof(buf)};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = ::recvmsg(worker_end, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InternalError(absl::StrCat("warm worker link: recv: ", std::strerror(errno)));
    }
    if (n == 0) return absl::CancelledError("the task closed the warm worker link");
    WarmActivation out;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
          c->cmsg_len == CMSG_LEN(sizeof(int))) {
        std::memcpy(&out.relay_fd, CMSG_DATA(c), sizeof(int));
      }
    }
    absl::string_view text(buf, static_cast<size_t>(n));
    if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || !absl::ConsumePrefix(&text, kMagic) ||
        !absl::SimpleAtoi(text, &out.local_rank) || out.local_rank < 0) {
      if (out.relay_fd >= 0) ::close(out.relay_fd);
      return absl::InvalidArgumentError(
          absl::StrCat("warm worker link: malformed activation of ", n, " bytes"));
    }
    return out;
  }
}

bool WarmLinkClosed(int task_end) {
  pollfd p{task_end, POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&p, 1, 0);
  } while (ready < 0 && errno == EINTR);
  // The worker sends nothing after its activation: any event is the link's end (a broken
  // descriptor counts as closed too).
  return ready != 0;
}

}  // namespace ddp
