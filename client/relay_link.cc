#include "client/relay_link.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "proto/convert.h"

namespace ddp {

namespace pb = ::slurm_ddp::v1;

namespace {

int64_t ToMillis(absl::Duration d) { return std::max<int64_t>(1, absl::ToInt64Milliseconds(d)); }

}  // namespace

RelayLink::RelayLink(int fd, std::function<bool()> job_ended)
    : fd_(fd),
      pid_(static_cast<int>(::getpid())),
      job_ended_(std::move(job_ended)),
      buf_(kMaxRelayPacket) {}

RelayLink::~RelayLink() { ::close(fd_); }

absl::Status RelayLink::Exchange(const char* method, pb::RelayedCall* call, absl::Duration timeout,
                                 pb::RelayedReply* reply) {
  uint64_t seq;
  {
    absl::MutexLock lock(&mu_);
    seq = ++seq_;
    waiting_.insert(seq);
  }
  call->set_pid(pid_);
  call->set_seq(seq);
  const std::string bytes = call->SerializeAsString();
  ssize_t sent;
  {
    absl::MutexLock lock(&send_mu_);
    do {
      sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
  }
  const int send_errno = errno;
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  if (sent < 0) {
    waiting_.erase(seq);
    return absl::UnavailableError(
        absl::StrCat(method, ": the node's relay: ", std::strerror(send_errno)));
  }
  while (true) {
    if (auto it = arrived_.find(seq); it != arrived_.end()) {
      *reply = std::move(it->second);
      arrived_.erase(it);
      waiting_.erase(seq);
      return absl::OkStatus();
    }
    if (closed_) {
      waiting_.erase(seq);
      return absl::UnavailableError(
          absl::StrCat(method, ": the node's ddp-trainer task closed its relay"));
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      waiting_.erase(seq);
      return absl::DeadlineExceededError(absl::StrCat(
          method, ": no answer from the node's relay within ", absl::FormatDuration(timeout)));
    }
    if (reading_) {
      cv_.WaitWithDeadline(&mu_, deadline);
      continue;
    }
    // This waiter reads one packet (or waits out its own deadline) without the lock; whatever
    // it reads is filed for its owner, and every waiter looks again.
    reading_ = true;
    mu_.Unlock();
    std::optional<pb::RelayedReply> got;
    bool closed = false;
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (ready > 0) {
      const ssize_t n = ::recv(fd_, buf_.data(), buf_.size(), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
        closed = true;
      } else if (n > 0) {
        got.emplace();
        if (!got->ParseFromArray(buf_.data(), static_cast<int>(n))) got.reset();
      }
    }
    mu_.Lock();
    reading_ = false;
    closed_ = closed_ || closed;
    if (got && got->pid() == pid_ && waiting_.count(got->seq()) > 0) {
      arrived_[got->seq()] = *std::move(got);
    }
    cv_.SignalAll();
  }
}

absl::Status RelayLink::RoundTrip(const pb::HeartbeatRequest& beat, bool now,
                                  absl::Duration timeout, pb::HeartbeatReply* reply) {
  pb::RelayedCall call;
  *call.mutable_beat() = beat;
  call.set_now(now);
  pb::RelayedReply in;
  RETURN_IF_ERROR(Exchange("Heartbeat", &call, timeout, &in));
  if (in.outcome_case() != pb::RelayedReply::kBeat) {
    return absl::InternalError("Heartbeat: the node's relay answered another call");
  }
  RETURN_IF_ERROR(FromProto(in.beat()));
  *reply = in.beat().reply();
  return absl::OkStatus();
}

bool RelayLink::closed() {
  absl::MutexLock lock(&mu_);
  return closed_;
}

absl::Status RelayLink::RetryUnavailable(
    const char* method, absl::Duration server_timeout, absl::Duration timeout,
    const std::function<absl::Status(absl::Duration, absl::Duration)>& once) {
  const absl::Duration slack = std::max(timeout - server_timeout, absl::ZeroDuration());
  const absl::Time deadline = absl::Now() + server_timeout;
  absl::Duration backoff = absl::Milliseconds(50);
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    const absl::Status st = once(std::max(left, absl::Milliseconds(1)), left + slack);
    if (!absl::IsUnavailable(st) || closed() || absl::Now() + backoff >= deadline ||
        (job_ended_ && job_ended_())) {
      return st;
    }
    absl::SleepFor(backoff);
    backoff = std::min(2 * backoff, kMaxRetryBackoff);
  }
}

absl::StatusOr<pb::RegisterReply> RelayLink::Join(const char* method, pb::RelayedCall* call,
                                                  absl::Duration server_timeout,
                                                  absl::Duration timeout) {
  pb::RegisterReply reply;
  const absl::Status st = RetryUnavailable(
      method, server_timeout, timeout, [&](absl::Duration server, absl::Duration wait) {
        call->set_timeout_ms(ToMillis(server));
        pb::RelayedReply in;
        RETURN_IF_ERROR(Exchange(method, call, wait, &in));
        if (in.outcome_case() != pb::RelayedReply::kJoin) {
          return absl::InternalError(
              absl::StrCat(method, ": the node's relay answered another call"));
        }
        RETURN_IF_ERROR(FromWire(in.join()));
        reply = std::move(*in.mutable_join()->mutable_reply());
        return absl::OkStatus();
      });
  if (!st.ok()) return st;
  return reply;
}

absl::StatusOr<pb::RegisterReply> RelayLink::Register(const pb::RegisterRequest& req,
                                                      absl::Duration server_timeout,
                                                      absl::Duration timeout) {
  pb::RelayedCall call;
  *call.mutable_register_worker() = req;
  return Join("Register", &call, server_timeout, timeout);
}

absl::StatusOr<pb::RegisterReply> RelayLink::Rejoin(const pb::RejoinRequest& req,
                                                    absl::Duration server_timeout,
                                                    absl::Duration timeout) {
  pb::RelayedCall call;
  *call.mutable_rejoin() = req;
  return Join("Rejoin", &call, server_timeout, timeout);
}

absl::StatusOr<pb::GetShardReply> RelayLink::GetShard(const pb::GetShardRequest& req,
                                                      absl::Duration server_timeout,
                                                      absl::Duration timeout) {
  pb::RelayedCall call;
  *call.mutable_get_shard() = req;
  pb::GetShardReply reply;
  const absl::Status st = RetryUnavailable(
      "GetShard", server_timeout, timeout, [&](absl::Duration server, absl::Duration wait) {
        call.set_timeout_ms(ToMillis(server));
        pb::RelayedReply in;
        RETURN_IF_ERROR(Exchange("GetShard", &call, wait, &in));
        if (in.outcome_case() != pb::RelayedReply::kShard) {
          return absl::InternalError("GetShard: the node's relay answered another call");
        }
        RETURN_IF_ERROR(FromWire(in.shard()));
        reply = std::move(*in.mutable_shard()->mutable_reply());
        return absl::OkStatus();
      });
  if (!st.ok()) return st;
  return reply;
}

absl::StatusOr<std::string> RelayLink::Unary(const char* method, const std::string& request,
                                             absl::Duration server_timeout,
                                             absl::Duration timeout) {
  pb::RelayedCall call;
  call.mutable_unary()->set_method(method);
  call.mutable_unary()->set_request(request);
  call.set_timeout_ms(ToMillis(server_timeout));
  pb::RelayedReply in;
  RETURN_IF_ERROR(Exchange(method, &call, timeout, &in));
  if (in.outcome_case() != pb::RelayedReply::kUnary) {
    return absl::InternalError(absl::StrCat(method, ": the node's relay answered another call"));
  }
  RETURN_IF_ERROR(FromWire(in.unary()));
  return std::move(*in.mutable_unary()->mutable_reply());
}

}  // namespace ddp
