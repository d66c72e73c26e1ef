// The job as the coordinator sees it: a thin facade that wires the parts and owns the lock order.
//   membership.h       registration, the barrier, deterministic ranks, who is missing
//   liveness.h         heartbeats, progress, rank states, lost ranks, the suspend-gap rule
//   shard_ledger.h     per-epoch shard agreement and resume positions
//   checkpoint_ledger.h the committed checkpoints
//   lifecycle.h        the state machine, the typed failure cause, stop reason, exit code; since
//                      when it registers, runs and stops; ranks done; a stop that cannot complete
//   recovery.h         the restart budget, the recovery in progress, the lost ranks, an early
//                      rejoin, the nodes known alive (node_tasks.h: fencing)
//   spares.h           spare nodes standing by and the lost nodes they take over
//   failure_causes.h   how each observation becomes a FailureCause
//   stall_watch.h      when and since when ranks are judged, the stalls found (stall_rule.h: the
//                      rule; step_pace.h: the pace)
//   straggler_watch.h  the ranks' scores from their step section times, the stragglers named
//   time_account.h     where the job's wall time went (ETTR)
//   published.h        what heartbeats and status readers read without the lock: the command,
//                      the announced generation, stalled ranks told to exit (exit_orders.h), and
//                      the versions
//   event_log.h        the bounded event list (and the log sink)
//   status_view.h      the JobStatus composed from the parts
// Pure domain logic: no gRPC, no threads of its own; callers validate what they pass in
// (coordinator/rpc/validation.h). Time comes from the injected Clock; the server calls Tick()
// periodically to detect lost ranks, stalled ranks, the registration deadline and a stop that
// did not complete in time. (Named Job because
// common/job_status.h already calls the state enum JobState.)
//
// Registration waits without a thread: Register and Rejoin take a callback that runs once the
// membership generation is complete (or the job fails). Callbacks and the log sink run without
// the lock held. In-job recovery (proto/coordinator.proto, RECOVERY) runs through ReportLost,
// Tick (silence, deadlines), Rejoin and Register: job_recovery.cc. Stalls and the stop deadline:
// job_stall.cc; stragglers and the time account: job_straggler.cc; spares: job_spares.cc; Restore:
// job_restore.cc; Status: job_view.cc.
//
// Thread safety: every public method is thread-safe. Job-wide state sits under `mu_`; each
// rank's progress and liveness sit in Liveness under that rank's own lock. Each generation's
// rank table is published as an immutable snapshot (Membership::table); Heartbeat takes only its
// rank's lock (and the snapshot's) and reads the current command, generation and exit orders
// from Published. Lock order: `mu_` before any Liveness lock and before ExitOrders' lock; neither
// of those is held while another lock is taken.
#ifndef SLURM_DDP_COORDINATOR_JOB_JOB_H_
#define SLURM_DDP_COORDINATOR_JOB_JOB_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/coordinator_api.h"
#include "common/failure_cause.h"
#include "common/job_status.h"
#include "coordinator/clock.h"
#include "coordinator/job/checkpoint_ledger.h"
#include "coordinator/job/completions.h"
#include "coordinator/job/event_log.h"
#include "coordinator/job/journal.h"
#include "coordinator/job/journal_sink.h"
#include "coordinator/job/lifecycle.h"
#include "coordinator/job/liveness.h"
#include "coordinator/job/membership.h"
#include "coordinator/job/published.h"
#include "coordinator/job/recovery.h"
#include "coordinator/job/shard_ledger.h"
#include "coordinator/job/spares.h"
#include "coordinator/job/stall_watch.h"
#include "coordinator/job/straggler_watch.h"
#include "coordinator/job/time_account.h"

