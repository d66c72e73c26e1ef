#include "bench/loadgen/agent_line.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace ddp::bench {

ReplyFields& ReplyFields::Add(const std::string& key, int64_t value) {
  fields_.emplace_back(key, absl::StrCat(value));
  return *this;
}

ReplyFields& ReplyFields::Add(const std::string& key, double value) {
  fields_.emplace_back(key, absl::StrFormat("%.6g", value));
  return *this;
}

ReplyFields& ReplyFields::Add(const std::string& key, const std::string& value) {
  fields_.emplace_back(key,
                       value.empty() ? "-" : absl::StrReplaceAll(value, {{" ", "_"}, {"\n", "_"}}));
  return *this;
}

ReplyFields& ReplyFields::Add(const std::string& key, const Quantiles& q) {
  Add(key + "_n", static_cast<int64_t>(q.count));
  Add(key + "_p50_ms", q.p50);
  Add(key + "_p99_ms", q.p99);
  Add(key + "_max_ms", q.max);
  return *this;
}

std::string ReplyFields::Format() const {
  std::string out = "ok";
  for (const auto& [k, v] : fields_) absl::StrAppend(&out, " ", k, "=", v);
  return out;
}

std::string FormatError(absl::string_view message) {
  return absl::StrCat("error ", absl::StrReplaceAll(message, {{"\n", " "}}));
}

std::string PhaseReply(const PhaseReport& report) {
  if (report.failed > 0) {
    return FormatError(
        absl::StrCat(report.failed, " ranks failed; the first: ", report.first_error));
  }
  ReplyFields fields;
  fields.Add("done_ns", report.done_ns);
  if (report.ranked_ns > 0) fields.Add("ranked_ns", report.ranked_ns);
  return fields.Add("failed", static_cast<int64_t>(report.failed))
      .Add("lat", report.latency)
      .Format();
}

absl::StatusOr<AgentReply> AgentReply::Parse(absl::string_view line) {
  line = absl::StripTrailingAsciiWhitespace(line);
  if (absl::ConsumePrefix(&line, "error")) {
    return absl::InternalError(absl::StripLeadingAsciiWhitespace(line));
  }
  if (!absl::ConsumePrefix(&line, "ok") || (!line.empty() && line[0] != ' ')) {
    return absl::InvalidArgumentError(absl::StrCat("not an agent reply: '", line, "'"));
  }
  AgentReply reply;
  for (absl::string_view field : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    const size_t eq = field.find('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat("bad field '", field, "' in an agent reply"));
    }
    reply.fields_[std::string(field.substr(0, eq))] = std::string(field.substr(eq + 1));
  }
  return reply;
}

absl::StatusOr<std::string> AgentReply::String(absl::string_view key) const {
  auto it = fields_.find(std::string(key));
  if (it == fields_.end()) {
    return absl::NotFoundError(absl::StrCat("agent reply has no field ", key));
  }
  return it->second;
}

absl::StatusOr<int64_t> AgentReply::Int(absl::string_view key) const {
  ASSIGN_OR_RETURN(const std::string text, String(key));
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("field ", key, "=", text, " is not an integer"));
  }
  return v;
}

absl::StatusOr<double> AgentReply::Double(absl::string_view key) const {
  ASSIGN_OR_RETURN(const std::string text, String(key));
  double v = 0;
  if (!absl::SimpleAtod(text, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("field ", key, "=", text, " is not a number"));
  }
  return v;
}

absl::StatusOr<Quantiles> AgentReply::Summary(absl::string_view key) const {
  Quantiles q;
  const std::string k(key);
  ASSIGN_OR_RETURN(const int64_t n, Int(k + "_n"));
  q.count = static_cast<size_t>(n);
  ASSIGN_OR_RETURN(q.p50, Double(k + "_p50_ms"));
  ASSIGN_OR_RETURN(q.p99, Double(k + "_p99_ms"));
  ASSIGN_OR_RETURN(q.max, Double(k + "_max_ms"));
  return q;
}

}  // namespace ddp::bench
