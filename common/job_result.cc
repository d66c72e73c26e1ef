#include "common/job_result.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/file_util.h"

namespace ddp {

std::string JobResultPath(const std::string& dist_file) { return dist_file + ".result"; }

std::string FormatJobResult(const JobResult& r) {
  return absl::StrCat("job_id=", r.job_id, "\ngeneration=", r.generation, "\nstate=", r.state,
                      "\nexit_code=", r.exit_code, "\n");
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
  }
  if (r.state != "SUCCEEDED" && r.state != "STOPPED" && r.state != "FAILED") {
    return absl::InvalidArgumentError(absl::StrCat("result file ", path, " names no outcome"));
  }
  return r;
}

}  // namespace ddp