namespace ddp {

// The largest world a coordinator takes (2^17: 98,304 ranks of 12,288 nodes of 8 fit; its status
// is then about 8 MB, under kMaxMessageBytes).
inline constexpr int kMaxWorldSize = 131072;

// A node named for the exclude list (--straggler-action exclude).
struct NodeExclusion {
  std::string node;     // its Slurm node name (SLURMD_NODENAME), else its host name
  std::string section;  // the straggler's cause: "data", "compute" or "optimizer"
  double relative_score = 1.0;
  int rank = -1;  // the straggler rank that named it
};

struct JobConfig {
  std::string job_id;
  int64_t generation = 0;
  std::string nonce;  // empty: registration does not check the nonce
  int world_size = 1;
  absl::Duration registration_timeout = absl::Seconds(300);
  absl::Duration heartbeat_timeout = absl::Seconds(10);
  // When Tick() finds more than this since the previous Tick(), the coordinator itself was not
  // running: its process was stopped (Slurm's `scontrol suspend` stops every process of a job,
  // the workers too) or frozen, or the host paused. That time is not counted as silence
  // against any rank, nor against the registration deadline. Infinite: every gap counts (the
  // caller does not tick regularly). ddp-coordinator ticks every 50 ms and uses 2 s.
  absl::Duration suspend_threshold = absl::InfiniteDuration();
  // In-job recovery: restarts the whole job may use (0: a lost rank fails the job), and how
  // long a recovery may take before the job fails naming who is missing.
  int max_restarts = 0;
  absl::Duration recovery_timeout = absl::Seconds(120);
  // Shrinking (--min-nodes): a node lost as a whole with no spare standing by is dropped, and
  // the job goes on with the others while at least this many nodes remain. 0: never.
  int min_nodes = 0;
  // The stall rule's budgets (stall_rule.h; --stall-timeout). A stalled rank fails the job
  // (kind kStall) while no restart is left; during a graceful stop it ends the stop at once.
  StallOptions stall;
  // Straggler detection (straggler_watch.h; --straggler-threshold, --straggler-window,
  // --straggler-action). A straggler is reported (status, an event, /metrics); with action
  // replace its node is handed to a spare standing by, with exclude it is passed to `exclude`.
  StragglerOptions straggler;
  // --straggler-action exclude: receives each node to leave out of the job's next allocation,
  // outside the job's lock (the coordinator appends it to <dist_file>.exclude). May be empty.
  std::function<void(const NodeExclusion&)> exclude;
  // A graceful stop not completed this long after it was asked for ends the job (--stop-timeout):
  // STOPPED when a checkpoint was committed, else FAILED naming the rank(s) holding it up; every
  // rank still running gets Command::kExit with the job's exit code.
  absl::Duration stop_timeout = absl::Seconds(60);
  size_t max_events = 200;
  // Receives one line per registration and state change (may be empty).
  std::function<void(const std::string&)> log;
  // Receives the rank table of each generation, one line per rank, in one call (may be empty:
  // `log` then gets the lines one by one).
  std::function<void(const std::vector<std::string>&)> log_lines;
  // Receives the state changes a restarted coordinator needs (journal_sink.h; not owned, must
  // outlive the job). Null: nothing is journaled.
  JournalSink* journal = nullptr;
  // A standby coordinator watches this one from the next node (ddp-coordinator --standby auto,
  // which ddp-trainer passes; trainer/launcher/standby.h): the status names it (its node and
  // host, and how far behind the journal's file it would start) once the job has two or more
  // nodes with ranks.
  bool standby = false;
};

class Job {
 public:
  using RegisterCallback = Membership::RegisterCallback;

  // `clock` must outlive this object. config.world_size must be in [1, kMaxWorldSize].
  Job(JobConfig config, const Clock* clock);
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Joins the world; `done` runs once every worker has joined (maybe before Register returns),
  // or with the error that ends the wait. A repeat from the same (host, pid) joins the same slot.
  void Register(const WorkerIdentity& who, RegisterCallback done);

