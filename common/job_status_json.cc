// The status JSON (common/job_status.h: ToJson, FromJson), written and read with nlohmann/json
// (Debian's nlohmann-json3-dev, header-only; ordered objects keep the contract's field order).
// Strings are made valid UTF-8 (common/utf8.h) before they enter a JSON value, so a dump never
// meets a bad byte; reading never throws (parse without exceptions, every access type-checked).
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/job_status.h"
#include "common/utf8.h"
#include "nlohmann/json.hpp"

namespace ddp {
namespace {

using Json = nlohmann::ordered_json;

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Json Str(absl::string_view s) {
  return IsValidUtf8(s) ? Json(std::string(s)) : Json(ToValidUtf8(s));
}

// JSON has no NaN/Inf: those become null. Six significant digits, as the contract always had.
Json Num(double v) {
  if (!std::isfinite(v)) return nullptr;
  char buf[32];
  const std::to_chars_result r =
      std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general, 6);
  double rounded = 0;
  std::from_chars(buf, r.ptr, rounded);
  if (rounded == std::trunc(rounded) && std::fabs(rounded) < 1e15) {
    return static_cast<int64_t>(rounded);  // "100", not "100.0"
  }
  return rounded;
}

Json NumOrNull(double v, bool known) { return known ? Num(v) : Json(nullptr); }

Json Phase(StepPhase p) { return p == StepPhase::kNone ? Json(nullptr) : Json(StepPhaseName(p)); }

// The failure's rank, or null when no single rank is to blame (or nothing failed).
Json RankOrNull(const FailureCause& f) {
  return f.empty() || f.rank < 0 ? Json(nullptr) : Json(f.rank);
}

Json FailureObject(const FailureCause& f) {
  if (f.empty()) return nullptr;
  Json o = Json::object();
  o["rank"] = RankOrNull(f);
  o["cause"] = FailureKindName(f.kind);
  o["text"] = Str(f.text);
  return o;
}

Json LostRanksArray(const std::vector<LostRank>& lost) {
  Json a = Json::array();
  for (const LostRank& l : lost) {
    Json o = Json::object();
    o["rank"] = RankOrNull(l.cause);
    o["cause"] = FailureKindName(l.cause.kind);
    o["text"] = Str(l.cause.text);
    o["at_seconds"] = Num(l.at_seconds);
    o["replaced"] = l.replaced;
    a.push_back(std::move(o));
  }
  return a;
}

Json StallObject(const StallReport& st) {
  Json peers = Json::object();
  for (const PhaseCount& c : st.peers) peers[StepPhaseName(c.phase)] = c.ranks;
  Json o = Json::object();
  o["rank"] = st.rank;
  o["phase"] = Phase(st.phase);
  o["seconds"] = Num(st.seconds);
  o["budget_seconds"] = Num(st.budget_seconds);
  o["peers"] = std::move(peers);
  return o;
}

Json ScoreObject(const RankScore& sc) {
  if (!sc.measured) return nullptr;
  Json o = Json::object();
  o["relative"] = Num(sc.relative);
  o["individual"] = Num(sc.individual);
  for (StepSection k : kAllStepSections)
    o[StepSectionName(k)] = Num(sc.sections[static_cast<int>(k)]);
  o["straggler"] = sc.straggler;
  return o;
}

Json StragglersArray(const std::vector<StragglerReport>& stragglers) {
  Json a = Json::array();
  for (const StragglerReport& st : stragglers) {
    Json o = Json::object();
    o["rank"] = st.rank;
    o["host"] = Str(st.host);
    o["node"] = st.node_rank;
    o["section"] = StepSectionName(st.section);
    o["relative_score"] = Num(st.relative_score);
    o["slower"] = Num(st.slower);
    o["since"] = Num(st.since_seconds);
    o["seconds"] = Num(st.seconds);
    a.push_back(std::move(o));
  }
  return a;
}

Json BreakdownObject(const StepBreakdown& b) {
  if (!b.measured()) return nullptr;
  Json o = Json::object();
  o["rank"] = b.rank;
  o["step_seconds"] = Num(b.step_seconds());
  for (StepSection k : kAllStepSections)
    o[StepSectionName(k)] = Num(b.seconds[static_cast<int>(k)]);
  Json spread = Json::object();
  for (StepSection k : kAllStepSections)
    spread[StepSectionName(k)] = Num(b.spread[static_cast<int>(k)]);
  o["spread"] = std::move(spread);
  return o;
}

Json TimeUseObject(const TimeUse& t) {
  Json o = Json::object();
  o["wall"] = Num(t.wall);
  o["training"] = Num(t.training);
  o["startup"] = Num(t.startup);
  o["recoveries"] = Num(t.recovery);
  o["stalls"] = Num(t.stall);
  o["checkpoints"] = Num(t.checkpoint);
  o["evaluation"] = Num(t.evaluation);
  o["other"] = Num(t.other);
  return o;
}

// `dumped` with the null value of `key` (the first occurrence: keys are ours, and a string value
// cannot hold an unescaped quote) replaced by `raw`.
void SpliceAt(const std::string& dumped, absl::string_view key, absl::string_view raw,
              std::string* out) {
  const std::string needle = absl::StrCat("\"", key, "\":null");
  const size_t at = dumped.find(needle);
  const size_t value = at + needle.size() - 4;
  out->clear();
  out->append(dumped, 0, value);
  out->append(raw.data(), raw.size());
  out->append(dumped, value + 4, std::string::npos);
}

}  // namespace

