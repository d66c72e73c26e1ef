#include "coordinator/metrics.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ddp {
namespace {

const char* const kCodeNames[] = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

// Prometheus sample values: Go's float formatting accepts NaN, +Inf, -Inf.
std::string Value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return absl::StrFormat("%.9g", v);
}

// Label values escape backslash, double quote and newline.
std::string Label(absl::string_view v) {
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

void Gauge(std::string* out, const char* name, const char* help, double v) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " gauge\n", name, " ",
                  Value(v), "\n");
}

void Header(std::string* out, const char* name, const char* type, const char* help) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

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
  Header(out, "ddp_rpc_requests_total", "counter", "gRPC calls served, by method and status code");
  for (const auto& m : methods_) {
    for (int code = 0; code < kCodes; ++code) {
      const uint64_t n = m->by_code[static_cast<size_t>(code)].load(std::memory_order_relaxed);
      if (n == 0) continue;
      absl::StrAppend(out, "ddp_rpc_requests_total{method=\"", m->name, "\",code=\"",
                      kCodeNames[code], "\"} ", n, "\n");
    }
  }
  Header(out, "ddp_rpc_duration_seconds", "histogram",
         "gRPC call latency from arrival to status, by method");
  for (const auto& m : methods_) {
    uint64_t cumulative = 0;
    std::string lines;
    for (size_t b = 0; b <= kBuckets.size(); ++b) {
      cumulative += m->buckets[b].load(std::memory_order_relaxed);
      absl::StrAppend(&lines, "ddp_rpc_duration_seconds_bucket{method=\"", m->name, "\",le=\"",
                      b < kBuckets.size() ? Value(kBuckets[b]) : "+Inf", "\"} ", cumulative, "\n");
    }
    if (cumulative == 0) continue;
    absl::StrAppend(out, lines, "ddp_rpc_duration_seconds_sum{method=\"", m->name, "\"} ",
                    Value(static_cast<double>(m->sum_ns.load(std::memory_order_relaxed)) * 1e-9),
                    "\n", "ddp_rpc_duration_seconds_count{method=\"", m->name, "\"} ", cumulative,
                    "\n");
  }
  Header(out, "ddp_http_requests_total", "counter", "HTTP requests served, by path and code");
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

void RenderJobMetrics(const JobStatus& s, std::string* out) {
  Header(out, "ddp_job_info", "gauge", "Constant 1, labelled with the job's identity");
  absl::StrAppend(out, "ddp_job_info{job_id=\"", Label(s.job_id), "\",generation=\"", s.generation,
                  "\"} 1\n");
  Header(out, "ddp_job_state", "gauge", "1 for the job's current state, 0 for the others");
  for (JobState st : {JobState::kRegistering, JobState::kRunning, JobState::kStopping,
                      JobState::kSucceeded, JobState::kFailed}) {
    absl::StrAppend(out, "ddp_job_state{state=\"", JobStateName(st), "\"} ", s.state == st ? 1 : 0,
                    "\n");
  }
  int lost = 0;
  int failed = 0;
  std::vector<std::pair<std::string, int>> by_state;
  for (const RankStatus& r : s.ranks) {
    if (r.state == "lost") ++lost;
    if (r.state == "failed") ++failed;
    bool found = false;
    for (auto& [name, count] : by_state) {
      if (name == r.state) {
        ++count;
        found = true;
        break;
      }
    }
    if (!found) by_state.emplace_back(r.state, 1);
  }
  Gauge(out, "ddp_job_finished", "1 once the job reached a terminal state", s.finished ? 1 : 0);
  Gauge(out, "ddp_world_size", "Ranks the job expects", s.world_size);
  Gauge(out, "ddp_registered_ranks", "Workers registered so far", s.registered);
  Gauge(out, "ddp_lost_ranks", "Ranks lost (heartbeat timeout)", lost);
  Gauge(out, "ddp_failed_ranks", "Ranks that reported a failure", failed);
  Header(out, "ddp_ranks", "gauge", "Ranks by state");
  for (const auto& [name, count] : by_state) {
    absl::StrAppend(out, "ddp_ranks{state=\"", Label(name), "\"} ", count, "\n");
  }
  Gauge(out, "ddp_epoch", "Current epoch (highest over ranks)", static_cast<double>(s.epoch));
  Gauge(out, "ddp_epochs", "Epochs to train", static_cast<double>(s.epochs));
  Gauge(out, "ddp_step", "Global step of the slowest rank", static_cast<double>(s.step));
  Gauge(out, "ddp_steps_per_epoch", "Steps per epoch", static_cast<double>(s.steps_per_epoch));
  Gauge(out, "ddp_loss", "Mean recent training loss over ranks", s.loss);
  Gauge(out, "ddp_samples_per_second", "Training throughput summed over ranks",
        s.samples_per_second);
  Gauge(out, "ddp_eta_seconds", "Estimated seconds to the end (-1 unknown)", s.eta_seconds);
  Gauge(out, "ddp_uptime_seconds", "Seconds since the coordinator started", s.uptime_seconds);
  Gauge(out, "ddp_checkpoint_step", "Step of the last committed checkpoint (-1 none)",
        s.checkpoint_epoch >= 0 ? static_cast<double>(s.checkpoint_step) : -1.0);
  Header(out, "ddp_rank_step", "gauge", "Global step reported by each rank");
  for (const RankStatus& r : s.ranks) {
    if (r.rank < 0) continue;
    absl::StrAppend(out, "ddp_rank_step{rank=\"", r.rank, "\",host=\"", Label(r.host), "\"} ",
                    r.step, "\n");
  }
  Header(out, "ddp_rank_last_seen_seconds", "gauge", "Seconds since each rank's last heartbeat");
  for (const RankStatus& r : s.ranks) {
    if (r.rank < 0) continue;
    absl::StrAppend(out, "ddp_rank_last_seen_seconds{rank=\"", r.rank, "\",host=\"", Label(r.host),
                    "\"} ", Value(r.last_seen_seconds), "\n");
  }
}

}  // namespace ddp
