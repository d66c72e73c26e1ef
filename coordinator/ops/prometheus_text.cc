#include "coordinator/ops/prometheus_text.h"

#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace ddp {

std::string PromValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // printf's %.9g (std::to_chars with a precision is specified as printf), without its cost.
  char buf[40];
  const std::to_chars_result r =
      std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general, 9);
  return std::string(buf, r.ptr);
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
