// The coordinator's log: timestamped lines ("2024-05-01T12:00:00.123 ddp-coordinator: ...") to
// stderr and, when a file is given, appended to it.
//
// One message is one line: Log escapes control characters (EscapeControlCharacters), so that a
// string a client sent (a failure reason, a host name, a job id) can neither start a line of its
// own nor drive the terminal that shows the log. Nothing decides anything by reading this log:
// the job's outcome is read from `ddpctl status --json` or the result file (docs/operations.md).
//
// Thread safety: Log may be called from any thread; lines never interleave.
#ifndef SLURM_DDP_COORDINATOR_LINE_LOGGER_H_
#define SLURM_DDP_COORDINATOR_LINE_LOGGER_H_

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace ddp {

// `text` with every byte that could end or rewrite a line spelled out: \n \r \t as such, other
// C0 controls and DEL as \xHH, the C1 controls U+0080..U+009F (UTF-8 C2 80..C2 9F) as \u00HH,
// and the backslash itself as \\ (so an escape in the output always came from this function).
// Other bytes, UTF-8 included, pass unchanged.
std::string EscapeControlCharacters(absl::string_view text);

class LineLogger {
 public:
  // `path` empty: stderr only. Fails when the file cannot be opened for appending.
  static absl::StatusOr<std::unique_ptr<LineLogger>> Open(const std::string& path);
  LineLogger(const LineLogger&) = delete;
  LineLogger& operator=(const LineLogger&) = delete;

  // Writes `line`, escaped (EscapeControlCharacters), as one timestamped line.
  void Log(const std::string& line);
  // Writes each of `lines` as Log would, with one timestamp, in one write per destination (the
  // rank table of a generation: 16,384 lines at 16,384 ranks).
  void LogLines(const std::vector<std::string>& lines);

 private:
  LineLogger() = default;

  absl::Mutex mu_;
  std::ofstream file_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_LINE_LOGGER_H_
