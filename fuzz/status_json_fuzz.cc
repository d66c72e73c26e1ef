// Fuzzes the JSON view of a job status (common/job_status.h: ToJson, FromJson, JsonQuote), what
// `ddpctl status --json`, /api/status and the dashboard read. Invariants: ToJson is always one
// strictly valid JSON object (valid UTF-8, no NaN or Inf), whatever bytes the strings hold; a
// string that is valid UTF-8 comes back exactly; FromJson reads it, with every rank's flag,
// behind_by and final and the job's exit_code as the rules decide them (JudgeRank, JobExitCode);
// JsonQuote of any bytes is a valid JSON string.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/job_status.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/json_check.h"
#include "fuzz/status_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddp::fuzz::ByteReader in(data, size);
  const ddp::JobStatus status = ddp::fuzz::ReadJobStatus(in);
  const std::string json = ddp::ToJson(status);
  std::vector<std::string> strings;
  std::string error;
  FUZZ_CHECK(ddp::fuzz::CheckJson(json, &strings, &error), error + ": " + json);
  FUZZ_CHECK(json.front() == '{' && json.find('\n') == std::string::npos, json);
  // The first pair is "job_id": <job_id>.
  FUZZ_CHECK(strings.size() >= 2 && strings[0] == "job_id", json);
  if (ddp::fuzz::IsStrictUtf8(status.job_id)) FUZZ_CHECK(strings[1] == status.job_id, json);
  const absl::StatusOr<ddp::JobStatus> back = ddp::FromJson(json);
  FUZZ_CHECK(back.ok(), std::string(back.status().message()) + ": " + json);
  FUZZ_CHECK(back->ranks.size() == status.ranks.size(), json);
  const int64_t median = ddp::MedianStep(status);
  for (size_t i = 0; i < status.ranks.size(); ++i) {
    const ddp::RankVerdict v = ddp::JudgeRank(status.ranks[i], median);
    const ddp::RankStatus& r = back->ranks[i];
    FUZZ_CHECK(r.flag == v.flag && r.behind_by == v.behind_by && r.final == v.final, json);
  }
  FUZZ_CHECK(
      back->exit_code == (ddp::IsTerminal(status.state) ? ddp::JobExitCode(status.state) : -1),
      json);

  const std::string raw(in.Rest());
  const std::string quoted = ddp::JsonQuote(raw);
  strings.clear();
  FUZZ_CHECK(ddp::fuzz::CheckJson(quoted, &strings, &error), error + ": " + quoted);
  FUZZ_CHECK(strings.size() == 1, quoted);
  if (ddp::fuzz::IsStrictUtf8(raw)) FUZZ_CHECK(strings[0] == raw, quoted);
  return 0;
}
