#include "client/ddpctl/status_view.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/utf8.h"

namespace ddp {
namespace {

// Steps of the whole run; 0 when unknown (a nonsensical or overflowing epoch count).
int64_t TotalSteps(const JobStatus& s) {
  int64_t total = 0;
  if (s.epochs <= 0 || s.steps_per_epoch <= 0 ||
      __builtin_mul_overflow(s.epochs, s.steps_per_epoch, &total)) {
    return 0;
  }
  return total;
}

// What a job, a worker or an operator sent, made safe for a terminal: valid UTF-8 (bad bytes
// become U+FFFD), line breaks and tabs as spaces, other control characters (C0, DEL, C1: escape
// sequences) as '?'.
std::string Printable(absl::string_view raw) {
  const std::string valid = ToValidUtf8(raw);
  std::string out;
  out.reserve(valid.size());
  for (size_t i = 0; i < valid.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(valid[i]);
    if (c == '\n' || c == '\r' || c == '\t') {
      out.push_back(' ');
    } else if (c < 0x20 || c == 0x7f) {
      out.push_back('?');
    } else if (c == 0xc2 && i + 1 < valid.size() &&
               static_cast<unsigned char>(valid[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(valid[i + 1]) <= 0x9f) {
      out.push_back('?');  // U+0080..U+009F
      ++i;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

// What the JSON's flag says about a rank (decided by the coordinator, common/job_status.h).
std::string Flags(const RankStatus& r) {
  std::vector<std::string> parts;
  if (r.flag == RankFlag::kStalled) {
    parts.push_back(absl::StrFormat("in %s %.1fs", StepPhaseName(r.phase), r.phase_seconds));
  }
  if (r.behind_by > 0) parts.push_back(absl::StrCat("behind by ", r.behind_by));
  if (r.flag == RankFlag::kSilent) {
    parts.push_back(absl::StrFormat("silent %.1fs", r.last_seen_seconds));
  }
  if (r.flag == RankFlag::kStraggler) {
    parts.push_back(absl::StrFormat("straggler (score %.2f)", r.score.relative));
  }
  if (r.flag != RankFlag::kNone && parts.empty()) parts.push_back(RankFlagName(r.flag));
  if (parts.empty()) return "";
  return absl::StrCat("<< ", absl::StrJoin(parts, ", "));
}

// " (finished, exit 3)" once the job has ended; the exit code as the status says.
std::string Finished(const JobStatus& s) {
  if (!s.finished) return "";
  return s.exit_code >= 0 ? absl::StrCat(" (finished, exit ", s.exit_code, ")") : " (finished)";
}

// "rank 3 in data for 62.0s (budget 1m0s; peers: 1 in allreduce)".
std::string StallText(const StallReport& st) {
  std::vector<std::string> peers;
  for (const PhaseCount& c : st.peers) {
    peers.push_back(absl::StrCat(c.ranks, " in ", StepPhaseName(c.phase)));
  }
  std::string out =
      absl::StrFormat("rank %d in %s for %.1fs", st.rank, StepPhaseName(st.phase), st.seconds);
  std::vector<std::string> notes;
  if (st.budget_seconds > 0) {
    notes.push_back(absl::StrCat("budget ", FormatDuration(st.budget_seconds)));
  }
  if (!peers.empty()) notes.push_back(absl::StrCat("peers: ", absl::StrJoin(peers, ", ")));
  if (!notes.empty()) absl::StrAppend(&out, " (", absl::StrJoin(notes, "; "), ")");
  return out;
}

// "rank 5 (host n1): compute 1.9x slower than the best rank for 42 s (relative score 0.52)".
std::string StragglerText(const StragglerReport& st) {
  return absl::StrFormat("rank %d (host %s): %s", st.rank, Printable(st.host), StragglerReason(st));
}

// "step 0.190s (slowest rank 2): data 0.010s, compute 0.170s, communication 0.001s, optimizer
// 0.010s; spread across ranks: ..." (one line).
std::string BreakdownLine(const StepBreakdown& b) {
  std::vector<std::string> parts;
  std::vector<std::string> spread;
  for (StepSection k : kAllStepSections) {
    const int i = static_cast<int>(k);
    parts.push_back(absl::StrFormat("%s %.3fs", StepSectionName(k), b.seconds[i]));
    spread.push_back(absl::StrFormat("%s %.3fs", StepSectionName(k), b.spread[i]));
  }
  return absl::StrFormat("step %.3fs (slowest rank %d): %s; spread across ranks: %s",
                         b.step_seconds(), b.rank, absl::StrJoin(parts, ", "),
                         absl::StrJoin(spread, ", "));
}

// "ETTR 93.1% of 5m00s: training 4m39s, startup 12s, recovery 0s, ..." (one line).
std::string EttrLine(const TimeUse& t) {
  const std::pair<const char*, double> uses[] = {
      {"training", t.training}, {"startup", t.startup},        {"recoveries", t.recovery},
      {"stalls", t.stall},      {"checkpoints", t.checkpoint}, {"evaluation", t.evaluation},
      {"other", t.other}};
  std::vector<std::string> parts;
  for (const auto& [use, seconds] : uses) {
    parts.push_back(absl::StrCat(use, " ", FormatDuration(seconds)));
  }
  return absl::StrFormat("ETTR %.1f%% of %s: %s", 100 * t.ettr(), FormatDuration(t.wall),
                         absl::StrJoin(parts, ", "));
}

// "coordinator: epoch 1 on host n1 (node 1), 1 takeover; standby: node 2 (host n2), 0 records
// behind" (one line; epoch 0 names no takeovers; a job without a standby says "standby: none").
std::string CoordinatorLine(const CoordinatorInfo& c) {
  std::string out = absl::StrFormat("coordinator: epoch %d on host %s (node %d)", c.epoch,
                                    c.host.empty() ? "?" : Printable(c.host), c.node);
  if (c.takeovers() > 0) {
    absl::StrAppend(
        &out, absl::StrFormat(", %d takeover%s", c.takeovers(), c.takeovers() == 1 ? "" : "s"));
  }
  if (!c.has_standby()) return absl::StrCat(out, "; standby: none");
  absl::StrAppend(&out, absl::StrFormat("; standby: node %d (host %s)", c.standby_node,
                                        c.standby_host.empty() ? "?" : Printable(c.standby_host)));
  absl::StrAppend(&out, absl::StrFormat(", %d record%s behind", c.standby_behind_records,
                                        c.standby_behind_records == 1 ? "" : "s"));
  return out;
}

}  // namespace

std::string ProgressBar(double fraction, int width) {
  fraction = std::clamp(std::isfinite(fraction) ? fraction : 0.0, 0.0, 1.0);
  const int filled = static_cast<int>(std::lround(fraction * width));
  return absl::StrCat("[", std::string(static_cast<size_t>(filled), '#'),
                      std::string(static_cast<size_t>(width - filled), '.'), "]");
}

std::string FormatDuration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "-";
  const int64_t s = std::llround(seconds);
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, s % 3600 / 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

std::string FormatStatus(const JobStatus& s, const ViewOptions& options) {
  std::string out;
  if (s.stall.present()) absl::StrAppend(&out, "STALLED: ", StallText(s.stall), "\n");
  for (const StragglerReport& st : s.stragglers) {
    absl::StrAppend(&out, "STRAGGLER: ", StragglerText(st), "\n");
  }
  if (s.journal.state == JournalCondition::kFailed) {
    absl::StrAppend(&out, "JOURNAL FAILED: ", Printable(s.journal.error), " (", s.journal.dropped,
                    " record(s) dropped; a restarted coordinator could not take the job over)\n");
  } else if (s.journal.state == JournalCondition::kStuck) {
    absl::StrAppend(&out, "JOURNAL STUCK: a write has not returned for ",
                    FormatDuration(s.journal.stuck_seconds), " (", s.journal.pending,
                    " record(s) waiting)\n");
  }
  if (s.state == JobState::kFailed) {
    absl::StrAppend(&out, "FAILED",
                    s.failure.rank >= 0 ? absl::StrCat(": rank ", s.failure.rank) : std::string(),
                    "\n  cause: ", FailureKindName(s.failure.kind), "\n  reason: ",
                    s.failure.text.empty() ? "(none given)" : Printable(s.failure.text), "\n");
  } else if (s.state == JobState::kStopping || s.state == JobState::kStopped) {
    absl::StrAppend(&out, s.state == JobState::kStopped ? "STOPPED (resumable)" : "STOPPING", ": ",
                    Printable(s.stop_reason), "\n");
  } else if (s.state == JobState::kRecovering && !s.lost_ranks.empty()) {
    const LostRank& last = s.lost_ranks.back();
    absl::StrAppend(
        &out, "RECOVERING",
        last.cause.rank >= 0 ? absl::StrCat(": rank ", last.cause.rank) : std::string(),
        " (restart ", s.restarts, " of ", s.max_restarts, ")",
        "\n  cause: ", FailureKindName(last.cause.kind), "\n  reason: ", Printable(last.cause.text),
        s.stop_reason.empty() ? "" : "\n  then stopping: ", Printable(s.stop_reason), "\n");
  }
  absl::StrAppend(&out, absl::StrFormat("job %s  generation %d  %s%s  up %s\n", Printable(s.job_id),
                                        s.generation, JobStateName(s.state), Finished(s),
                                        FormatDuration(s.uptime_seconds)));
  if (s.state == JobState::kRegistering) {
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "registering %s %d/%d workers\n",
            ProgressBar(s.world_size > 0 ? static_cast<double>(s.registered) / s.world_size : 0.0,
                        30),
            s.registered, s.world_size));
  } else {
    const int64_t total = TotalSteps(s);
    const double fraction =
        s.state == JobState::kSucceeded
            ? 1.0
            : (total > 0 ? static_cast<double>(s.step) / static_cast<double>(total) : 0.0);
    absl::StrAppend(&out, absl::StrFormat("epoch %d/%d  %s %3.0f%%  step %d%s\n", s.epoch, s.epochs,
                                          ProgressBar(fraction, 30), 100 * fraction, s.step,
                                          total > 0 ? absl::StrCat("/", total) : std::string()));
    absl::StrAppend(&out, absl::StrFormat("loss %.4g  %.1f samples/s  eta %s\n", s.loss,
                                          s.samples_per_second, FormatDuration(s.eta_seconds)));
    if (s.breakdown.measured()) absl::StrAppend(&out, BreakdownLine(s.breakdown), "\n");
  }
  if (s.time_use.wall > 0) absl::StrAppend(&out, EttrLine(s.time_use), "\n");
  std::vector<const RankStatus*> rows;
  int flagged = 0;
  int final = 0;
  for (const RankStatus& r : s.ranks) {
    if (r.flag != RankFlag::kNone) ++flagged;
    if (r.final) ++final;
    rows.push_back(&r);
  }
  absl::StrAppend(&out, absl::StrFormat("workers %d/%d registered", s.registered, s.world_size));
  if (s.num_nodes > 0) absl::StrAppend(&out, absl::StrFormat(" on %d node(s)", s.num_nodes));
  if (s.spare_nodes > 0) absl::StrAppend(&out, absl::StrFormat(", %d spare(s)", s.spare_nodes));
  if (flagged > 0) absl::StrAppend(&out, absl::StrFormat("; %d flagged", flagged));
  if (final > 0) absl::StrAppend(&out, absl::StrFormat("; %d final", final));
  absl::StrAppend(&out, "\n", CoordinatorLine(s.coordinator), "\n");
  if (s.checkpoint_epoch >= 0) {
    absl::StrAppend(&out, absl::StrFormat("checkpoint: epoch %d step %d %s\n", s.checkpoint_epoch,
                                          s.checkpoint_step, Printable(s.checkpoint_path)));
  }
  if (s.restarts > 0 || !s.lost_ranks.empty()) {
    absl::StrAppend(&out, absl::StrFormat("restarts %d/%d  membership generation %d", s.restarts,
                                          s.max_restarts, s.membership_generation));
    if (s.last_recovery_seconds >= 0) {
      absl::StrAppend(&out, absl::StrFormat("  last recovery %.2fs", s.last_recovery_seconds));
    }
    absl::StrAppend(&out, "\n");
    for (const LostRank& l : s.lost_ranks) {
      absl::StrAppend(&out, absl::StrFormat("  lost +%.1fs %s: %s%s\n", l.at_seconds,
                                            FailureKindName(l.cause.kind), l.cause.text,
                                            l.replaced ? " (replaced)" : ""));
    }
  }
  if (!rows.empty()) {
    std::stable_partition(rows.begin(), rows.end(),
                          [](const RankStatus* r) { return r->flag != RankFlag::kNone; });
    const size_t shown = options.max_ranks > 0
                             ? std::min(rows.size(), static_cast<size_t>(options.max_ranks))
                             : rows.size();
    absl::StrAppend(&out, "\n",
                    absl::StrFormat("%-5s %-18s %-10s %-9s %-10s %-14s\n", "RANK", "HOST",
                                    "LOCAL/GPU", "STEP", "LAST SEEN", "STATE"));
    for (size_t i = 0; i < shown; ++i) {
      const RankStatus& r = *rows[i];
      std::string line = absl::StrFormat(
          "%-5s %-18s %-10d %-9d %-10s %-14s %s", r.rank < 0 ? "-" : absl::StrCat(r.rank),
          Printable(r.host), r.local_rank, r.step, absl::StrFormat("%.1fs", r.last_seen_seconds),
          RankStateName(r.state), Flags(r));
      while (!line.empty() && line.back() == ' ') line.pop_back();
      absl::StrAppend(&out, line, "\n");
    }
    if (shown < rows.size()) {
      absl::StrAppend(&out, absl::StrFormat("... %d more rank(s) (--all lists every rank)\n",
                                            rows.size() - shown));
    }
  }
  if (options.events > 0 && !s.events.empty()) {
    absl::StrAppend(&out, "\nrecent events:\n");
    const size_t n = std::min(s.events.size(), static_cast<size_t>(options.events));
    for (size_t i = s.events.size() - n; i < s.events.size(); ++i) {
      absl::StrAppend(&out, "  ", Printable(s.events[i]), "\n");
    }
  }
  return out;
}

std::string FormatLine(const JobStatus& s) {
  std::string line = JobStateName(s.state);
  if (s.state == JobState::kRegistering) {
    absl::StrAppend(&line, absl::StrFormat(" registered %d/%d", s.registered, s.world_size));
    return line;
  }
  const int64_t total = TotalSteps(s);
  absl::StrAppend(
      &line, absl::StrFormat(" epoch %d/%d step %d%s loss %.4g %.1f samples/s", s.epoch, s.epochs,
                             s.step, total > 0 ? absl::StrCat("/", total) : std::string(), s.loss,
                             s.samples_per_second));
  int working = 0;
  int flagged = 0;
  for (const RankStatus& r : s.ranks) {
    if (!r.final) ++working;
    if (r.flag != RankFlag::kNone) ++flagged;
  }
  absl::StrAppend(&line, absl::StrFormat(" ranks %d/%d working", working, s.world_size));
  if (flagged > 0) absl::StrAppend(&line, absl::StrFormat(" %d flagged", flagged));
  if (s.restarts > 0) {
    absl::StrAppend(&line, absl::StrFormat(" restarts %d/%d", s.restarts, s.max_restarts));
  }
  if (s.stall.present()) absl::StrAppend(&line, " stalled: ", StallText(s.stall));
  for (const StragglerReport& st : s.stragglers) {
    absl::StrAppend(&line, " straggler: ", StragglerText(st));
  }
  if (s.time_use.wall > 0)
    absl::StrAppend(&line, absl::StrFormat(" ETTR %.1f%%", 100 * s.time_use.ettr()));
  if (s.state == JobState::kFailed) {
    absl::StrAppend(&line, " failed",
                    s.failure.rank >= 0 ? absl::StrCat(" rank ", s.failure.rank) : std::string(),
                    " (", FailureKindName(s.failure.kind), "): ", Printable(s.failure.text));
  }
  return line;
}

}  // namespace ddp