std::string JsonQuote(absl::string_view s) { return Dump(Str(s)); }

void AppendJsonNumber(double v, std::string* out) { out->append(Dump(Num(v))); }

void RankJsonParts(const RankStatus& r, const RankVerdict& v, std::string* head,
                   std::string* tail) {
  // One object per thread, reused: its keys are allocated once and every call sets all of them
  // (a snapshot of 16,384 ranks renders thousands of rows per build).
  static thread_local Json o = Json::object();
  o["rank"] = r.rank;
  o["host"] = Str(r.host);
  o["node_rank"] = r.node_rank;
  o["local_rank"] = r.local_rank;
  o["pid"] = r.pid;
  o["state"] = RankStateName(r.state);
  o["epoch"] = r.epoch;
  o["step"] = r.step;
  o["loss"] = Num(r.loss);
  o["samples_per_second"] = Num(r.samples_per_second);
  o["last_seen_seconds"] = nullptr;  // the number goes between head and tail
  o["phase"] = Phase(r.phase);
  o["phase_seconds"] = Num(r.phase_seconds);
  o["flag"] = v.flag == RankFlag::kNone ? Json(nullptr) : Json(RankFlagName(v.flag));
  o["behind_by"] = v.behind_by;
  o["final"] = v.final;
  o["score"] = ScoreObject(r.score);
  const std::string dumped = Dump(o);
  // The last occurrence: only fixed names (phase, flag, score) follow it.
  constexpr absl::string_view kSeen = "\"last_seen_seconds\":";
  const size_t at = dumped.rfind(absl::StrCat(kSeen, "null")) + kSeen.size();
  head->assign(dumped, 0, at);
  tail->assign(dumped, at + 4, std::string::npos);
}

std::string ToJson(const JobStatus& s) {
  const int64_t median = MedianStep(s);
  std::string ranks = "[";
  std::string head;
  std::string tail;
  for (size_t i = 0; i < s.ranks.size(); ++i) {
    if (i > 0) ranks.push_back(',');
    RankJsonParts(s.ranks[i], JudgeRank(s.ranks[i], median), &head, &tail);
    absl::StrAppend(&ranks, head);
    AppendJsonNumber(s.ranks[i].last_seen_seconds, &ranks);
    absl::StrAppend(&ranks, tail);
  }
  ranks.push_back(']');
  std::string out;
  ToJson(s, ranks, &out);
  return out;
}

