#include "client/relay_link.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "proto/convert.h"

namespace ddp {

namespace pb = ::slurm_ddp::v1;

RelayLink::RelayLink(int fd) : fd_(fd), pid_(static_cast<int>(::getpid())), buf_(kMaxRelayPacket) {}

RelayLink::~RelayLink() { ::close(fd_); }

absl::Status RelayLink::RoundTrip(const pb::HeartbeatRequest& beat, bool now,
                                  absl::Duration timeout, pb::HeartbeatReply* reply) {
  absl::MutexLock lock(&mu_);
  const uint64_t seq = ++seq_;
  pb::RelayedHeartbeat out;
  out.set_pid(pid_);
  out.set_seq(seq);
  *out.mutable_beat() = beat;
  out.set_now(now);
  const std::string bytes = out.SerializeAsString();
  ssize_t sent;
  do {
    sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) {
    return absl::UnavailableError(
        absl::StrCat("Heartbeat: the node's heartbeat relay: ", std::strerror(errno)));
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("Heartbeat: no answer from the node's heartbeat relay within ",
                       absl::FormatDuration(timeout)));
    }
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // the deadline check above ends it
    const ssize_t n = ::recv(fd_, buf_.data(), buf_.size(), MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      return absl::UnavailableError(
          "Heartbeat: the node's ddp-trainer task closed the heartbeat relay");
    }
    pb::RelayedHeartbeatReply in;
    if (!in.ParseFromArray(buf_.data(), static_cast<int>(n))) continue;
    if (in.pid() != pid_ || in.seq() != seq) continue;  // a reply nobody waits for any more
    RETURN_IF_ERROR(FromProto(in.result()));
    *reply = in.result().reply();
    return absl::OkStatus();
  }
}

}  // namespace ddp
