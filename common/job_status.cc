#include "common/job_status.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/utf8.h"

namespace ddp {
namespace {

// JSON has no NaN/Inf: those become null.
// printf's %.6g (std::to_chars with a precision is specified as printf), without its cost.
std::string Number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  const std::to_chars_result r =
      std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general, 6);
  return std::string(buf, r.ptr);
}

class ObjectWriter {
 public:
  // `continued`: the object was opened elsewhere and has members already (no '{').
  explicit ObjectWriter(std::string* out, bool continued = false) : out_(out), first_(!continued) {
    if (!continued) out_->push_back('{');
  }
  ~ObjectWriter() {
    if (!detached_) out_->push_back('}');
  }
  // The object is closed elsewhere (no '}').
  void Detach() { detached_ = true; }
  ObjectWriter(const ObjectWriter&) = delete;
  ObjectWriter& operator=(const ObjectWriter&) = delete;

  void Raw(absl::string_view key, absl::string_view json) {
    if (!first_) out_->push_back(',');
    first_ = false;
    absl::StrAppend(out_, JsonQuote(key), ":", json);
  }
  void Str(absl::string_view key, absl::string_view v) { Raw(key, JsonQuote(v)); }
  void Int(absl::string_view key, int64_t v) { Raw(key, absl::StrCat(v)); }
  void Dbl(absl::string_view key, double v) { Raw(key, Number(v)); }
  void Bool(absl::string_view key, bool v) { Raw(key, v ? "true" : "false"); }

 private:
  std::string* out_;
  bool first_ = true;
  bool detached_ = false;
};

}  // namespace

void RankJsonParts(const RankStatus& r, std::string* head, std::string* tail) {
  head->clear();
  tail->clear();
  {
    ObjectWriter w(head);
    w.Int("rank", r.rank);
    w.Str("host", r.host);
    w.Int("node_rank", r.node_rank);
    w.Int("local_rank", r.local_rank);
    w.Int("pid", r.pid);
    w.Str("state", RankStateName(r.state));
    w.Int("epoch", r.epoch);
    w.Int("step", r.step);
    w.Dbl("loss", r.loss);
    w.Dbl("samples_per_second", r.samples_per_second);
    w.Raw("last_seen_seconds", "");
    w.Detach();  // the object goes on in `tail`
  }
  {
    ObjectWriter w(tail, /*continued=*/true);
    w.Raw("phase", r.phase == StepPhase::kNone ? "null" : JsonQuote(StepPhaseName(r.phase)));
    w.Dbl("phase_seconds", r.phase_seconds);
  }
}

void AppendJsonNumber(double v, std::string* out) { out->append(Number(v)); }

namespace {

std::string RankJson(const RankStatus& r) {
  std::string head;
  std::string tail;
  RankJsonParts(r, &head, &tail);
  return absl::StrCat(head, Number(r.last_seen_seconds), tail);
}

// The failure's rank, or null when no single rank is to blame (or nothing failed).
std::string RankOrNull(const FailureCause& f) {
  return f.empty() || f.rank < 0 ? "null" : absl::StrCat(f.rank);
}

std::string FailureJson(const FailureCause& f) {
  if (f.empty()) return "null";
  std::string out;
  {
    ObjectWriter w(&out);
    w.Raw("rank", RankOrNull(f));
    w.Str("cause", FailureKindName(f.kind));
    w.Str("text", f.text);
  }
  return out;
}

std::string LostRanksJson(const std::vector<LostRank>& lost) {
  std::string out = "[";
  for (size_t i = 0; i < lost.size(); ++i) {
    if (i > 0) out.push_back(',');
    ObjectWriter w(&out);
    w.Raw("rank", RankOrNull(lost[i].cause));
    w.Str("cause", FailureKindName(lost[i].cause.kind));
    w.Str("text", lost[i].cause.text);
    w.Dbl("at_seconds", lost[i].at_seconds);
    w.Bool("replaced", lost[i].replaced);
  }
  out.push_back(']');
  return out;
}

std::string StallJson(const StallReport& st) {
  std::string peers;
  {
    ObjectWriter p(&peers);
    for (const PhaseCount& c : st.peers) p.Int(StepPhaseName(c.phase), c.ranks);
  }
  std::string out;
  {
    ObjectWriter w(&out);
    w.Int("rank", st.rank);
    w.Raw("phase", st.phase == StepPhase::kNone ? "null" : JsonQuote(StepPhaseName(st.phase)));
    w.Dbl("seconds", st.seconds);
    w.Dbl("budget_seconds", st.budget_seconds);
    w.Raw("peers", peers);
  }
  return out;
}

}  // namespace

const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kRegistering:
      return "REGISTERING";
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kRecovering:
      return "RECOVERING";
    case JobState::kStopping:
      return "STOPPING";
    case JobState::kStopped:
      return "STOPPED";
    case JobState::kSucceeded:
      return "SUCCEEDED";
    case JobState::kFailed:
      return "FAILED";
  }
  return "UNKNOWN";
}

const char* JobStateJsonName(JobState state) {
  return state == JobState::kStopped ? JobStateName(JobState::kStopping) : JobStateName(state);
}

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kStopped || state == JobState::kFailed;
}