  absl::StatusOr<ShardAssignment> GetShard(int rank, int pid, const ShardRequest& request);
  // With kAbort, the reply carries the job's FailureCause; with kExit, the exit code. A report
  // with stop_signaled starts a graceful stop while the job runs.
  absl::StatusOr<HeartbeatReply> Heartbeat(int rank, int pid, const ProgressReport& progress);
  absl::Status CommitCheckpoint(int rank, int pid, const CommittedCheckpoint& checkpoint);
  // `outcome` OK: the rank finished. CANCELLED: the rank checkpointed and stopped (after a
  // graceful stop; one arriving while RUNNING starts a graceful stop of the whole job, as when
  // Slurm signals a node before preemption). Any other error fails the job naming the rank
  // (kind by status code: failure_causes.h).
  absl::Status ReportDone(int rank, int pid, const absl::Status& outcome);
  // A launcher reports that its worker (node_rank, local_rank, pid) died without reporting
  // (killed by a signal, or a non-zero exit). With a restart left the job recovers (kRespawn);
  // otherwise it fails naming that rank (kStop). When the job already failed in the last
  // kRootCauseWindow because another rank reported an error itself (typically a collective
  // broken by this death), the death is the root cause: the failure is re-attributed to the dead
  // rank. A replacement that died before registering gets kWait. The decision describes the rank
  // ("rank 3 (host h, ...)").
  absl::StatusOr<LostDecision> ReportLost(const LostWorker& lost);
  static constexpr absl::Duration kRootCauseWindow = absl::Seconds(5);
  // How often workers heartbeat: 1 s up to 4,096 ranks, then world / 4,096 s, at most a quarter
  // of the heartbeat timeout, never under 1 s (proto/coordinator.proto, HEARTBEAT INTERVAL).
  static absl::Duration HeartbeatInterval(int world_size, absl::Duration heartbeat_timeout);
  // Worlds up to this size log every registration and rejoin; larger ones every tenth of the
  // world (and a recovery's first rejoin).
  static constexpr int kRegistrationsLoggedEach = 256;
  // A survivor (rank, pid) leaves its generation and joins the next; `done` runs once that is
  // complete, or with ABORTED and the job's failure when it cannot recover.
  void Rejoin(int rank, int pid, const RejoinRequest& request, RegisterCallback done);
  // A spare node's launcher stands by (proto/coordinator.proto, SPARES): kWait, kTakeOver with
  // the lost node it now replaces, or kLeave once the job is finished. INVALID_ARGUMENT when its
  // node id holds slots of the job; FAILED_PRECONDITION on a nonce mismatch (a stale dist_file).
  absl::StatusOr<SpareDecision> StandBy(const SpareReport& spare);
  // A node's task names the workers it runs (proto/coordinator.proto, FENCING): the reply names
  // those whose slot was vacated (lost by silence) while that very process still runs, so that
  // the task kills them before the slot is filled again. The call also keeps the node alive
  // (NodeTasks): it is not taken for a lost node while its task asks.
  absl::StatusOr<std::vector<FenceOrder>> Fences(int node_rank,
                                                 const std::vector<LiveWorker>& live);
  // A restarted coordinator takes over: the state its journal recorded (journal.h). With a rank
  // table the job is RUNNING (STOPPING with a stop recorded) in that membership generation, and
  // every rank has heartbeat_timeout from now to heartbeat again; without one the recorded
  // registrations are back and the others are awaited (their retried Register joins). A job
  // recorded as failed is failed again with its cause. Call once, before serving.
  // INVALID_ARGUMENT when the state does not fit the config.
  absl::Status Restore(const JournalState& state);

  // Which coordinator serves the job (the status's `coordinator`). Call before serving.
  void SetCoordinator(const CoordinatorInfo& info);
  // A standby coordinator took the job over because `node` (the node of the coordinator it
  // replaces) was lost as a whole (trainer/launcher/standby.h): its ranks are lost now, without
  // waiting for their heartbeats, and its workers are retired as a replaced straggler's are (a
  // stopped node that comes back is fenced, never rejoins). The job then recovers as from any
  // lost node: a spare takes the node over (rank 0's duties go with rank 0), --min-nodes shrinks
  // the job; otherwise, after kSpareWait, the other nodes go on without it only to write the
  // stop's checkpoint (exit 3, resumable), as when the coordinator is lost. Call after Restore,
  // before serving.
  void TakeOverFromLostNode(int node, int64_t epoch);
  // How long a node lost with the coordinator waits for a spare (spares stand by about once a
  // second) before, without --min-nodes, the other nodes write the stop's checkpoint (exit 3).
  static constexpr absl::Duration kSpareWait = absl::Seconds(5);
  // An event line from the process (the status's `events`).
  void Event(const std::string& line);

  // graceful: ask every rank to checkpoint and stop; otherwise abort the job now.
  absl::Status Stop(bool graceful, const std::string& reason);
  // The coordinator's server goes away with the job unfinished (its process is ending without
  // RunUntilDone: a failed start, a test): the job fails here so that every parked call is
  // answered, but the journal does not record it, since a coordinator restarted on the journal
  // is to take the job over, not to find it failed.
  void ShutDown(const std::string& reason);

  // Detects lost ranks, stalled ranks (at most every kStallCheckPeriod), the registration and
  // recovery deadlines, a rejoin that waited in vain for a loss, an overdue stop, and a journal
  // that failed or got stuck (an event; the status shows it in `journal`). Call periodically.
  void Tick();
  static constexpr absl::Duration kStallCheckPeriod = StallWatch::kCheckPeriod;

