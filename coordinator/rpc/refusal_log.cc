#include "coordinator/rpc/refusal_log.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/utf8.h"

namespace ddp {
namespace {

constexpr size_t kMaxFieldBytes = 200;  // a reason or a peer, as logged

std::string Field(absl::string_view s) {
  return std::string(TruncateUtf8(ToValidUtf8(s), kMaxFieldBytes));
}

}  // namespace

RefusalLog::RefusalLog(const Clock* clock, absl::Duration interval, Sink sink)
    : clock_(clock), interval_(interval), sink_(std::move(sink)) {}

void RefusalLog::Record(absl::string_view what, absl::string_view peer) {
  std::string line;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    ++total_;
    if (pending_++ == 0) first_pending_ = now;
    std::string reason = Field(what);
    if (reasons_.size() >= kMaxReasons && reasons_.count(reason) == 0) reason = "other";
    ++reasons_[reason];
    std::string who = Field(peer);
    if (std::find(peers_.begin(), peers_.end(), who) == peers_.end()) {
      if (peers_.size() < kMaxPeers) {
        peers_.push_back(std::move(who));
      } else {
        ++other_peers_;
      }
    }
    line = TakeLineLocked(now);
  }
  if (!line.empty() && sink_) sink_(line);
}

void RefusalLog::Flush() {
  std::string line;
  {
    absl::MutexLock lock(&mu_);
    line = TakeLineLocked(clock_->Now());
  }
  if (!line.empty() && sink_) sink_(line);
}

std::string RefusalLog::TakeLineLocked(absl::Time now) {
  if (pending_ == 0 || now - last_line_ < interval_) return "";
  std::vector<std::pair<std::string, uint64_t>> by_count(reasons_.begin(), reasons_.end());
  std::stable_sort(by_count.begin(), by_count.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string line = absl::StrCat("refused ", pending_, " call(s)");
  if (pending_ > 1) {
    absl::StrAppend(&line,
                    absl::StrFormat(" in %.1fs", absl::ToDoubleSeconds(now - first_pending_)));
  }
  absl::StrAppend(&line, ": ",
                  absl::StrJoin(by_count, ", ", [](std::string* out, const auto& entry) {
                    absl::StrAppend(out, entry.second, " ", entry.first);
                  }));
  absl::StrAppend(&line, "; from ", absl::StrJoin(peers_, ", "));
  if (other_peers_ > 0) absl::StrAppend(&line, " (+", other_peers_, " from other peers)");
  last_line_ = now;
  ++lines_;
  pending_ = 0;
  reasons_.clear();
  peers_.clear();
  other_peers_ = 0;
  return line;
}

uint64_t RefusalLog::total() const {
  absl::MutexLock lock(&mu_);
  return total_;
}

uint64_t RefusalLog::lines() const {
  absl::MutexLock lock(&mu_);
  return lines_;
}

}  // namespace ddp
