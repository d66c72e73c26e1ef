#include "coordinator/line_logger.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ddp {

absl::StatusOr<std::unique_ptr<LineLogger>> LineLogger::Open(const std::string& path) {
  std::unique_ptr<LineLogger> logger(new LineLogger());
  if (!path.empty()) {
    absl::MutexLock lock(&logger->mu_);
    logger->file_.open(path, std::ios::app);
    if (!logger->file_.is_open()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot open --log-file ", path));
    }
  }
  return logger;
}

void LineLogger::Log(const std::string& line) {
  const std::string out =
      absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%E3S", absl::Now(), absl::LocalTimeZone()),
                   " ddp-coordinator: ", line, "\n");
  absl::MutexLock lock(&mu_);
  std::cerr << out << std::flush;
  if (file_.is_open()) file_ << out << std::flush;
}

}  // namespace ddp