  JobStatus Status() const;
  bool Finished() const;
  // While a newer membership generation forms: the store prefix ("gen<S>/m<G>/", with its
  // slash) of the generation it replaces, whose process group can no longer form, so that the
  // server ends the store waits under it (KvStore::ClosePrefix) and its ranks rejoin at once
  // instead of waiting for a peer that is gone until the group's timeout. Empty otherwise.
  std::string SupersededStorePrefix() const;
  // Blocks until the job is terminal or `timeout` passes; returns Finished().
  bool WaitFinished(absl::Duration timeout) const;
  // Process exit code for the final state (Lifecycle::ExitCode): 0 SUCCEEDED, kExitResumable
  // STOPPED, kExitFailed otherwise.
  int ExitCode() const;
  // Bumped by every change, heartbeats included.
  uint64_t version() const { return published_.version(); }
  // Bumped only by structural changes (registrations, state changes, events, checkpoints,
  // ranks done): what a status reader must never miss. Heartbeats leave it alone.
  uint64_t major_version() const { return published_.major_version(); }
  const JobConfig& config() const { return config_; }
  // Before a reply: waits until what the job journaled so far is in the journal's file, at most
  // kJournalWriteWait (journal_sink.h AwaitWritten). Call without holding the job's lock.
  static constexpr absl::Duration kJournalWriteWait = absl::Milliseconds(200);
  void AwaitJournalWritten() const {
    if (config_.journal != nullptr) config_.journal->AwaitWritten(kJournalWriteWait);
  }

 private:
  Job(JobConfig config, const Clock* clock, absl::Time start);

