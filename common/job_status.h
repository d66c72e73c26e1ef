// Status types shared by the coordinator, its HTTP endpoint and ddpctl, their JSON form (the
// `ddpctl status --json` contract in docs/architecture.md, "Status JSON": one object with job_id,
// state, world_size, registered, epoch, epochs, step, steps_per_epoch, loss, samples_per_second
// and a `ranks` list of {rank, host, local_rank, state, step, last_seen_seconds}; extended, never
// renamed), and the rules the screens show, decided here once and sent in the JSON: which rank
// is flagged and why (JudgeRank), whether its state is final (IsFinal), the job's exit code
// (JobExitCode). The dashboard and ddpctl render those fields; they never derive them.
//
// Every state is an enum here, in the proto and in C++; the JSON spells it with the names below.
// To add a job or rank state: a value here, its name in job_status.cc, the proto enum
// (proto/coordinator.proto) and its mapping in proto/convert.cc.
//
// Thread safety: plain values and pure functions; safe from any thread.
#ifndef SLURM_DDP_COMMON_JOB_STATUS_H_
#define SLURM_DDP_COMMON_JOB_STATUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/failure_cause.h"

namespace ddp {

// REGISTERING -> RUNNING (<-> RECOVERING) -> STOPPING -> STOPPED, or -> SUCCEEDED | FAILED.
// STOPPED (every rank checkpointed and stopped after a graceful stop; the job exits resumable)
// reads "STOPPING" with "finished": true in the JSON, as it always has (JobStateJsonName).
enum class JobState {
  kRegistering,
  kRunning,
  kRecovering,  // a rank is being replaced in place (wave 2: in-job recovery)
  kStopping,
  kStopped,
  kSucceeded,
  kFailed,
};
inline constexpr JobState kAllJobStates[] = {
    JobState::kRegistering, JobState::kRunning,   JobState::kRecovering, JobState::kStopping,
    JobState::kStopped,     JobState::kSucceeded, JobState::kFailed,
};

// "REGISTERING", "RUNNING", "RECOVERING", "STOPPING", "STOPPED", "SUCCEEDED", "FAILED".
const char* JobStateName(JobState state);
// The JSON contract's word: JobStateName, except kStopped -> "STOPPING" (with finished = true).
const char* JobStateJsonName(JobState state);
// SUCCEEDED, STOPPED, FAILED.
bool IsTerminal(JobState state);

// What one rank is doing, as the coordinator sees it.
enum class RankState {
  kRegistered,     // joined; the world is not complete yet
  kStarting,       // has its rank, no training progress yet
  kTraining,       //
  kEvaluating,     //
  kCheckpointing,  //
  kFinished,       // reported its last phase, ReportDone not yet received
  kDone,           // final: finished training
  kStopped,        // final: checkpointed and stopped after a graceful stop
  kFailed,         // final: reported an error
  kLost,           // final: died (signal, exit) or went silent
  kStalled,        // alive but stuck while its peers wait (wave 2: stall detection)
};
inline constexpr RankState kAllRankStates[] = {
    RankState::kRegistered,    RankState::kStarting, RankState::kTraining, RankState::kEvaluating,
    RankState::kCheckpointing, RankState::kFinished, RankState::kDone,     RankState::kStopped,
    RankState::kFailed,        RankState::kLost,     RankState::kStalled,
};
// "registered", "starting", "training", ..., "lost", "stalled".
const char* RankStateName(RankState state);
// done, stopped, failed, lost: the rank no longer works and its state no longer changes.
bool IsFinal(RankState state);

// Where inside a training step a rank is (reported with its progress; kNone until it says).
enum class StepPhase {
  kNone,
  kData,
  kForward,
  kBackward,
  kAllreduce,
  kOptimizer,
  kCheckpoint,
  kEval,
  kRecovery,
};
inline constexpr StepPhase kAllStepPhases[] = {
    StepPhase::kNone,       StepPhase::kData,      StepPhase::kForward,
    StepPhase::kBackward,   StepPhase::kAllreduce, StepPhase::kOptimizer,
    StepPhase::kCheckpoint, StepPhase::kEval,      StepPhase::kRecovery,
};
// "data", "forward", "backward", "allreduce", "optimizer", "checkpoint", "eval", "recovery";
// "none" for kNone (the JSON writes null).
const char* StepPhaseName(StepPhase phase);

// Why a screen points at a rank; at most one flag a rank, the first that applies in this order
// (JudgeRank; kStraggler before kBehind). kNone reads null in the JSON.
enum class RankFlag {
  kNone,
  kFailed,   // state failed
  kLost,     // state lost
  kStalled,  // state stalled
  kSilent,   // still working, but no heartbeat for over 2 heartbeat periods
  kBehind,   // still working, its step trails the working ranks' median (behind_by)
  // Still working, named a straggler (score.straggler: coordinator/job/straggler_watch.h).
  // Numbered last, judged before kBehind: in lockstep training a straggler's step does not trail.
  kStraggler,
};
inline constexpr RankFlag kAllRankFlags[] = {
    RankFlag::kNone,   RankFlag::kFailed, RankFlag::kLost,      RankFlag::kStalled,
    RankFlag::kSilent, RankFlag::kBehind, RankFlag::kStraggler,
};
// "none", "failed", "lost", "stalled", "silent", "behind", "straggler".
const char* RankFlagName(RankFlag flag);

// The sections of a training step that straggler detection times (coordinator/job/
// straggler_watch.h): loading data, compute (forward and backward), exposed communication (time
// spent waiting in collectives) and the optimizer.
enum class StepSection { kData, kCompute, kCommunication, kOptimizer };
inline constexpr int kNumStepSections = 4;
inline constexpr StepSection kAllStepSections[kNumStepSections] = {
    StepSection::kData, StepSection::kCompute, StepSection::kCommunication,
    StepSection::kOptimizer};
// "data", "compute", "communication", "optimizer".
const char* StepSectionName(StepSection section);

// A rank's scores over the recent steps (straggler_watch.h; docs/operations.md, "Stragglers").
// Busy time is a step's time less its exposed communication. Scores are 1 for the best.
struct RankScore {
  bool measured = false;    // false: too few recent steps (or a world of one) to score
  double relative = 1.0;    // the best rank's busy time per step over this rank's
  double individual = 1.0;  // this rank's own best busy time per step over its current one
  // Per section: the best rank's time per step over this rank's.
  double sections[kNumStepSections] = {1.0, 1.0, 1.0, 1.0};
  bool straggler = false;  // named a straggler (its relative score stayed under the threshold)
};
bool operator==(const RankScore& a, const RankScore& b);
inline bool operator!=(const RankScore& a, const RankScore& b) { return !(a == b); }

struct RankStatus {
  int rank = 0;  // -1 while the world is not complete
  std::string host;
  int node_rank = 0;
  int local_rank = 0;
  int pid = 0;
  RankState state = RankState::kStarting;
  StepPhase phase = StepPhase::kNone;
  double phase_seconds = 0.0;  // time in `phase`, as the rank last reported it
  int64_t epoch = 0;
  int64_t step = 0;
  double loss = 0.0;
  double samples_per_second = 0.0;
  double last_seen_seconds = 0.0;  // since the last heartbeat (or registration)
  // Decided, not observed: DecideStatus (or FromJson) fills them; ToJson decides them afresh.
  RankFlag flag = RankFlag::kNone;
  int64_t behind_by = 0;  // steps behind the working ranks' median; 0 when not behind
  bool final = false;     // IsFinal(state)
  RankScore score;        // JSON `score`: null unless measured
};

// A rank the job lost (in-job recovery): its typed cause, when, and whether a later membership
// generation has a worker in its place.
struct LostRank {
  FailureCause cause;       // cause.rank is the lost rank
  double at_seconds = 0.0;  // job uptime when it was lost
  bool replaced = false;
};

// How many ranks are in one step phase (the peers of a stalled rank, by phase).
struct PhaseCount {
  StepPhase phase = StepPhase::kNone;
  int ranks = 0;
};

// A rank that sits in a working phase (data, forward, backward, optimizer, checkpoint, eval)
// past its budget while its peers wait in a collective (coordinator/job/stall_rule.h).
// `rank` is -1 when no rank is stalled.
struct StallReport {
  int rank = -1;
  StepPhase phase = StepPhase::kNone;
  double seconds = 0.0;           // time the rank has been in `phase`
  double budget_seconds = 0.0;    // the budget it went past
  std::vector<PhaseCount> peers;  // what the other working ranks are doing, by phase
  bool present() const { return rank >= 0; }
};

// A rank named a straggler: its relative score stayed under --straggler-threshold for
// --straggler-window. `section` is the cause: the section whose time per step exceeds the best
// rank's the most.
struct StragglerReport {
  int rank = -1;
  std::string host;
  int node_rank = 0;
  StepSection section = StepSection::kCompute;
  double relative_score = 1.0;  // the rank's relative score (RankScore::relative)
  double slower = 1.0;          // its time in `section` per step over the best rank's
  double since_seconds = 0.0;   // job uptime when its score went under the threshold
  double seconds = 0.0;         // how long it has been under the threshold
};

// Why `s` is a straggler, for people: "compute 1.9x slower than the best rank for 42 s (relative
// score 0.52)".
std::string StragglerReason(const StragglerReport& s);

// Where a step's time goes: the slowest rank's (largest busy time) seconds per step in each
// section, and the spread of each section across the ranks (largest less smallest).
struct StepBreakdown {
  int rank = -1;  // the slowest rank; -1: not measured
  double seconds[kNumStepSections] = {0, 0, 0, 0};
  double spread[kNumStepSections] = {0, 0, 0, 0};
  double step_seconds() const { return seconds[0] + seconds[1] + seconds[2] + seconds[3]; }
  bool measured() const { return rank >= 0; }
};

// Where the job's wall time since its start went (coordinator/job/time_account.h): training
// (steps that count), start-up (until the first step), recoveries (and steps done again after
// one), stalls, checkpoints, evaluation, and other (a graceful stop). The parts add up to wall.
struct TimeUse {
  double wall = 0, training = 0, startup = 0, recovery = 0, stall = 0, checkpoint = 0,
         evaluation = 0, other = 0;
  // Effective training time ratio: training over wall; -1 before any time passed.
  double ettr() const { return wall > 0 ? training / wall : -1.0; }
};

// Which coordinator serves the job (docs/architecture.md, "Standby coordinator"): its epoch (0:
// task 0's; +1 per takeover by a standby, so it also counts the takeovers), the node whose task
// runs it, and that node's host. And its standby, when one watches it (ddp-trainer --standby
// auto in a job of two or more nodes): the next node, (node + 1) mod nodes, that node's host, and
// how many journal records it would miss if it took over now (the records appended but not yet
// in the journal's file, which is what the standby reads: JournalHealth::pending).
struct CoordinatorInfo {
  int64_t epoch = 0;
  int node = 0;
  std::string host;
  int standby_node = -1;  // -1: no standby
  std::string standby_host;
  int64_t standby_behind_records = 0;
  int64_t takeovers() const { return epoch; }
  bool has_standby() const { return standby_node >= 0; }
};

// Whether the coordinator's journal (coordinator/job/journal.h) still records the job: what a
// restarted coordinator would take over from. kNone: the coordinator keeps no journal.
enum class JournalCondition {
  kNone,
  kOk,
  kStuck,   // a write or fdatasync has not returned for a while; records wait in memory
  kFailed,  // a write or fdatasync failed: records are dropped, the coordinator cannot restart
};
inline constexpr JournalCondition kAllJournalConditions[] = {
    JournalCondition::kNone, JournalCondition::kOk, JournalCondition::kStuck,
    JournalCondition::kFailed};
// "none", "ok", "stuck", "failed".
const char* JournalConditionName(JournalCondition condition);

struct JournalHealth {
  JournalCondition state = JournalCondition::kNone;
  std::string error;           // why it failed (empty unless kFailed)
  int64_t records = 0;         // appended since this coordinator started
  int64_t pending = 0;         // appended, not yet written and synced
  int64_t dropped = 0;         // appended after it failed: never written
  double stuck_seconds = 0.0;  // age of the write or fdatasync in flight (kStuck)
};

struct JobStatus {
  std::string job_id;
  JobState state = JobState::kRegistering;
  bool finished = false;  // IsTerminal(state)
  int64_t generation = 0;
  int world_size = 0;
  int registered = 0;
  int num_nodes = 0;
  int64_t epoch = 0;
  int64_t epochs = 0;
  int64_t step = 0;  // the slowest live rank's global step
  int64_t steps_per_epoch = 0;
  double loss = 0.0;                // mean over ranks' recent loss
  double samples_per_second = 0.0;  // summed over ranks
  double eta_seconds = -1.0;        // -1 when unknown
  double uptime_seconds = 0.0;
  FailureCause failure;           // why the job failed (empty unless FAILED)
  std::string stop_reason;        // why a graceful stop was asked (empty unless STOPPING/STOPPED)
  int64_t checkpoint_epoch = -1;  // last committed checkpoint (-1 when none)
  int64_t checkpoint_step = 0;
  std::string checkpoint_path;
  std::vector<RankStatus> ranks;
  std::vector<std::string> events;  // recent state changes, oldest first ("+12.3s what")
  // In-job recovery (wave 2).
  int restarts = 0;                     // job-wide restarts used
  int max_restarts = 0;                 // --max-restarts
  double last_recovery_seconds = -1.0;  // loss -> new membership generation; -1 when none yet
  int64_t membership_generation = 0;    // the coordinator's rank-table generation
  std::vector<LostRank> lost_ranks;     // in the order they were lost
  int spare_nodes = 0;                  // spare nodes standing by (--spare-nodes), none taken
  // The rank stalled longest (each stalled rank's state is kStalled); absent when none. Kept
  // once the job has ended because of it.
  StallReport stall;
  // The coordinator's journal; JSON `journal`: null when there is none, else {state, error,
  // records, pending, dropped, stuck_seconds}.
  JournalHealth journal;
  // JSON `coordinator`: {epoch, node, host, takeovers, standby}.
  CoordinatorInfo coordinator;
  // Decided, not observed: the process exit code the job ends with (JobExitCode) once it has
  // ended, -1 before (the JSON's null). DecideStatus (or FromJson) fills it.
  int exit_code = -1;
  // Straggler detection (wave 3): the ranks named stragglers (JSON `stragglers`, empty when
  // none), where a step's time goes (JSON `breakdown`, null until measured), and where the job's
  // wall time went (JSON `ettr` and `time_use`).
  std::vector<StragglerReport> stragglers;
  StepBreakdown breakdown;
  TimeUse time_use;
};

// The screens' rules, decided once (docs/architecture.md, "Status JSON"). A rank still working
// (not final, rank >= 0) is behind when its step trails the median step of the working ranks by
// more than max(2, median / 100) (ranks heartbeat at different moments, so a small gap is
// normal), and silent when its last heartbeat is older than two heartbeat periods.
inline constexpr double kHeartbeatPeriodSeconds = 1.0;
struct RankVerdict {
  RankFlag flag = RankFlag::kNone;
  int64_t behind_by = 0;  // saturating; 0 when not behind
  bool final = false;
};
inline bool operator==(const RankVerdict& a, const RankVerdict& b) {
  return a.flag == b.flag && a.behind_by == b.behind_by && a.final == b.final;
}
inline bool operator!=(const RankVerdict& a, const RankVerdict& b) { return !(a == b); }
// Median step over ranks still working (0 when none).
int64_t MedianStep(const JobStatus& status);
RankVerdict JudgeRank(const RankStatus& rank, int64_t median_step);
// The process exit code a job in `state` ends with (common/exit_codes.h): kExitOk when
// SUCCEEDED, kExitResumable when STOPPED, kExitFailed otherwise.
int JobExitCode(JobState state);
// Fills every rank's flag, behind_by and final and the job's exit_code from the rest of
// `status`: what ToJson writes. For a status that came without them (GetStatus's protobuf).
void DecideStatus(JobStatus* status);

// --- The JSON (job_status_json.cc, written and read with nlohmann/json) ----------------------

// JSON string literal (with quotes) for `s`: escapes quotes, backslashes and control characters;
// valid UTF-8 passes through, and each byte that is not valid UTF-8 becomes U+FFFD, so the
// result is always valid JSON whatever the bytes.
std::string JsonQuote(absl::string_view s);

// One JSON object, on one line, with the rules decided (DecideStatus's fields are decided
// afresh, never copied from `status`). The fields, in order, are listed in
// docs/architecture.md, "Status JSON". A number is the shortest text of its value rounded to six
// significant digits (an integral one without a fraction), null when not finite.
std::string ToJson(const JobStatus& status);
// The same with the `ranks` array already rendered (status.ranks is not read), written over
// `*out` (its capacity is kept): a snapshot built incrementally (coordinator/ops/status_render.h)
// renders only the ranks that changed, into the buffers of an earlier snapshot.
void ToJson(const JobStatus& status, absl::string_view ranks_json, std::string* out);
// One rank's object in ToJson's `ranks`, with `verdict` (JudgeRank), is head + its
// last_seen_seconds + tail; the number as AppendJsonNumber writes it.
void RankJsonParts(const RankStatus& rank, const RankVerdict& verdict, std::string* head,
                   std::string* tail);
void AppendJsonNumber(double v, std::string* out);

// Reads what ToJson writes, the decided fields included as they are (a screen shows them; it
// does not decide them again). Fields it does not know are ignored and missing ones keep their
// defaults; a name it does not know reads as the proto's fallback (job state FAILED, rank state
// starting, step phase none, failure cause worker_error, flag none). INVALID_ARGUMENT when `json`
// is not a JSON object or a known field has the wrong type.
absl::StatusOr<JobStatus> FromJson(absl::string_view json);

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_JOB_STATUS_H_
