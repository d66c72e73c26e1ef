// The set of child processes a launcher owns, driven by one work loop (ninja's SubprocessSet and
// DoWork): signals sent to this process and the ends of children come back as events, in order;
// the caller's failure policy decides what they mean and calls Forward, Stop or Respawn. Every
// stop escalates by itself (SIGTERM, grace, SIGKILL) and every wait is bounded: a child that
// survives even SIGKILL is reported and given up on (PR_SET_PDEATHSIG still kills it when this
// process ends).
//
// Thread safety: not thread-safe. Construct it on the thread that will call DoWork, before any
// other thread starts: it blocks the watched signals (and SIGCHLD) in that thread, so threads
// started later inherit the block and the signals wait for DoWork. The destructor stops every
// child still running (bounded), drops watched signals still pending and restores the mask.
#ifndef SLURM_DDP_TRAINER_LAUNCHER_SUPERVISOR_H_
#define SLURM_DDP_TRAINER_LAUNCHER_SUPERVISOR_H_

#include <signal.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainer/launcher/child_process.h"

namespace ddp {

struct ChildSpec {
  std::string name;  // for logs: "coordinator", "worker 2"
  SpawnOptions spawn;
  bool forward_signals = true;  // Forward() reaches this child
  // Signals the child starts with blocked (on top of this process's original mask); the child
  // unblocks them itself once it handles them.
  std::vector<int> blocked_at_start;
};

struct SupervisorEvent {
  enum class Kind {
    kSignal,     // this process received `signal`
    kExited,     // child `id` ended: `status`
    kAbandoned,  // child `id` still ran ChildProcess::kKillWait after SIGKILL; given up on
  };
  Kind kind;
  int signal = 0;
  int id = -1;
  std::optional<ExitStatus> status;
};

class Supervisor {
 public:
  // Longest a DoWork call sleeps between looks at the children (SIGCHLD usually wakes it first).
  static constexpr absl::Duration kTick = absl::Milliseconds(200);

  // Blocks `signals` and SIGCHLD in the calling thread; DoWork takes them synchronously.
  explicit Supervisor(std::vector<int> signals);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts a child; returns its id (0, 1, ... in the order of Start). The child starts with
  // the signal mask this process had before the Supervisor existed.
  absl::StatusOr<int> Start(ChildSpec spec);
  // Starts child `id` again with the same spec, once its previous run has ended.
  absl::Status Respawn(int id);
  // The same with another command line (kept for later respawns).
  absl::Status Respawn(int id, std::vector<std::string> argv);

  // Sends `sig` to every running child that takes forwarded signals.
  void Forward(int sig);
  // Starts stopping child `id` without waiting: SIGTERM and SIGCONT now; DoWork sends SIGKILL
  // once `grace` has passed. A second call never moves an earlier SIGKILL later.
  void Stop(int id, absl::Duration grace);
  // Kills child `id` now: SIGKILL to every process below it (found through /proc before any
  // dies, so none escapes by being re-parented), then to the child itself; DoWork reports its
  // end, or gives up on it after ChildProcess::kKillWait.
  void Kill(int id);

  // Waits until something happens (a watched signal, a child ended or was given up on), or
  // `deadline` passes; returns what happened, oldest first. With no child running and no
  // deadline (InfiniteFuture) it returns at once.
  std::vector<SupervisorEvent> DoWork(absl::Time deadline);
  // Waits for a watched signal (not SIGCHLD) until `deadline`, children or not: the signal, or
  // nullopt when the deadline passed first. For a launcher that has no child yet.
  std::optional<int> WaitForSignal(absl::Time deadline);

  // True until DoWork has reported the child's end (kExited or kAbandoned): a child reaped
  // meanwhile (by Stop, say) still counts as running, so no end is ever lost.
  bool running(int id) const;
  // Running children among `ids`.
  int CountRunning(const std::vector<int>& ids) const;
  const std::string& name(int id) const;
  pid_t pid(int id) const;   // of the current (or last) run
  int starts(int id) const;  // 1 after Start, +1 per Respawn

 private:
  struct Entry {
    ChildSpec spec;
    std::unique_ptr<ChildProcess> process;
    int starts = 0;
    absl::Time kill_at = absl::InfiniteFuture();     // SIGKILL due (Stop)
    absl::Time abandon_at = absl::InfiniteFuture();  // give up (SIGKILL sent)
    bool abandoned = false;
    bool reported = false;  // DoWork returned its kExited or kAbandoned event
  };
  absl::Status Launch(Entry* entry);
  bool AnyRunning() const;
  // Polls every running child and applies due SIGKILLs; appends events.
  void Check(std::vector<SupervisorEvent>* events);
  absl::Time NextEscalation() const;

  sigset_t watched_;
  sigset_t original_mask_;
  std::vector<Entry> entries_;
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_LAUNCHER_SUPERVISOR_H_
