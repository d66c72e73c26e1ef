// Stateful fuzzing of the coordinator's job logic (coordinator/job/job.h) against a fake clock:
// the input picks a job (world size 1..8, workers per node, restarts, timeouts, event cap,
// --min-nodes) and then a sequence of calls, each decoded from the bytes that follow: fake
// workers Register, GetShard, Heartbeat (progress, stop signals), CommitCheckpoint, ReportDone,
// Rejoin, launchers ReportLost and respawn them, spare nodes StandBy, operators Stop (graceful
// or not) and read Status, and time moves (Tick after small steps, heartbeat-sized steps and
// gaps of hours or days). Requests go through the same validation and clamping the service
// applies (coordinator/rpc/validation.h), with garbage in every string (invalid UTF-8, up to a
// few KB). Register and Rejoin callbacks are recorded whenever they run.
//
// Invariants, checked after every call:
//   - every string the job hands out (Status: job id, state text, failure, stop reason, events,
//     hosts, lost ranks' causes; replies, assignments, error messages) is valid UTF-8 and bounded;
//   - the world is the configured one, or (with --min-nodes) smaller, never empty;
//   - Status().ranks: at most world_size rows; once the world is complete, row i is rank i, the
//     ranks are unique and in [0, world_size), and no launch place appears twice;
//   - no two workers are given the same rank in the same membership generation, and a worker's
//     assignment matches its launch place; each callback runs at most once;
//   - bounded state: events <= JobConfig::max_events (EventLog's cap), lost ranks <= restarts
//     + 1, restarts <= max_restarts;
//   - every "job <STATE>" change the log sink receives is a move Lifecycle::Allowed permits
//     (nothing leaves SUCCEEDED, STOPPED or FAILED), and Status().state is the last announced
//     state; `finished` matches the state and never goes back; a failure cause is present exactly
//     when FAILED, and then no Register or Rejoin callback is left waiting.
// No crash and no undefined behaviour: ASan and UBSan.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/coordinator_api.h"
#include "common/job_status.h"
#include "coordinator/clock.h"
#include "coordinator/job/job.h"
#include "coordinator/job/lifecycle.h"
#include "coordinator/rpc/validation.h"
#include "fuzz/fuzz_check.h"

namespace {

using ddp::fuzz::ByteReader;

// No string the job produces may exceed this (reasons are clamped to 4 KB; a failure's text may
// combine a few of them with the earlier losses: restarts are at most 3 here).
constexpr size_t kMaxStringBytes = 64 * 1024;
constexpr int kMaxCalls = 600;
constexpr size_t kMaxWorkers = 16;

// Arbitrary bytes for a string field: empty, short raw bytes, invalid sequences, valid
// multi-byte text around the 4 KB clamp, or a long repetition (up to ~6 KB) of a raw pattern.
std::string Garbage(ByteReader& in) {
  switch (in.Byte() % 8) {
    case 0:
      return "";
    case 1:
    case 2:
    case 3:
      return in.Str(64);
    case 4: {
      static const char* const kBad[] = {"\xff",        "\xc0\x80",         "\xed\xa0\x80",
                                         "\xe2\x82",    "\xf4\x90\x80\x80", "\x80",
                                         "\xf0\x9f\x98"};
      std::string s = in.Str(8);
      s += kBad[in.Byte() % 7];
      s += in.Str(8);
      return s;
    }
    case 5: {
      static const char* const kWide[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "a"};
      const std::string unit = kWide[in.Byte() % 4];
      const size_t n = 4090 + in.Byte() % 16;
      std::string s;
      while (s.size() < n) s += unit;
      return s;
    }
    default: {
      std::string pattern = in.Str(16);
      if (pattern.empty()) pattern = "x";
      const size_t n = static_cast<size_t>(in.U64(2)) % 6000;
      std::string s;
      while (s.size() < n) s += pattern;
      return s;
    }
  }
}

// A short string, mostly the given default.
std::string Host(ByteReader& in, const std::string& fallback) {
  return in.Byte() % 8 != 0 ? fallback : Garbage(in);
}

absl::Duration SmallDuration(ByteReader& in, absl::Duration unit) {
  return unit * static_cast<int64_t>(in.Byte());
}

struct Worker {
  int node = 0;
  int local = 0;
  int lws = 1;
  std::string host;
  int incarnation = 0;
  bool alive = true;
  int pid() const { return 1000 + node * 100 + local * 10 + incarnation * 1000; }
  // The last assignment received (rank -1: none yet).
  int rank = -1;
  int64_t generation = -1;
};

class Harness {
 public:
  explicit Harness(ByteReader& in) : in_(in) {}