void ToJson(const JobStatus& s, absl::string_view ranks, std::string* out) {
  Json o = Json::object();
  o["job_id"] = Str(s.job_id);
  o["state"] = JobStateJsonName(s.state);
  o["finished"] = s.finished;
  o["generation"] = s.generation;
  o["world_size"] = s.world_size;
  o["registered"] = s.registered;
  o["num_nodes"] = s.num_nodes;
  o["epoch"] = s.epoch;
  o["epochs"] = s.epochs;
  o["step"] = s.step;
  o["steps_per_epoch"] = s.steps_per_epoch;
  o["loss"] = Num(s.loss);
  o["samples_per_second"] = Num(s.samples_per_second);
  o["eta_seconds"] = NumOrNull(s.eta_seconds, s.eta_seconds >= 0);
  o["uptime_seconds"] = Num(s.uptime_seconds);
  o["failed_rank"] = RankOrNull(s.failure);
  o["failure_reason"] = Str(s.failure.text);
  o["failure"] = FailureObject(s.failure);
  o["stop_reason"] = Str(s.stop_reason);
  Json checkpoint = nullptr;
  if (s.checkpoint_epoch >= 0) {
    checkpoint = Json::object();
    checkpoint["epoch"] = s.checkpoint_epoch;
    checkpoint["step"] = s.checkpoint_step;
    checkpoint["path"] = Str(s.checkpoint_path);
  }
  o["checkpoint"] = std::move(checkpoint);
  o["ranks"] = nullptr;  // spliced in below, as rendered
  Json events = Json::array();
  for (const std::string& e : s.events) events.push_back(Str(e));
  o["events"] = std::move(events);
  o["restarts"] = s.restarts;
  o["max_restarts"] = s.max_restarts;
  o["last_recovery_seconds"] = NumOrNull(s.last_recovery_seconds, s.last_recovery_seconds >= 0);
  o["membership_generation"] = s.membership_generation;
  o["lost_ranks"] = LostRanksArray(s.lost_ranks);
  o["spare_nodes"] = s.spare_nodes;
  o["exit_code"] = IsTerminal(s.state) ? Json(JobExitCode(s.state)) : Json(nullptr);
  if (s.stall.present()) o["stall"] = StallObject(s.stall);
  Json journal = nullptr;
  if (s.journal.state != JournalCondition::kNone) {
    journal = Json::object();
    journal["state"] = JournalConditionName(s.journal.state);
    journal["error"] = s.journal.error.empty() ? Json(nullptr) : Str(s.journal.error);
    journal["records"] = s.journal.records;
    journal["pending"] = s.journal.pending;
    journal["dropped"] = s.journal.dropped;
    journal["stuck_seconds"] = Num(s.journal.stuck_seconds);
  }
  o["journal"] = std::move(journal);
  Json coordinator = Json::object();
  coordinator["epoch"] = s.coordinator.epoch;
  coordinator["node"] = s.coordinator.node;
  coordinator["host"] = Str(s.coordinator.host);
  coordinator["takeovers"] = s.coordinator.takeovers();
  Json standby = nullptr;
  if (s.coordinator.has_standby()) {
    standby = Json::object();
    standby["node"] = s.coordinator.standby_node;
    standby["host"] = Str(s.coordinator.standby_host);
    standby["behind_records"] = s.coordinator.standby_behind_records;
  }
  coordinator["standby"] = std::move(standby);
  o["coordinator"] = std::move(coordinator);
  o["stragglers"] = StragglersArray(s.stragglers);
  o["breakdown"] = BreakdownObject(s.breakdown);
  const double ettr = s.time_use.ettr();
  o["ettr"] = NumOrNull(ettr, ettr >= 0);
  o["time_use"] = TimeUseObject(s.time_use);
  out->reserve(ranks.size() + 4096 + 256 * s.events.size());  // one copy of the ranks
  SpliceAt(Dump(o), "ranks", ranks, out);
}

namespace {

// Reads the fields of one JSON object into plain values; the first type error is kept in
// `error` and later reads do nothing. A missing key or a null leaves the value as it was.
class Fields {
 public:
  Fields(const Json& object, std::string where, absl::Status* error)
      : o_(object), where_(std::move(where)), error_(error) {}

  const Json* Get(const char* key) {
    if (!error_->ok()) return nullptr;
    const auto it = o_.find(key);
    if (it == o_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  void Int(const char* key, int64_t* out) {
    const Json* v = Get(key);
    if (v == nullptr) return;
    // nlohmann reads a non-negative integer as unsigned.
    if (v->is_number_unsigned() && v->get<uint64_t>() <= INT64_MAX) {
      *out = static_cast<int64_t>(v->get<uint64_t>());
    } else if (v->is_number_integer() && !v->is_number_unsigned()) {
      *out = v->get<int64_t>();
    } else {
      Fail(key, "an integer");
    }
  }
  void Int(const char* key, int* out) {
    int64_t wide = *out;
    Int(key, &wide);
    if (wide < INT32_MIN || wide > INT32_MAX) return Fail(key, "a 32-bit integer");
    *out = static_cast<int>(wide);
  }
  // `if_null`: the value a null (or a missing key) stands for.
  void Dbl(const char* key, double* out, double if_null) {
    *out = if_null;
    const Json* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_number()) return Fail(key, "a number");
    *out = v->get<double>();
  }
  void Str(const char* key, std::string* out) {
    const Json* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_string()) return Fail(key, "a string");
    *out = v->get<std::string>();
  }
  void Bool(const char* key, bool* out) {
    const Json* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_boolean()) return Fail(key, "true or false");
    *out = v->get<bool>();
  }
  // An enum spelled by `name`; a name not in `all` reads as `fallback`.
  template <typename E, size_t N>
  void Enum(const char* key, const E (&all)[N], const char* (*name)(E), E fallback, E* out) {
    std::string text;
    Str(key, &text);
    if (text.empty()) return;
    *out = fallback;
    for (E e : all) {
      if (text == name(e)) {
        *out = e;
        return;
      }
    }
  }
  // Each element of the array at `key`, which must be an object.
  template <typename Fn>
  void Objects(const char* key, Fn&& each) {
    const Json* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_array()) return Fail(key, "an array");
    for (size_t i = 0; i < v->size() && error_->ok(); ++i) {
      if (!(*v)[i].is_object()) return Fail(key, "an array of objects");
      Fields item((*v)[i], absl::StrCat(where_, key, "[", i, "]."), error_);
      each(item);
    }
  }
  // The object at `key`, if there is one.
  template <typename Fn>
  void Object(const char* key, Fn&& fill) {
    const Json* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_object()) return Fail(key, "an object");
    Fields inner(*v, absl::StrCat(where_, key, "."), error_);
    fill(inner);
  }

 private:
  void Fail(const char* key, const char* want) {
    *error_ =
        absl::InvalidArgumentError(absl::StrCat("status JSON: ", where_, key, " is not ", want));
  }

  const Json& o_;
  std::string where_;
  absl::Status* error_;
};

