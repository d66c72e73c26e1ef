#include "coordinator/job/event_log.h"

#include <utility>

#include "absl/strings/str_format.h"

namespace ddp {

EventLog::EventLog(absl::Time start, size_t max_events, Sink sink, LinesSink lines_sink)
    : start_(start),
      max_events_(max_events),
      sink_(std::move(sink)),
      lines_sink_(std::move(lines_sink)) {}

void EventLog::Add(absl::Time now, const std::string& line, Completions* out) {
  events_.push_back(absl::StrFormat("+%.1fs %s", absl::ToDoubleSeconds(now - start_), line));
  while (events_.size() > max_events_) events_.pop_front();
  LogOnly(line, out);
}

void EventLog::LogOnly(const std::string& line, Completions* out) const {
  if (sink_) out->Add([sink = sink_, line] { sink(line); });
}

void EventLog::LogOnlyLines(std::vector<std::string> lines, Completions* out) const {
  if (lines_sink_) {
    out->Add([sink = lines_sink_, lines = std::move(lines)] { sink(lines); });
    return;
  }
  for (const std::string& line : lines) LogOnly(line, out);
}

std::vector<std::string> EventLog::Recent() const {
  return std::vector<std::string>(events_.begin(), events_.end());
}

}  // namespace ddp