  void Run();

 private:
  struct Pending {
    size_t worker = 0;
    int pid = 0;
    bool answered = false;
  };

  void Configure();
  // Makes one call (its name in last_call_).
  void Step();
  // A spare node's launcher stands by (any node id, sometimes one of the job's).
  void StandBy();
  void Fences();
  void CheckStatus(const char* after);
  void CheckText(const std::string& s, const std::string& what) const;
  void CheckStatusText(const absl::Status& st, const char* what) const;
  void OnLog(const std::string& line);
  void OnAssigned(const std::shared_ptr<Pending>& p, const absl::StatusOr<ddp::RankAssignment>& r);
  ddp::Job::RegisterCallback Callback(size_t worker);
  size_t PickWorker();
  int RankFor(const Worker& w);
  int PidFor(const Worker& w);

  ByteReader& in_;
  ddp::FakeClock clock_;
  ddp::JobConfig config_;
  std::vector<Worker> workers_;
  // (membership generation, rank) -> (worker index, pid) of the process it was given to.
  std::map<std::pair<int64_t, int>, std::pair<size_t, int>> owners_;
  std::vector<std::shared_ptr<Pending>> pending_;
  ddp::JobState announced_ = ddp::JobState::kRegistering;
  bool was_finished_ = false;
  // FUZZ_JOB_TRACE=1: every call, its state after and the log lines (to read a seed or crash).
  const bool trace_ = std::getenv("FUZZ_JOB_TRACE") != nullptr;
  const char* last_call_ = "construction";
  std::unique_ptr<ddp::Job> job_;  // last: destroyed first (it holds callbacks into this)
};

void Harness::CheckText(const std::string& s, const std::string& what) const {
  FUZZ_CHECK(ddp::fuzz::IsStrictUtf8(s), absl::StrCat(what, " is not valid UTF-8: ", s));
  FUZZ_CHECK(s.size() <= kMaxStringBytes, absl::StrCat(what, " has ", s.size(), " bytes"));
}

void Harness::CheckStatusText(const absl::Status& st, const char* what) const {
  CheckText(std::string(st.message()), absl::StrCat(what, " error"));
}

void Harness::OnLog(const std::string& line) {
  if (trace_) std::fprintf(stderr, "  log: %.200s\n", line.c_str());
  CheckText(line, "log line");
  if (line.rfind("job ", 0) != 0) return;
  for (ddp::JobState s : ddp::kAllJobStates) {
    const std::string name = ddp::JobStateName(s);
    if (line.compare(4, name.size(), name) != 0) continue;
    if (line.size() != 4 + name.size() && line[4 + name.size()] != ':') continue;
    FUZZ_CHECK(ddp::Lifecycle::Allowed(announced_, s),
               absl::StrCat("state change ", ddp::JobStateName(announced_), " -> ", name,
                            " is not allowed: ", line));
    announced_ = s;
    return;
  }
}

void Harness::OnAssigned(const std::shared_ptr<Pending>& p,
                         const absl::StatusOr<ddp::RankAssignment>& r) {
  FUZZ_CHECK(!p->answered, absl::StrCat("a callback of worker ", p->worker, " ran twice"));
  p->answered = true;
  if (!r.ok()) {
    CheckStatusText(r.status(), "registration");
    return;
  }
  const ddp::RankAssignment& a = *r;
  const int world = a.world_size;  // smaller than the configured one once the job shrank
  FUZZ_CHECK(a.rank >= 0 && a.rank < world, absl::StrCat("rank ", a.rank, " of ", world));
  FUZZ_CHECK(world >= 1 && world <= config_.world_size &&
                 (config_.min_nodes > 0 || world == config_.world_size),
             absl::StrCat("world size ", world, " (configured ", config_.world_size,
                          ", --min-nodes ", config_.min_nodes, ")"));
  FUZZ_CHECK(a.membership_generation >= 0, absl::StrCat(a.membership_generation));
  CheckText(a.store_prefix, "store prefix");
  CheckText(a.recovery_cause.text, "recovery cause");
  Worker& w = workers_[p->worker];
  FUZZ_CHECK(a.node_rank == w.node && a.local_rank == w.local,
             absl::StrCat("worker at node ", w.node, " local ", w.local, " was given node ",
                          a.node_rank, " local ", a.local_rank));
  const auto key = std::make_pair(a.membership_generation, a.rank);
  const auto owner = std::make_pair(p->worker, p->pid);
  auto [it, fresh] = owners_.emplace(key, owner);
  FUZZ_CHECK(fresh || it->second == owner,
             absl::StrCat("rank ", a.rank, " of membership generation ", a.membership_generation,
                          " given to worker ", p->worker, " pid ", p->pid, " and to worker ",
                          it->second.first, " pid ", it->second.second));
  if (p->pid == w.pid()) {
    w.rank = a.rank;
    w.generation = a.membership_generation;
  }
}

ddp::Job::RegisterCallback Harness::Callback(size_t worker) {
  auto p = std::make_shared<Pending>();
  p->worker = worker;
  p->pid = workers_[worker].pid();
  pending_.push_back(p);
  return [this, p](absl::StatusOr<ddp::RankAssignment> r) { OnAssigned(p, r); };
}

void Harness::Configure() {
  const int world = 1 + in_.Byte() % 8;
  const int per_node = 1 + in_.Byte() % world;
  config_.job_id = in_.Byte() % 4 == 0 ? ddp::ClampReason(Garbage(in_)) : "fuzz";
  config_.nonce = in_.Bool() ? "n" : "";
  config_.world_size = world;
  config_.registration_timeout = absl::Seconds(1 + in_.Byte());
  config_.heartbeat_timeout = absl::Seconds(1 + in_.Byte() % 30);
  config_.suspend_threshold = in_.Bool() ? absl::InfiniteDuration() : absl::Seconds(2);
  config_.max_restarts = in_.Byte() % 4;
  config_.recovery_timeout = absl::Seconds(1 + in_.Byte());
  config_.stall.timeout = in_.Bool() ? absl::ZeroDuration() : absl::Seconds(1 + in_.Byte());
  config_.stop_timeout = absl::Seconds(1 + in_.Byte());
  const uint8_t events = in_.Byte();
  config_.max_events = events == 0 ? 200 : 1 + events % 40;
  config_.min_nodes = (events / 64) % 3;  // --min-nodes (0: never shrink), from the same byte
  config_.log = [this](const std::string& line) { OnLog(line); };
  for (int i = 0; i < world; ++i) {
    Worker w;
    w.node = i / per_node;
    w.local = i % per_node;
    w.lws = per_node;
    w.host = absl::StrCat("node", w.node);
    workers_.push_back(w);
  }
  job_ = std::make_unique<ddp::Job>(config_, &clock_);
}

size_t Harness::PickWorker() { return in_.Byte() % workers_.size(); }

// Mostly the worker's own rank; sometimes any number, as a confused or hostile client sends.
int Harness::RankFor(const Worker& w) {
  const uint8_t b = in_.Byte();
  if (b % 8 != 0 && w.rank >= 0) return w.rank;
  return static_cast<int>(static_cast<int8_t>(b)) % (config_.world_size + 2);
}

int Harness::PidFor(const Worker& w) {
  const uint8_t b = in_.Byte();
  if (b % 16 != 0) return w.pid();
  return static_cast<int>(in_.Int());
}

void Harness::Step() {
  static const char* const kNames[] = {"Register",   "Register",   "stray Register", "GetShard",
                                       "Heartbeat",  "Heartbeat",  "Heartbeat",      "Commit",
                                       "ReportDone", "ReportLost", "Rejoin",         "Stop",
                                       "short Tick", "Tick",       "long-gap Tick",  "bare Tick"};
  ddp::Job& job = *job_;
  const int op = in_.Byte() % 16;
  last_call_ = kNames[op];
  switch (op) {
    case 0:
    case 1: {  // a worker registers (a dead one is respawned first: a replacement)
      const size_t i = PickWorker();
      Worker& w = workers_[i];
      if (!w.alive) {
        ++w.incarnation;
        w.alive = true;
        w.rank = -1;
        w.generation = -1;
      }
      ddp::WorkerIdentity who;
      who.host = Host(in_, w.host);
      who.node_rank = w.node;
      who.local_rank = w.local;
      who.local_world_size = w.lws;
      who.pid = w.pid();
      who.nonce = in_.Byte() % 16 == 0 ? Garbage(in_) : config_.nonce;
      const absl::Status st = ddp::ValidateIdentity(who, config_.world_size);
      if (!st.ok()) {
        CheckStatusText(st, "identity");
        return;
      }
      job.Register(who, Callback(i));
      return;
    }
    case 2: {  // a stray registration: any launch place (within validation), any pid
      if (workers_.size() >= kMaxWorkers) return;
      Worker w;
      w.lws = 1 + in_.Byte() % config_.world_size;
      w.node = in_.Byte() % config_.world_size;
      w.local = in_.Byte() % w.lws;
      w.host = Garbage(in_);
      w.incarnation = 50 + static_cast<int>(workers_.size());
      ddp::WorkerIdentity who{w.host,  w.node,        w.local, w.lws,
                              w.pid(), config_.nonce, "",      std::nullopt};
      if (!ddp::ValidateIdentity(who, config_.world_size).ok()) return;
      workers_.push_back(w);
      job.Register(who, Callback(workers_.size() - 1));
      return;
    }
    case 3: {
      const Worker& w = workers_[PickWorker()];
      ddp::ShardRequest r;
      r.epoch = in_.Byte() % 4;
      r.dataset_size = in_.Bool() ? 1000 : in_.Int();
      r.seed = in_.Byte() % 2;
      r.shuffle = in_.Bool();
      r.drop_last = in_.Bool();
      if (in_.Bool()) {
        r.resume_consumed = in_.Int();
        r.resume_world_size = static_cast<int>(in_.Int());
      }
      if (!ddp::ValidateShardRequest(r).ok()) return;
      const auto a = job.GetShard(RankFor(w), PidFor(w), r);
      CheckStatusText(a.status(), "GetShard");
      return;
    }
    case 4:
    case 5:
    case 6: {
      const Worker& w = workers_[PickWorker()];
      ddp::ProgressReport p;
      p.phase = static_cast<ddp::WorkerPhase>(in_.Byte() % 5);
      p.step_phase = static_cast<ddp::StepPhase>(in_.Byte() % 9);
      p.phase_seconds = in_.Bool() ? in_.Byte() : in_.Double();
      p.epoch = in_.Byte() % 4;
      p.epochs = in_.Byte() % 4;
      p.step = in_.Bool() ? in_.Byte() : in_.Int();
      p.steps_per_epoch = in_.Byte();
      p.loss = in_.Double();
      p.samples_per_second = in_.Byte();
      p.stop_signaled = in_.Byte() % 16 == 0;
      if (!ddp::ValidateProgress(p).ok()) return;
      const auto r = job.Heartbeat(RankFor(w), PidFor(w), p);
      CheckStatusText(r.status(), "Heartbeat");
      if (r.ok()) {
        CheckText(r->reason, "heartbeat reason");
        CheckText(r->cause.text, "heartbeat cause");
      }
      return;
    }
    case 7: {
      const Worker& w = workers_[PickWorker()];
      ddp::CommittedCheckpoint c;
      c.epoch = in_.Byte() % 4;
      c.step = in_.Bool() ? in_.Byte() : in_.Int();
      c.consumed = in_.Bool() ? in_.Byte() : in_.Int();
      c.path = Garbage(in_);
      if (!ddp::ValidateCheckpoint(c).ok()) return;
      CheckStatusText(job.CommitCheckpoint(RankFor(w), PidFor(w), c), "CommitCheckpoint");
      return;
    }
    case 8: {  // FromProto(ReportDoneRequest), then ClampOutcome, as the service does
      const Worker& w = workers_[PickWorker()];
      const uint8_t kind = in_.Byte();
      std::string message = Garbage(in_);
      if (message.empty()) message = "worker failed";
      absl::Status outcome;
      if (kind % 4 == 1) {
        outcome = absl::CancelledError(message);
      } else if (kind % 4 >= 2) {
        outcome = absl::Status(static_cast<absl::StatusCode>(2 + kind % 15), message);
      }
      CheckStatusText(job.ReportDone(RankFor(w), PidFor(w), ddp::ClampOutcome(outcome)),
                      "ReportDone");
      return;
    }
    case 9: {  // the launcher reports its worker dead
      Worker& w = workers_[PickWorker()];
      ddp::LostWorker lost;
      lost.node_rank = w.node;
      lost.local_rank = w.local;
      lost.pid = PidFor(w);
      lost.what = ddp::ClampReason(Garbage(in_));
      if (in_.Bool()) {
        lost.signal = 1 + in_.Byte() % 31;
      } else {
        lost.exit_code = in_.Byte();
      }
      if (lost.pid == w.pid()) w.alive = false;
      const auto d = job.ReportLost(lost);
      CheckStatusText(d.status(), "ReportLost");
      if (d.ok()) CheckText(d->description, "lost decision");
      return;
    }
    case 10: {
      const size_t i = PickWorker();
      const Worker& w = workers_[i];
      ddp::RejoinRequest r;
      r.membership_generation =
          in_.Byte() % 8 != 0 ? std::max<int64_t>(0, w.generation) : in_.Byte();
      r.committed_step = in_.Byte();
      r.reason = ddp::ClampReason(Garbage(in_));
      job.Rejoin(RankFor(w), PidFor(w), r, Callback(i));
      return;
    }
    case 11: {
      const bool graceful = in_.Bool();
      const absl::Status st = job.Stop(graceful, ddp::ClampReason(Garbage(in_)));
      CheckStatusText(st, "Stop");
      return;
    }
    case 12:
      clock_.Advance(SmallDuration(in_, absl::Milliseconds(10)));
      job.Tick();
      return;
    case 13:
      clock_.Advance(SmallDuration(in_, absl::Milliseconds(250)));
      job.Tick();
      return;
    case 14: {  // a long gap: the heartbeat timeout, a suspended job, or days
      const uint8_t b = in_.Byte();
      clock_.Advance(b % 2 == 0 ? config_.heartbeat_timeout + absl::Seconds(1)
                                : absl::Seconds(static_cast<int64_t>(in_.U64(3))));
      job.Tick();
      return;
    }
    default:
      switch (in_.Byte() % 3) {
        case 0:
          job.Tick();
          return;
        case 1:
          StandBy();
          return;
        default:
          Fences();
          return;
      }
  }
}

// A node's task asks what to fence: its workers with their pids (sometimes stale ones), each
// order must name one of them.
void Harness::Fences() {
  last_call_ = "Fences";
  const int node = in_.Byte() % 4;
  std::vector<ddp::LiveWorker> live;
  for (Worker& w : workers_) {
    if (w.node == node && in_.Bool()) live.push_back({w.local, PidFor(w)});
  }
  const absl::Status valid = ddp::ValidateLiveWorkers(node, live);
  if (!valid.ok()) {
    CheckStatusText(valid, "live workers");
    return;
  }
  const auto orders = job_->Fences(node, live);
  CheckStatusText(orders.status(), "Fences");
  if (!orders.ok()) return;
  for (const ddp::FenceOrder& f : *orders) {
    CheckText(f.reason, "fence reason");
    FUZZ_CHECK(std::any_of(live.begin(), live.end(),
                           [&](const ddp::LiveWorker& w) {
                             return w.local_rank == f.local_rank && w.pid == f.pid;
                           }),
               absl::StrCat("Fences named local rank ", f.local_rank, " pid ", f.pid,
                            ", which the task did not name"));
  }
}

void Harness::StandBy() {
  last_call_ = "StandBy";
  ddp::SpareReport spare;
  spare.node_rank = in_.Byte() % 16;  // mostly beyond the job's nodes, sometimes one of them
  spare.local_world_size = 1 + in_.Byte() % 4;
  spare.host = Host(in_, "spare");
  spare.pid = 1000 + in_.Byte() % 4;
  spare.nonce = in_.Byte() % 16 == 0 ? Garbage(in_) : config_.nonce;
  const absl::Status valid = ddp::ValidateSpare(spare, config_.world_size);
  if (!valid.ok()) {
    CheckStatusText(valid, "spare");
    return;
  }
  const auto d = job_->StandBy(spare);
  CheckStatusText(d.status(), "StandBy");
  if (!d.ok()) return;
  CheckText(d->description, "spare decision");
  FUZZ_CHECK(
      d->action != ddp::SpareAction::kTakeOver ||
          (d->node_rank >= 0 && d->node_rank < config_.world_size),
      absl::StrCat("StandBy gave node ", d->node_rank, " of a world of ", config_.world_size));
}

void Harness::CheckStatus(const char* after) {
  const ddp::JobStatus s = job_->Status();
  const int world = s.world_size;  // smaller than the configured one once the job shrank
  FUZZ_CHECK(
      world >= 1 && world <= config_.world_size &&
          (config_.min_nodes > 0 || world == config_.world_size),
      absl::StrCat("world size ", world, " (configured ", config_.world_size, ") after ", after));
  CheckText(s.job_id, "job id");
  CheckText(ddp::JobStateName(s.state), "state");
  CheckText(s.failure.text, "failure");
  CheckText(s.stop_reason, "stop reason");
  CheckText(s.checkpoint_path, "checkpoint path");
  for (const std::string& e : s.events) CheckText(e, "event");
  for (const ddp::LostRank& l : s.lost_ranks) CheckText(l.cause.text, "lost rank cause");
  for (const ddp::RankStatus& r : s.ranks) CheckText(r.host, "host");

  FUZZ_CHECK(s.events.size() <= config_.max_events,
             absl::StrCat(s.events.size(), " events, cap ", config_.max_events, " after ", after));
  FUZZ_CHECK(s.restarts >= 0 && s.restarts <= config_.max_restarts, absl::StrCat(s.restarts));
  FUZZ_CHECK(s.lost_ranks.size() <= static_cast<size_t>(s.restarts) + 1,
             absl::StrCat(s.lost_ranks.size(), " lost ranks with ", s.restarts, " restarts"));
  FUZZ_CHECK(s.registered >= 0 && s.registered <= config_.world_size,
             absl::StrCat(s.registered, " registered of ", s.world_size));
  FUZZ_CHECK(s.ranks.size() <= static_cast<size_t>(world), absl::StrCat(s.ranks.size()));
  std::map<std::pair<int, int>, int> places;
  bool table = false;
  for (size_t i = 0; i < s.ranks.size(); ++i) {
    const ddp::RankStatus& r = s.ranks[i];
    if (r.rank >= 0) table = true;
    FUZZ_CHECK(r.rank == -1 || r.rank == static_cast<int>(i),
               absl::StrCat("row ", i, " is rank ", r.rank, " after ", after));
    const int seen = ++places[{r.node_rank, r.local_rank}];
    FUZZ_CHECK(seen == 1, absl::StrCat("node ", r.node_rank, " local ", r.local_rank, " twice"));
  }
  if (table) {
    FUZZ_CHECK(s.ranks.size() == static_cast<size_t>(world),
               absl::StrCat(s.ranks.size(), " rows in a world of ", world));
    for (const ddp::RankStatus& r : s.ranks) {
      FUZZ_CHECK(r.rank >= 0 && r.rank < world, absl::StrCat("rank ", r.rank, " in a table"));
    }
  }

  FUZZ_CHECK(s.state == announced_,
             absl::StrCat("state ", ddp::JobStateName(s.state), " but the last announced is ",
                          ddp::JobStateName(announced_), " after ", after));
  FUZZ_CHECK(s.finished == ddp::IsTerminal(s.state), ddp::JobStateName(s.state));
  FUZZ_CHECK(!was_finished_ || s.finished, absl::StrCat("un-finished by ", after));
  was_finished_ = s.finished;
  FUZZ_CHECK((s.state == ddp::JobState::kFailed) == !s.failure.empty(),
             absl::StrCat("state ", ddp::JobStateName(s.state), " with failure '", s.failure.text,
                          "' after ", after));
  FUZZ_CHECK(job_->Finished() == s.finished, after);
  // A failure ends every wait (Register, Rejoin): no callback is left behind.
  if (s.state == ddp::JobState::kFailed) {
    for (const std::shared_ptr<Pending>& p : pending_) {
      FUZZ_CHECK(p->answered, absl::StrCat("worker ", p->worker, " pid ", p->pid,
                                           " still waits in a FAILED job after ", after));
    }
  }
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [](const std::shared_ptr<Pending>& p) { return p->answered; }),
                 pending_.end());
}

void Harness::Run() {
  Configure();
  CheckStatus(last_call_);
  for (int call = 0; call < kMaxCalls && in_.remaining() > 0; ++call) {
    Step();
    if (trace_) {
      std::fprintf(stderr, "%s -> %s\n", last_call_, ddp::JobStateName(job_->Status().state));
    }
    CheckStatus(last_call_);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  Harness h(in);
  h.Run();
  return 0;
}