void ReadCause(Fields& f, FailureCause* c) {
  c->rank = -1;
  f.Int("rank", &c->rank);
  f.Enum("cause", kAllFailureKinds, &FailureKindName, FailureKind::kWorkerError, &c->kind);
  f.Str("text", &c->text);
}

void ReadRank(Fields& f, RankStatus* r) {
  f.Int("rank", &r->rank);
  f.Str("host", &r->host);
  f.Int("node_rank", &r->node_rank);
  f.Int("local_rank", &r->local_rank);
  f.Int("pid", &r->pid);
  f.Enum("state", kAllRankStates, &RankStateName, RankState::kStarting, &r->state);
  f.Int("epoch", &r->epoch);
  f.Int("step", &r->step);
  f.Dbl("loss", &r->loss, NAN);
  f.Dbl("samples_per_second", &r->samples_per_second, NAN);
  f.Dbl("last_seen_seconds", &r->last_seen_seconds, NAN);
  f.Enum("phase", kAllStepPhases, &StepPhaseName, StepPhase::kNone, &r->phase);
  f.Dbl("phase_seconds", &r->phase_seconds, NAN);
  f.Enum("flag", kAllRankFlags, &RankFlagName, RankFlag::kNone, &r->flag);
  f.Int("behind_by", &r->behind_by);
  f.Bool("final", &r->final);
  f.Object("score", [&](Fields& sc) {
    r->score.measured = true;
    sc.Dbl("relative", &r->score.relative, NAN);
    sc.Dbl("individual", &r->score.individual, NAN);
    for (StepSection k : kAllStepSections) {
      sc.Dbl(StepSectionName(k), &r->score.sections[static_cast<int>(k)], NAN);
    }
    sc.Bool("straggler", &r->score.straggler);
  });
}

}  // namespace

