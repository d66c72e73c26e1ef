#include "common/job_result.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/file_util.h"

namespace ddp {

std::string JobResultPath(const std::string& dist_file) { return dist_file + ".result"; }

std::string FormatJobResult(const JobResult& r) {
  std::string text = absl::StrCat("job_id=", r.job_id, "\ngeneration=", r.generation,
                                  "\nstate=", r.state, "\nexit_code=", r.exit_code, "\n");
  if (r.epoch >= 0) absl::StrAppend(&text, "epoch=", r.epoch, "\n");
  return text;
}

absl::StatusOr<JobResult> ReadJobResult(const std::string& path) {
  absl::StatusOr<std::string> text = ReadPrivateFile(path, "result file", 4096);
  if (!text.ok()) return text.status();
  JobResult r;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (absl::ConsumePrefix(&line, "job_id=")) r.job_id = std::string(line);
    if (absl::ConsumePrefix(&line, "generation=")) (void)absl::SimpleAtoi(line, &r.generation);
    if (absl::ConsumePrefix(&line, "state=")) r.state = std::string(line);
    if (absl::ConsumePrefix(&line, "exit_code=")) (void)absl::SimpleAtoi(line, &r.exit_code);
    if (absl::ConsumePrefix(&line, "epoch=") && !absl::SimpleAtoi(line, &r.epoch)) r.epoch = -1;
  }
  if (r.state != "SUCCEEDED" && r.state != "STOPPED" && r.state != "FAILED") {
    return absl::InvalidArgumentError(absl::StrCat("result file ", path, " names no outcome"));
  }
  return r;
}

std::optional<JobResult> ReadJobResultOf(const std::string& dist_file, const std::string& job_id,
                                         int64_t generation) {
  if (dist_file.empty()) return std::nullopt;
  absl::StatusOr<JobResult> r = ReadJobResult(JobResultPath(dist_file));
  if (!r.ok() || r->job_id != job_id || r->generation != generation) return std::nullopt;
  return *std::move(r);
}

}  // namespace ddp
