// Sends a worker's progress to the coordinator from a background thread and carries back the
// coordinator's commands. Update() never blocks the training step: it overwrites a one-slot
// mailbox (the bounded queue) that the reporter thread heartbeats about once a second.
//
// Membership generations (in-job recovery): every reply names the newest generation; once it is
// newer than the worker's own (SetOwnGeneration), newer_generation() turns true and the callback
// given to OnNewerGeneration runs once on the reporter thread (to abort a communicator that a
// collective may be blocked on).
//
// Commands: CHECKPOINT_AND_STOP sets stop_requested(); ABORT sets abort_reason() (updated by
// every later ABORT reply: the coordinator may name the root cause a moment later). When an
// abort is not acted on within `abort_grace` (the training thread may be blocked inside a
// collective whose peer is gone), the reporter prints the reason and ends the process with
// kExitAborted: a dead rank never leaves the others waiting for NCCL's or Gloo's own timeout.
// EXIT (the job ended while this rank could not act, e.g. a graceful stop that timed out) ends
// the process at once with the reply's exit code.
//
// A lost coordinator (--coordinator-grace): unanswered_for() is how long the coordinator has
// been continuously unreachable, from the sending of the oldest heartbeat that is still
// unanswered (failed, or stuck in flight) to now; zero once a heartbeat is answered. When it
// exceeds `coordinator_grace`, coordinator_lost() turns true and stays true (so do a
// MarkCoordinatorLost() by the training thread, which learned it from a peer). Time this process
// was not running (a job suspend) does not count: see heartbeat_deadline. From then on no
// heartbeat is sent (the training loop agrees with its peers through the process group, writes
// the stop checkpoint and exits resumable, without the coordinator). If the process still runs
// `lost_stop_timeout` after the loss, the reporter prints why and ends it with kExitAborted (a
// heartbeat in flight at the loss can delay this by the client's RPC deadline).
//
// Phases: the training thread calls MarkPhase() at each transition of a step (one relaxed atomic
// store of phase and time, no host sync); each heartbeat carries the phase and the time in it, so
// the coordinator sees a rank stuck in one phase although its heartbeats keep coming. The same
// marks time the sections of the steps (straggler detection): each mark adds the time since the
// previous one to the previous phase's section (data; forward and backward: compute; a
// collective wait: communication; optimizer, and what the loop does after it until the next
// step: optimizer; checkpoint, eval and recovery: none), and entering the optimizer counts a
// step. Heartbeats carry the totals since start (ProgressReport::sections). A stop
// signal the worker received (WatchStopSignal) is carried too: the coordinator turns it into a
// graceful stop of the job, which then ends within its --stop-timeout even if a rank is stuck.
//
// Thread safety: all public methods are safe from any thread.
#ifndef SLURM_DDP_TRAINER_WORKER_PROGRESS_REPORTER_H_
#define SLURM_DDP_TRAINER_WORKER_PROGRESS_REPORTER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/coordinator_api.h"

namespace ddp {

struct ProgressReporterOptions {
  absl::Duration period = absl::Seconds(1);
  // The coordinator is lost once it has not answered for this long (--coordinator-grace).
  absl::Duration coordinator_grace = absl::Seconds(60);
  // A stop for a lost coordinator ends within this, or the process exits kExitAborted
  // (--stop-timeout).
  absl::Duration lost_stop_timeout = absl::Seconds(60);
  // The longest a heartbeat call takes (the client's RPC deadline, retries included). A call, or
  // the wait between two, that overruns its time by more than `suspend_margin` means that this
  // process was not running (SIGSTOP, a suspended job): that time is not counted as the
  // coordinator's, the unreachable time starts again.
  absl::Duration heartbeat_deadline = absl::InfiniteDuration();
  absl::Duration suspend_margin = absl::Seconds(2);
  absl::Duration abort_grace = absl::Seconds(3);
  // A survivor still waiting in a collective this long after a newer membership generation was
  // announced ends itself (kExitFailed), so that its launcher replaces it: the announcement
  // aborts an NCCL group and gives up a wait on a Gloo collective (dist_errors.h), and the peer
  // waited for was declared lost and fenced (killed); a wait that still lasts is stuck beyond
  // both (a group build, a communicator whose abort does not return).
  absl::Duration rejoin_grace = absl::Seconds(15);
  std::string log_prefix;  // "[rank 3] "
};

class ProgressReporter {
 public:
  ProgressReporter(CoordinatorApi* api, ProgressReporterOptions options);
  ~ProgressReporter();  // stops the thread (sends nothing more)
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  // The report's step_phase and phase_seconds are replaced by MarkPhase's when one was marked.
  void Update(const ProgressReport& report);
  // The report Update() last stored (e.g. to change only its phase).
  ProgressReport latest() const;
  // The training thread enters `phase` now. Cheap: one atomic store.
  void MarkPhase(StepPhase phase);
  // The phase last marked (kNone before the first mark).
  StepPhase phase() const;
  // A collective wait begins (true) or ends (false), on any thread: the phase is kAllreduce
  // meanwhile, then again the phase it interrupted (timed from the end of the wait).
  void MarkCollectiveWait(bool waiting);
  // Heartbeats report `*flag` (set by a signal handler) as stop_signaled. `flag` must outlive
  // this reporter.
  void WatchStopSignal(const std::atomic<bool>* flag) { stop_signal_.store(flag); }
  // Sends the latest report now (e.g. the final phase) and waits for the reply.
  void Flush();

