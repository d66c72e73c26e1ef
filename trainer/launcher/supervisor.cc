#include "trainer/launcher/supervisor.h"

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ddp {

Supervisor::Supervisor(std::vector<int> signals) {
  sigemptyset(&watched_);
  for (int sig : signals) sigaddset(&watched_, sig);
  sigaddset(&watched_, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &watched_, &original_mask_);
}

Supervisor::~Supervisor() {
  // Stop every running child at once, so the whole set ends within one grace period plus
  // ChildProcess::kKillWait, not one per child.
  absl::Duration grace = absl::ZeroDuration();
  for (Entry& e : entries_) {
    if (e.process == nullptr || !e.process->running() || e.abandoned) continue;
    e.process->Signal(SIGTERM);
    e.process->Signal(SIGCONT);
    grace = std::max(grace, e.process->options().stop_grace);
  }
  for (const absl::Duration wait : {grace, ChildProcess::kKillWait}) {
    const absl::Time deadline = absl::Now() + wait;
    for (Entry& e : entries_) {
      if (e.process != nullptr && !e.abandoned) e.process->WaitUntil(deadline);
    }
    for (Entry& e : entries_) {
      if (e.process != nullptr && !e.abandoned) e.process->Signal(SIGKILL);
    }
  }
  for (Entry& e : entries_) {
    if (e.process != nullptr && e.process->running()) e.process->Abandon();
  }
  entries_.clear();
  // A watched signal that arrived after the last DoWork was meant for the children, which are
  // gone: drop it rather than let its default action end this process once unblocked.
  timespec zero{0, 0};
  while (sigtimedwait(&watched_, nullptr, &zero) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &original_mask_, nullptr);
}

absl::Status Supervisor::Launch(Entry* entry) {
  SpawnOptions spawn = entry->spec.spawn;
  sigset_t mask = original_mask_;
  for (int sig : entry->spec.blocked_at_start) sigaddset(&mask, sig);
  spawn.child_mask = mask;
  auto process = ChildProcess::Spawn(std::move(spawn));
  if (!process.ok()) return process.status();
  entry->process = *std::move(process);
  ++entry->starts;
  entry->kill_at = absl::InfiniteFuture();
  entry->abandon_at = absl::InfiniteFuture();
  entry->abandoned = false;
  entry->reported = false;
  return absl::OkStatus();
}

absl::StatusOr<int> Supervisor::Start(ChildSpec spec) {
  Entry entry;
  entry.spec = std::move(spec);
  if (absl::Status launched = Launch(&entry); !launched.ok()) {
    return absl::Status(launched.code(), absl::StrCat(entry.spec.name, ": ", launched.message()));
  }
  entries_.push_back(std::move(entry));
  return static_cast<int>(entries_.size()) - 1;
}

absl::Status Supervisor::Respawn(int id) {
  Entry& e = entries_.at(static_cast<size_t>(id));
  if (running(id)) {
    return absl::FailedPreconditionError(absl::StrCat(e.spec.name, " is still running"));
  }
  if (e.abandoned) {
    return absl::FailedPreconditionError(
        absl::StrCat(e.spec.name, " outlived SIGKILL; not starting it again"));
  }
  return Launch(&e);
}

absl::Status Supervisor::Respawn(int id, std::vector<std::string> argv) {
  if (running(id)) return Respawn(id);  // refused: still running
  entries_.at(static_cast<size_t>(id)).spec.spawn.argv = std::move(argv);
  return Respawn(id);
}

void Supervisor::Forward(int sig) {
  for (Entry& e : entries_) {
    if (e.spec.forward_signals && !e.reported) e.process->Signal(sig);
  }
}

void Supervisor::Stop(int id, absl::Duration grace) {
  Entry& e = entries_.at(static_cast<size_t>(id));
  if (!running(id)) return;
  e.process->Signal(SIGTERM);
  e.process->Signal(SIGCONT);
  e.kill_at = std::min(e.kill_at, absl::Now() + grace);
}

void Supervisor::Kill(int id) {
  Entry& e = entries_.at(static_cast<size_t>(id));
  if (!running(id) || !e.process->running()) return;
  for (pid_t d : Descendants(e.process->pid())) ::kill(d, SIGKILL);
  e.process->Signal(SIGKILL);
  const absl::Time now = absl::Now();
  e.kill_at = std::min(e.kill_at, now);
  if (e.abandon_at == absl::InfiniteFuture()) e.abandon_at = now + ChildProcess::kKillWait;
}

bool Supervisor::running(int id) const { return !entries_.at(static_cast<size_t>(id)).reported; }

int Supervisor::CountRunning(const std::vector<int>& ids) const {
  return static_cast<int>(
      std::count_if(ids.begin(), ids.end(), [this](int id) { return running(id); }));
}

const std::string& Supervisor::name(int id) const {
  return entries_.at(static_cast<size_t>(id)).spec.name;
}

pid_t Supervisor::pid(int id) const { return entries_.at(static_cast<size_t>(id)).process->pid(); }

int Supervisor::starts(int id) const { return entries_.at(static_cast<size_t>(id)).starts; }

bool Supervisor::AnyRunning() const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (running(static_cast<int>(i))) return true;
  }
  return false;
}

