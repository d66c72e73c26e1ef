// The coordinator's log: timestamped lines ("2024-05-01T12:00:00.123 ddp-coordinator: ...") to
// stderr and, when a file is given, appended to it.
//
// Thread safety: Log may be called from any thread; lines never interleave.
#ifndef SLURM_DDP_COORDINATOR_LINE_LOGGER_H_
#define SLURM_DDP_COORDINATOR_LINE_LOGGER_H_

#include <fstream>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace ddp {

class LineLogger {
 public:
  // `path` empty: stderr only. Fails when the file cannot be opened for appending.
  static absl::StatusOr<std::unique_ptr<LineLogger>> Open(const std::string& path);
  LineLogger(const LineLogger&) = delete;
  LineLogger& operator=(const LineLogger&) = delete;

  void Log(const std::string& line);

 private:
  LineLogger() = default;

  absl::Mutex mu_;
  std::ofstream file_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_LINE_LOGGER_H_
