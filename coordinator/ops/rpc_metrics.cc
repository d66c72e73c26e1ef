#include "coordinator/ops/rpc_metrics.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "coordinator/ops/prometheus_text.h"

namespace ddp {
namespace {

const char* const kCodeNames[] = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

}  // namespace

RpcMetrics::RpcMetrics(const std::vector<std::string>& methods) {
  for (const std::string& m : methods) {
    methods_.push_back(std::make_unique<Method>());
    methods_.back()->name = m;
  }
  methods_.push_back(std::make_unique<Method>());
  methods_.back()->name = "other";
}

int RpcMetrics::Index(absl::string_view method) const {
  const size_t slash = method.rfind('/');
  if (slash != absl::string_view::npos) method = method.substr(slash + 1);
  const int n = static_cast<int>(methods_.size()) - 1;
  for (int i = 0; i < n; ++i) {
    if (methods_[static_cast<size_t>(i)]->name == method) return i;
  }
  return n;
}

void RpcMetrics::Record(absl::string_view method, int code, absl::Duration latency) {
  Method& m = *methods_[static_cast<size_t>(Index(method))];
  if (code < 0 || code >= kCodes) code = 2;  // UNKNOWN
  m.by_code[static_cast<size_t>(code)].fetch_add(1, std::memory_order_relaxed);
  const double s = absl::ToDoubleSeconds(latency);
  size_t b = 0;
  while (b < kBuckets.size() && s > kBuckets[b]) ++b;
  m.buckets[b].fetch_add(1, std::memory_order_relaxed);
  m.sum_ns.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, absl::ToInt64Nanoseconds(latency))),
                     std::memory_order_relaxed);
}

void RpcMetrics::RecordHttp(absl::string_view path, int code) {
  size_t i = 0;
  while (i + 1 < kHttpPaths.size() && path != kHttpPaths[i]) ++i;
  HttpCounts& c = http_[i];
  if (code == 200) {
    c.ok.fetch_add(1, std::memory_order_relaxed);
  } else if (code == 401) {
    c.unauthorized.fetch_add(1, std::memory_order_relaxed);
  } else {
    c.other.fetch_add(1, std::memory_order_relaxed);
  }
}

uint64_t RpcMetrics::Count(absl::string_view method) const {
  const Method& m = *methods_[static_cast<size_t>(Index(method))];
  uint64_t n = 0;
  for (const auto& c : m.by_code) n += c.load(std::memory_order_relaxed);
  return n;
}

void RpcMetrics::AppendPrometheus(std::string* out) const {
  AppendPromHeader(out, "ddp_rpc_requests_total", "counter",
                   "gRPC calls served, by method and status code");
  for (const auto& m : methods_) {
    for (int code = 0; code < kCodes; ++code) {
      const uint64_t n = m->by_code[static_cast<size_t>(code)].load(std::memory_order_relaxed);
      if (n == 0) continue;
      absl::StrAppend(out, "ddp_rpc_requests_total{method=\"", m->name, "\",code=\"",
                      kCodeNames[code], "\"} ", n, "\n");
    }
  }
  AppendPromHeader(out, "ddp_rpc_duration_seconds", "histogram",
                   "gRPC call latency from arrival to status, by method");
  for (const auto& m : methods_) {
    uint64_t cumulative = 0;
    std::string lines;
    for (size_t b = 0; b <= kBuckets.size(); ++b) {
      cumulative += m->buckets[b].load(std::memory_order_relaxed);
      absl::StrAppend(&lines, "ddp_rpc_duration_seconds_bucket{method=\"", m->name, "\",le=\"",
                      b < kBuckets.size() ? PromValue(kBuckets[b]) : "+Inf", "\"} ", cumulative,
                      "\n");
    }
    if (cumulative == 0) continue;
    absl::StrAppend(
        out, lines, "ddp_rpc_duration_seconds_sum{method=\"", m->name, "\"} ",
        PromValue(static_cast<double>(m->sum_ns.load(std::memory_order_relaxed)) * 1e-9), "\n",
        "ddp_rpc_duration_seconds_count{method=\"", m->name, "\"} ", cumulative, "\n");
  }
  AppendPromHeader(out, "ddp_http_requests_total", "counter",
                   "HTTP requests served, by path and code");
  for (size_t i = 0; i < kHttpPaths.size(); ++i) {
    const HttpCounts& c = http_[i];
    absl::StrAppend(out, "ddp_http_requests_total{path=\"", kHttpPaths[i], "\",code=\"200\"} ",
                    c.ok.load(std::memory_order_relaxed), "\n");
    absl::StrAppend(out, "ddp_http_requests_total{path=\"", kHttpPaths[i], "\",code=\"401\"} ",
                    c.unauthorized.load(std::memory_order_relaxed), "\n");
    const uint64_t other = c.other.load(std::memory_order_relaxed);
    if (other > 0) {
      absl::StrAppend(out, "ddp_http_requests_total{path=\"", kHttpPaths[i], "\",code=\"other\"} ",
                      other, "\n");
    }
  }
}

}  // namespace ddp