const char* RankStateName(RankState state) {
  switch (state) {
    case RankState::kRegistered:
      return "registered";
    case RankState::kStarting:
      return "starting";
    case RankState::kTraining:
      return "training";
    case RankState::kEvaluating:
      return "evaluating";
    case RankState::kCheckpointing:
      return "checkpointing";
    case RankState::kFinished:
      return "finished";
    case RankState::kDone:
      return "done";
    case RankState::kStopped:
      return "stopped";
    case RankState::kFailed:
      return "failed";
    case RankState::kLost:
      return "lost";
    case RankState::kStalled:
      return "stalled";
  }
  return "unknown";
}

bool IsFinal(RankState state) {
  return state == RankState::kDone || state == RankState::kStopped || state == RankState::kFailed ||
         state == RankState::kLost;
}

const char* StepPhaseName(StepPhase phase) {
  switch (phase) {
    case StepPhase::kNone:
      return "none";
    case StepPhase::kData:
      return "data";
    case StepPhase::kForward:
      return "forward";
    case StepPhase::kBackward:
      return "backward";
    case StepPhase::kAllreduce:
      return "allreduce";
    case StepPhase::kOptimizer:
      return "optimizer";
    case StepPhase::kCheckpoint:
      return "checkpoint";
    case StepPhase::kEval:
      return "eval";
    case StepPhase::kRecovery:
      return "recovery";
  }
  return "unknown";
}

int64_t MedianStep(const JobStatus& s) {
  std::vector<int64_t> steps;
  steps.reserve(s.ranks.size());
  for (const RankStatus& r : s.ranks) {
    if (!IsFinal(r.state) && r.rank >= 0) steps.push_back(r.step);
  }
  if (steps.empty()) return 0;
  auto mid = steps.begin() + static_cast<std::ptrdiff_t>((steps.size() - 1) / 2);
  std::nth_element(steps.begin(), mid, steps.end());
  return *mid;
}

RankFlags FlagRank(const RankStatus& r, int64_t median_step) {
  RankFlags f;
  if (IsFinal(r.state) || r.rank < 0) return f;
  int64_t gap = 0;  // saturates: steps come from workers and may be anything
  if (__builtin_sub_overflow(median_step, r.step, &gap)) {
    gap = r.step < 0 ? INT64_MAX : INT64_MIN;
  }
  if (gap > std::max<int64_t>(2, median_step / 100)) f.behind_by = gap;
  f.silent = r.last_seen_seconds > 2 * kHeartbeatPeriodSeconds;
  return f;
}

std::string JsonQuote(absl::string_view raw) {
  // Most strings (hosts, states, phases) are printable ASCII with nothing to escape.
  bool plain = true;
  for (char c : raw) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7e || c == '"' || c == '\\') {
      plain = false;
      break;
    }
  }
  if (plain) return absl::StrCat("\"", raw, "\"");
  const std::string s = ToValidUtf8(raw);  // JSON text is UTF-8: never pass a bad byte through
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

std::string ToJson(const JobStatus& s) {
  std::string ranks = "[";
  for (size_t i = 0; i < s.ranks.size(); ++i) {
    if (i > 0) ranks.push_back(',');
    ranks += RankJson(s.ranks[i]);
  }
  ranks.push_back(']');
  std::string out;
  ToJson(s, ranks, &out);
  return out;
}

void ToJson(const JobStatus& s, absl::string_view ranks, std::string* out) {
  out->clear();
  out->reserve(ranks.size() + 4096 + 256 * s.events.size());  // one copy of the ranks, no regrowth
  {
    ObjectWriter w(out);
    w.Str("job_id", s.job_id);
    w.Str("state", JobStateJsonName(s.state));
    w.Bool("finished", s.finished);
    w.Int("generation", s.generation);
    w.Int("world_size", s.world_size);
    w.Int("registered", s.registered);
    w.Int("num_nodes", s.num_nodes);
    w.Int("epoch", s.epoch);
    w.Int("epochs", s.epochs);
    w.Int("step", s.step);
    w.Int("steps_per_epoch", s.steps_per_epoch);
    w.Dbl("loss", s.loss);
    w.Dbl("samples_per_second", s.samples_per_second);
    w.Raw("eta_seconds", s.eta_seconds < 0 ? "null" : Number(s.eta_seconds));
    w.Dbl("uptime_seconds", s.uptime_seconds);
    w.Raw("failed_rank", RankOrNull(s.failure));
    w.Str("failure_reason", s.failure.text);
    w.Raw("failure", FailureJson(s.failure));
    w.Str("stop_reason", s.stop_reason);
    std::string ckpt = "null";
    if (s.checkpoint_epoch >= 0) {
      ckpt.clear();
      ObjectWriter c(&ckpt);
      c.Int("epoch", s.checkpoint_epoch);
      c.Int("step", s.checkpoint_step);
      c.Str("path", s.checkpoint_path);
    }
    w.Raw("checkpoint", ckpt);
    w.Raw("ranks", ranks);
    std::string events = "[";
    for (size_t i = 0; i < s.events.size(); ++i) {
      if (i > 0) events.push_back(',');
      events += JsonQuote(s.events[i]);
    }
    events.push_back(']');
    w.Raw("events", events);
    w.Int("restarts", s.restarts);
    w.Int("max_restarts", s.max_restarts);
    w.Raw("last_recovery_seconds",
          s.last_recovery_seconds < 0 ? "null" : Number(s.last_recovery_seconds));
    w.Int("membership_generation", s.membership_generation);
    w.Raw("lost_ranks", LostRanksJson(s.lost_ranks));
    w.Int("spare_nodes", s.spare_nodes);
    if (s.stall.present()) w.Raw("stall", StallJson(s.stall));
  }
}

}  // namespace ddp