  void CompleteRegistrationLocked(Completions* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Restore without the recorded failure (applied after it).
  absl::Status RestoreLocked(const JournalState& state, Completions* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A graceful stop in RUNNING (to STOPPING) or RECOVERING (kept until the new generation has
  // formed; no state change). False when the lifecycle refuses it.
  bool RequestGracefulStopLocked(const std::string& why, Completions* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // --- in-job recovery (job_recovery.cc) ------------------------------------------------------
  // `rank` of the current table is lost with `cause`: recover (kRespawn) or fail (kStop).
  LostAction LoseRankLocked(int rank, const FailureCause& cause, Completions* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts (or extends) the recovery: RECOVERING, the next generation being formed.
  void BeginRecoveryLocked(const FailureCause& cause, Completions* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The generation being formed is complete: publish it, RUNNING (or STOPPING) again.
  void CompleteRecoveryLocked(Completions* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tick's part: the recovery deadline, and a rejoin that waited kRootCauseWindow for a loss.
  void TickRecoveryLocked(absl::Time now, Completions* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // --- spares (job_spares.cc) -------------------------------------------------------------------
  // During a recovery: every node whose slots are all vacant, none of them reported by its
  // launcher, goes to a spare standing by (if any).
  void TakeOverLostNodesLocked(absl::Time now, Completions* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What heartbeats announce: the generation being formed (or the current one).
  void AnnounceGenerationLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records a state change the lifecycle just made ("job RUNNING: why") and mirrors its command.
  void StateChangedLocked(const std::string& why, Completions* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FAILED with `cause` (unless finished); queued registrations get `code` and its text. The
  // failure is journaled unless `journaled` is false.
  void FailLocked(const FailureCause& cause, absl::StatusCode code, absl::Time revisable_until,
                  Completions* out, bool journaled = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EventLocked(const std::string& line, Completions* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A change every status reader must see at once (EventLocked includes it).
  void ChangedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `rank` was heard from after the restore from the journal (true for no such rank).
  bool HeardSinceRestoreLocked(int rank) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new slot was taken: its event line (a large world logs every tenth of it only).
  void NoteRegistrationLocked(const WorkerIdentity& who, bool replacing, Completions* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `done`, with the heartbeat interval set in a successful assignment.
  RegisterCallback WithHeartbeatInterval(RegisterCallback done) const;
  void RankFinishedLocked(Completions* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SuspendedLocked(absl::Duration gap, Completions* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A heartbeat said its worker received a stop signal: a graceful stop while running.
  void StopSignaled(int rank) ABSL_LOCKS_EXCLUDED(mu_);
  // Observes the pace and applies the stall rule (stall_rule.h); acts on a stall.
  void JudgeStallsLocked(absl::Time now, Completions* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Each rank as the stall rule sees it; with `observe`, feeds the job's pace the ranks' steps.
  std::vector<RankView> RankViewsLocked(absl::Time now, bool observe)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // --- stragglers and the time account (job_straggler.cc) ---------------------------------------
  // At most every StragglerWatch::kCheckPeriod: feeds the watch every rank's section times,
  // names and clears stragglers (an event each), and charges the time account.
  void WatchTimeLocked(absl::Time now, Completions* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What the job is doing now, for the time account.
  TimeUseKind TimeUseLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // --straggler-action replace or exclude on the stragglers named now, each (node, cause) once;
  // a replacement not possible yet (a recovery under way) is tried again at the next check.
  void ActOnStragglersLocked(absl::Time now, Completions* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands `st`'s node to a spare standing by; false (and why, once per reason) when it cannot.
  // Loses every rank of `node` (cause `kind`, its description followed by `why`) and retires its
  // workers by (node, local rank, pid): Fences names them to their task, and a Rejoin, ReportDone
  // or ReportLost of theirs is refused, ignored or answered LEAVE. `retired` says why, to them
  // ("its node was handed to a spare (--straggler-action replace)").
  void RetireNodeLocked(int node, FailureKind kind, const std::string& why,
                        const std::string& retired, Completions* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why the worker (node, local rank, pid) was retired; nullptr when it was not.
  const std::string* RetiredLocked(int node, int local_rank, int pid) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ReplaceStragglerNodeLocked(const StragglerReport& st, absl::Time now, Completions* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Status: each rank's score, the stragglers, the step breakdown and the time use.
  void StragglerStatusLocked(absl::Time now, JobStatus* s) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // With a restart left: `rank` (stalled) gets kExit in its heartbeat replies, with `why`.
  void OrderExitLocked(int rank, const std::string& why, Completions* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends a graceful stop that cannot complete, naming `holdouts` (what = why it ends now):
  // STOPPED with a committed checkpoint, else FAILED; then every running rank gets kExit.
  void EndStopLocked(const std::vector<Stall>& holdouts, const std::string& what, Completions* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool FinishedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Tick's part: a journal that failed or got stuck (or came unstuck) becomes an event.
  void WatchJournalLocked(Completions* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const JobConfig config_;
  const Clock* const clock_;

  mutable absl::Mutex mu_;
  // Mutated under mu_; its rank table is read without mu_ once published (membership.h).
  Membership membership_;
  // Thread-safe on its own (per-rank locks); Start() runs under mu_ before publication.
  Liveness liveness_;
  Lifecycle lifecycle_ ABSL_GUARDED_BY(mu_);
  // Survivors that rejoined since the last generation formed (Rejoin's log lines at scale).
  int rejoined_ ABSL_GUARDED_BY(mu_) = 0;
  ShardLedger shards_ ABSL_GUARDED_BY(mu_);
  CheckpointLedger checkpoints_ ABSL_GUARDED_BY(mu_);
  EventLog events_ ABSL_GUARDED_BY(mu_);
  Recovery recovery_ ABSL_GUARDED_BY(mu_);
  Spares spares_ ABSL_GUARDED_BY(mu_);
  StallWatch stall_watch_ ABSL_GUARDED_BY(mu_);
  StragglerWatch straggler_watch_ ABSL_GUARDED_BY(mu_);
  TimeAccount time_account_ ABSL_GUARDED_BY(mu_);
  // --straggler-action: the (node, cause) pairs acted on (never twice without new evidence: a
  // new cause or, after a replacement, another machine), and the refusals already logged.
  std::set<std::pair<std::string, int>> straggler_acted_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> straggler_refusals_ ABSL_GUARDED_BY(mu_);
  // Workers of retired nodes (handed to a spare, or lost with the coordinator), as (node, local
  // rank, pid), and why: their task fences them (Fences) and is told to leave (ReportLost
  // answers kLeave).
  std::map<std::tuple<int, int, int>, std::string> retired_workers_ ABSL_GUARDED_BY(mu_);
  CoordinatorInfo coordinator_ ABSL_GUARDED_BY(mu_);
  // TakeOverFromLostNode: the node lost with the coordinator, and when (-1: none).
  int coordinator_lost_node_ ABSL_GUARDED_BY(mu_) = -1;
  absl::Time coordinator_lost_at_ ABSL_GUARDED_BY(mu_);
  // The journal's condition as last announced in an event.
  JournalCondition journal_noted_ ABSL_GUARDED_BY(mu_) = JournalCondition::kOk;
  // When Restore took over a rank table from the journal (InfinitePast: never). Until a slot's
  // holder is heard from after it, the job cannot tell a live holder from one whose loss was
  // reported to the coordinator before this one: Register answers that taken slot UNAVAILABLE
  // (retry) until the holder beats or is declared lost (HeardSinceRestoreLocked).
  absl::Time restored_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Thread-safe on its own; written under mu_ (the command mirrors lifecycle_).
  Published published_;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_JOB_H_
