// The job's recent events ("+12.3s job RUNNING: ..."), bounded, for status; every event also
// goes to the log sink (through Completions, so the sink never runs under the job's lock).
//
// Thread safety: none; the owner (Job) calls it under its lock.
#ifndef SLURM_DDP_COORDINATOR_JOB_EVENT_LOG_H_
#define SLURM_DDP_COORDINATOR_JOB_EVENT_LOG_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/job/completions.h"

namespace ddp {

class EventLog {
 public:
  using Sink = std::function<void(const std::string&)>;
  using LinesSink = std::function<void(const std::vector<std::string>&)>;

  // `start`: the time events are stamped relative to; `sink` may be empty; `lines_sink` (may be
  // empty: `sink` gets the lines one by one) takes LogOnlyLines's lines in one call.
  EventLog(absl::Time start, size_t max_events, Sink sink, LinesSink lines_sink = nullptr);

  // Records "+<seconds since start>s <line>" (dropping the oldest beyond max_events) and sends
  // `line` to the sink.
  void Add(absl::Time now, const std::string& line, Completions* out);
  // Sends `line` to the sink only (e.g. the rank table, too long for the bounded list).
  void LogOnly(const std::string& line, Completions* out) const;
  // Sends `lines` to the sink only, together (e.g. the rank table, one line per rank).
  void LogOnlyLines(std::vector<std::string> lines, Completions* out) const;
  std::vector<std::string> Recent() const;

 private:
  const absl::Time start_;
  const size_t max_events_;
  const Sink sink_;
  const LinesSink lines_sink_;
  std::deque<std::string> events_;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_EVENT_LOG_H_