  bool stop_requested() const { return stop_requested_.load(); }
  std::optional<std::string> abort_reason() const;
  // Why the job is aborting, typed (the coordinator's FailureCause). abort_reason() is its text.
  std::optional<FailureCause> abort_cause() const;
  // Called by the training thread once it has acted on an abort (disarms the forced exit).
  void AcknowledgeAbort() { abort_acknowledged_.store(true); }

  // The membership generation this worker belongs to (set at start and after each rejoin).
  void SetOwnGeneration(int64_t generation);
  // The newest generation a heartbeat reply announced.
  int64_t announced_generation() const { return announced_generation_.load(); }
  // A newer generation than this worker's own is forming: leave the process group and rejoin.
  bool newer_generation() const { return announced_generation() > own_generation_.load(); }
  // `callback` runs on the reporter thread each time a reply first announces a generation newer
  // than the own one. Must be thread-safe and quick; replaces an earlier one (nullptr: none).
  void OnNewerGeneration(std::function<void()> callback);
  // How long the coordinator has been continuously unreachable (see the top); zero while it
  // answers.
  absl::Duration unanswered_for() const;
  // unanswered_for() for people: "2.3s".
  std::string unanswered_text() const;
  // The coordinator has not answered for longer than the grace, or MarkCoordinatorLost() was
  // called; once true, stays true and no more heartbeats are sent.
  bool coordinator_lost() const;
  // The coordinator has not answered for a while (the grace or three periods, the shorter), a
  // call found it unreachable since its last answer, or it is lost: a call to it now would
  // likely wait for the RPC deadline.
  bool coordinator_silent() const;
  // The ranks agreed that the coordinator is lost (a peer's grace ran out first).
  void MarkCoordinatorLost();
  // Another call found the coordinator unreachable (UNAVAILABLE after its retries): it is
  // silent until a heartbeat is answered again.
  void NoteUnreachable();

  // One heartbeat now, on the caller's thread (the periodic ones go on): a worker that has just
  // rejoined learns the job's command (a stop asked during the recovery) before its next step,
  // not up to a period later.
  void SendNow() { SendOnce(/*now=*/true); }

 private:
  void Loop();
  // `wait_on_it`: the caller waits on it (CoordinatorApi::HeartbeatNow: a node's relay does not
  // batch it).
  void SendOnce(bool wait_on_it = false);
  // MarkPhase; `new_step`: entering kOptimizer counts a step (not when a collective wait ends).
  void Mark(StepPhase phase, bool new_step);
  // Fills step_phase and phase_seconds from the last MarkPhase (if any), and the section totals.
  void AddPhase(ProgressReport* report) const;
  // The section totals so far (not the time in the phase now: it is added when it ends).
  SectionTotals sections() const;
  int64_t NanosSinceStart() const;
  // Latches the loss when the grace has run out; returns whether the coordinator is lost.
  bool CheckLostLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the process when a lost coordinator's stop ran past lost_stop_timeout.
  void EnforceLostStopDeadline();
  // Ends the process when it still waits in a collective rejoin_grace after a newer generation
  // was announced.
  void EnforceRejoinDeadline();

  CoordinatorApi* const api_;
  const ProgressReporterOptions options_;
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> abort_acknowledged_{false};
  std::atomic<int64_t> own_generation_{0};
  std::atomic<int64_t> announced_generation_{0};
  absl::Mutex callback_mu_;
  std::function<void()> on_newer_generation_ ABSL_GUARDED_BY(callback_mu_);
  int64_t notified_generation_ ABSL_GUARDED_BY(callback_mu_) = 0;
  std::atomic<const std::atomic<bool>*> stop_signal_{nullptr};
  // The phase in the top 8 bits, the steady-clock nanoseconds since start_ when it began below;
  // 0: never marked.
  std::atomic<uint64_t> phase_mark_{0};
  std::atomic<StepPhase> interrupted_{StepPhase::kNone};  // the phase a collective wait interrupted
  // Nanoseconds in each step section (by StepSection) and the steps counted, since start.
  std::atomic<int64_t> section_nanos_[kNumStepSections] = {};
  std::atomic<int64_t> section_steps_{0};
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  absl::Mutex send_mu_;  // serializes heartbeats from Loop() and Flush()
  mutable absl::Mutex mu_;
  ProgressReport latest_ ABSL_GUARDED_BY(mu_);
  std::optional<FailureCause> abort_cause_ ABSL_GUARDED_BY(mu_);
  absl::Time abort_since_ ABSL_GUARDED_BY(mu_);
  // When a heartbeat reply first announced a generation newer than the own one (reset once the
  // worker has caught up).
  std::optional<absl::Time> newer_since_ ABSL_GUARDED_BY(mu_);
  // When the oldest heartbeat not answered yet was sent (nullopt: the last one was answered).
  std::optional<absl::Time> unanswered_since_ ABSL_GUARDED_BY(mu_);
  bool call_unreachable_ ABSL_GUARDED_BY(mu_) = false;  // NoteUnreachable since the last answer
  // When the heartbeat in flight was sent (nullopt: none is).
  std::optional<absl::Time> in_flight_since_ ABSL_GUARDED_BY(mu_);
  // When the coordinator was found lost (nullopt: it is not). Latched by const queries too.
  mutable std::optional<absl::Time> lost_since_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_WORKER_PROGRESS_REPORTER_H_
