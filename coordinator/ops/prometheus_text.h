// The Prometheus text exposition format's small pieces, shared by the coordinator's metrics:
// sample values, label escaping, and the HELP/TYPE header of a metric family.
//
// Thread safety: pure functions.
#ifndef SLURM_DDP_COORDINATOR_OPS_PROMETHEUS_TEXT_H_
#define SLURM_DDP_COORDINATOR_OPS_PROMETHEUS_TEXT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace ddp {

// A sample value: "%.9g", or NaN, +Inf, -Inf (Go's float parsing accepts them).
std::string PromValue(double v);
// A label value with backslash, double quote and newline escaped.
std::string PromLabel(absl::string_view v);
// "# HELP name help\n# TYPE name type\n"
void AppendPromHeader(std::string* out, const char* name, const char* type, const char* help);
// A one-sample gauge family.
void AppendPromGauge(std::string* out, const char* name, const char* help, double v);

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_OPS_PROMETHEUS_TEXT_H_