absl::Time Supervisor::NextEscalation() const {
  absl::Time next = absl::InfiniteFuture();
  for (const Entry& e : entries_) {
    if (!e.process->running() || e.abandoned) continue;
    next = std::min({next, e.kill_at, e.abandon_at});
  }
  return next;
}

void Supervisor::Check(std::vector<SupervisorEvent>* events) {
  const absl::Time now = absl::Now();
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    const int id = static_cast<int>(i);
    if (e.reported) continue;
    if (e.process->Poll()) {  // ended now, or reaped earlier by a Signal: reported either way
      e.reported = true;
      events->push_back({SupervisorEvent::Kind::kExited, 0, id, e.process->exit_status()});
      continue;
    }
    if (now >= e.abandon_at) {
      e.abandoned = true;
      e.reported = true;
      e.process->Abandon();
      events->push_back({SupervisorEvent::Kind::kAbandoned, 0, id, std::nullopt});
    } else if (now >= e.kill_at && e.abandon_at == absl::InfiniteFuture()) {
      e.process->Signal(SIGKILL);
      e.abandon_at = now + ChildProcess::kKillWait;
    }
  }
}

std::optional<int> Supervisor::WaitForSignal(absl::Time deadline) {
  while (true) {
    const absl::Duration wait = deadline - absl::Now();
    if (wait <= absl::ZeroDuration()) return std::nullopt;
    timespec ts = absl::ToTimespec(wait);
    const int sig = sigtimedwait(&watched_, nullptr, &ts);
    if (sig > 0 && sig != SIGCHLD) return sig;
  }
}

std::vector<SupervisorEvent> Supervisor::DoWork(absl::Time deadline) {
  std::vector<SupervisorEvent> events;
  while (true) {
    Check(&events);
    if (!events.empty()) return events;
    const absl::Time now = absl::Now();
    // With no child left, a finite deadline is still waited for (a caller that retries
    // something every second must not spin); without one there is nothing to wait for.
    if (now >= deadline || (!AnyRunning() && deadline == absl::InfiniteFuture())) return events;
    const absl::Time wake = std::min({deadline, NextEscalation(), now + kTick});
    const absl::Duration wait = std::max(wake - now, absl::ZeroDuration());
    timespec ts = absl::ToTimespec(wait);
    const int sig = sigtimedwait(&watched_, nullptr, &ts);
    if (sig > 0 && sig != SIGCHLD) {
      events.push_back({SupervisorEvent::Kind::kSignal, sig, -1, std::nullopt});
    }
    // sig < 0: EAGAIN (the wait ran out) or EINTR; either way, look at the children again.
  }
}

}  // namespace ddp
