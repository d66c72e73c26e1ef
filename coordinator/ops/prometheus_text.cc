#include "coordinator/ops/prometheus_text.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ddp {

std::string PromValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return absl::StrFormat("%.9g", v);
}

std::string PromLabel(absl::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

void AppendPromHeader(std::string* out, const char* name, const char* type, const char* help) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

void AppendPromGauge(std::string* out, const char* name, const char* help, double v) {
  AppendPromHeader(out, name, "gauge", help);
  absl::StrAppend(out, name, " ", PromValue(v), "\n");
}

}  // namespace ddp