absl::StatusOr<JobStatus> FromJson(absl::string_view text) {
  const Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InvalidArgumentError("status JSON: not one JSON object");
  absl::Status error;
  Fields f(j, "", &error);
  JobStatus s;
  f.Str("job_id", &s.job_id);
  f.Bool("finished", &s.finished);
  f.Enum("state", kAllJobStates, &JobStateJsonName, JobState::kFailed, &s.state);
  if (s.state == JobState::kStopping && s.finished) s.state = JobState::kStopped;
  f.Int("generation", &s.generation);
  f.Int("world_size", &s.world_size);
  f.Int("registered", &s.registered);
  f.Int("num_nodes", &s.num_nodes);
  f.Int("epoch", &s.epoch);
  f.Int("epochs", &s.epochs);
  f.Int("step", &s.step);
  f.Int("steps_per_epoch", &s.steps_per_epoch);
  f.Dbl("loss", &s.loss, NAN);
  f.Dbl("samples_per_second", &s.samples_per_second, NAN);
  f.Dbl("eta_seconds", &s.eta_seconds, -1);
  f.Dbl("uptime_seconds", &s.uptime_seconds, NAN);
  f.Object("failure", [&](Fields& c) { ReadCause(c, &s.failure); });
  f.Str("stop_reason", &s.stop_reason);
  f.Object("checkpoint", [&](Fields& c) {
    c.Int("epoch", &s.checkpoint_epoch);
    c.Int("step", &s.checkpoint_step);
    c.Str("path", &s.checkpoint_path);
  });
  f.Objects("ranks", [&](Fields& r) { ReadRank(r, &s.ranks.emplace_back()); });
  if (const Json* events = f.Get("events"); events != nullptr && events->is_array()) {
    for (const Json& e : *events) {
      if (e.is_string()) s.events.push_back(e.get<std::string>());
    }
  }
  f.Int("restarts", &s.restarts);
  f.Int("max_restarts", &s.max_restarts);
  f.Dbl("last_recovery_seconds", &s.last_recovery_seconds, -1);
  f.Int("membership_generation", &s.membership_generation);
  f.Objects("lost_ranks", [&](Fields& l) {
    LostRank& lost = s.lost_ranks.emplace_back();
    ReadCause(l, &lost.cause);
    l.Dbl("at_seconds", &lost.at_seconds, NAN);
    l.Bool("replaced", &lost.replaced);
  });
  f.Int("spare_nodes", &s.spare_nodes);
  f.Int("exit_code", &s.exit_code);
  f.Object("stall", [&](Fields& st) {
    st.Int("rank", &s.stall.rank);
    st.Enum("phase", kAllStepPhases, &StepPhaseName, StepPhase::kNone, &s.stall.phase);
    st.Dbl("seconds", &s.stall.seconds, NAN);
    st.Dbl("budget_seconds", &s.stall.budget_seconds, NAN);
    const Json* peers = st.Get("peers");
    if (peers == nullptr || !peers->is_object()) return;
    for (const auto& [phase, count] : peers->items()) {
      PhaseCount& c = s.stall.peers.emplace_back();
      for (StepPhase p : kAllStepPhases) {
        if (phase == StepPhaseName(p)) c.phase = p;
      }
      if (count.is_number_integer()) c.ranks = count.get<int>();
    }
  });
  f.Object("journal", [&](Fields& jr) {
    jr.Enum("state", kAllJournalConditions, &JournalConditionName, JournalCondition::kFailed,
            &s.journal.state);
    jr.Str("error", &s.journal.error);
    jr.Int("records", &s.journal.records);
    jr.Int("pending", &s.journal.pending);
    jr.Int("dropped", &s.journal.dropped);
    jr.Dbl("stuck_seconds", &s.journal.stuck_seconds, NAN);
  });
  // `takeovers` is the epoch, written for scripts; read back from `epoch`.
  f.Object("coordinator", [&](Fields& c) {
    c.Int("epoch", &s.coordinator.epoch);
    c.Int("node", &s.coordinator.node);
    c.Str("host", &s.coordinator.host);
    c.Object("standby", [&](Fields& sb) {
      sb.Int("node", &s.coordinator.standby_node);
      sb.Str("host", &s.coordinator.standby_host);
      sb.Int("behind_records", &s.coordinator.standby_behind_records);
    });
  });
  f.Objects("stragglers", [&](Fields& st) {
    StragglerReport& r = s.stragglers.emplace_back();
    st.Int("rank", &r.rank);
    st.Str("host", &r.host);
    st.Int("node", &r.node_rank);
    st.Enum("section", kAllStepSections, &StepSectionName, StepSection::kCompute, &r.section);
    st.Dbl("relative_score", &r.relative_score, NAN);
    st.Dbl("slower", &r.slower, NAN);
    st.Dbl("since", &r.since_seconds, NAN);
    st.Dbl("seconds", &r.seconds, NAN);
  });
  f.Object("breakdown", [&](Fields& b) {
    b.Int("rank", &s.breakdown.rank);
    for (StepSection k : kAllStepSections) {
      b.Dbl(StepSectionName(k), &s.breakdown.seconds[static_cast<int>(k)], NAN);
    }
    b.Object("spread", [&](Fields& sp) {
      for (StepSection k : kAllStepSections) {
        sp.Dbl(StepSectionName(k), &s.breakdown.spread[static_cast<int>(k)], NAN);
      }
    });
  });
  f.Object("time_use", [&](Fields& t) {
    t.Dbl("wall", &s.time_use.wall, 0);
    t.Dbl("training", &s.time_use.training, 0);
    t.Dbl("startup", &s.time_use.startup, 0);
    t.Dbl("recoveries", &s.time_use.recovery, 0);
    t.Dbl("stalls", &s.time_use.stall, 0);
    t.Dbl("checkpoints", &s.time_use.checkpoint, 0);
    t.Dbl("evaluation", &s.time_use.evaluation, 0);
    t.Dbl("other", &s.time_use.other, 0);
  });
  if (!error.ok()) return error;
  return s;
}

}  // namespace ddp
