#include "trainer/worker/test_hold.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ddp {
namespace {

constexpr std::pair<const char*, TestHold::Point> kPoints[] = {
    {"step", TestHold::Point::kStep},           {"checkpoint", TestHold::Point::kCheckpoint},
    {"eval", TestHold::Point::kEval},           {"rejoin", TestHold::Point::kRejoin},
    {"connect", TestHold::Point::kConnect},     {"published", TestHold::Point::kPublished},
    {"sync", TestHold::Point::kSync},           {"data", TestHold::Point::kData},
    {"forward", TestHold::Point::kForward},     {"backward", TestHold::Point::kBackward},
    {"allreduce", TestHold::Point::kAllreduce}, {"optimizer", TestHold::Point::kOptimizer},
};

const char* PointName(TestHold::Point point) {
  for (const auto& [name, p] : kPoints) {
    if (p == point) return name;
  }
  return "?";
}

}  // namespace

absl::StatusOr<TestHold> TestHold::FromEnv(const EnvMap& env) {
  TestHold out;
  auto it = env.find("DDP_TEST_HOLD");
  if (it == env.end() || it->second.empty()) return out;
  for (absl::string_view entry : absl::StrSplit(it->second, ',')) {
    const std::vector<std::string> parts = absl::StrSplit(entry, absl::MaxSplits(':', 3));
    const auto bad = [&](const char* what) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DDP_TEST_HOLD entry '", entry, "': ", what,
          " (expected <point>:<rank>:<step>:<marker file>, point one of step, checkpoint, "
          "eval, rejoin, connect, published, sync, data, forward, backward, allreduce, "
          "optimizer)"));
    };
    if (parts.size() != 4 || parts[3].empty()) return bad("four fields needed");
    Hold hold{Point::kStep, 0, 0, parts[3]};
    bool known = false;
    for (const auto& [name, p] : kPoints) {
      if (parts[0] == name) {
        hold.point = p;
        known = true;
      }
    }
    if (!known) return bad("unknown point");
    if (!absl::SimpleAtoi(parts[1], &hold.rank) || hold.rank < 0) return bad("bad rank");
    if (!absl::SimpleAtoi(parts[2], &hold.step) || hold.step < 0) return bad("bad step");
    out.holds_.push_back(std::move(hold));
  }
  return out;
}

std::optional<TestHold::Point> TestHold::PointOfPhase(StepPhase phase) {
  switch (phase) {
    case StepPhase::kData:
      return Point::kData;
    case StepPhase::kForward:
      return Point::kForward;
    case StepPhase::kBackward:
      return Point::kBackward;
    case StepPhase::kAllreduce:
      return Point::kAllreduce;
    case StepPhase::kOptimizer:
      return Point::kOptimizer;
    default:
      return std::nullopt;
  }
}

bool TestHold::At(Point point, int rank, int64_t step) const {
  for (const Hold& h : holds_) {
    if (h.point != point || h.rank != rank || h.step != step) continue;
    const int fd = open(h.marker.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) continue;  // held before (or cannot tell): go on
    // The marker names the held process, for the test that kills it.
    const std::string pid = std::to_string(getpid());
    const bool written = write(fd, pid.data(), pid.size()) == static_cast<ssize_t>(pid.size());
    close(fd);
    if (!written)
      std::fprintf(stderr, "[rank %d] test hold: cannot write %s\n", rank, h.marker.c_str());
    std::fprintf(stderr, "[rank %d] test hold: stopped at %s, step %ld (pid %d)\n", rank,
                 PointName(point), static_cast<long>(step), static_cast<int>(getpid()));
    std::fflush(stderr);
    raise(SIGSTOP);
    return true;
  }
  return false;
}

}  // namespace ddp
