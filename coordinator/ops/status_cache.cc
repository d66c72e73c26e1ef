#include "coordinator/ops/status_cache.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <utility>

namespace ddp {

namespace {

// CPU time of the calling thread.
absl::Duration ThreadCpuTime() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return absl::DurationFromTimespec(ts);
}

}  // namespace

StatusCache::StatusCache(const Job* job, const Clock* clock, absl::Duration max_age)
    : job_(job), clock_(clock), max_age_(max_age) {
  Rebuild(nullptr);
}

std::shared_ptr<const StatusSnapshot> StatusCache::Current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

bool StatusCache::Due(const StatusSnapshot& s) const {
  const absl::Duration age = clock_->Now() - s.built;
  if (age < kBuildCpuFactor * s.build_cpu) return false;
  // While workers register, readers rebuild on demand (registrations are major changes); the
  // ticker keeps out of the registration lock's way except once a second.
  if (s.status.state == JobState::kRegistering) return age >= absl::Seconds(1);
  // A major change as soon as the CPU budget allows (watchers and the chart see a state change
  // within a tick in a small world); anything else once the snapshot is max_age old.
  if (MajorStale(s)) return true;
  if (age < max_age_) return false;
  return job_->version() != s.version || age >= absl::Seconds(1);
}

bool StatusCache::MajorStale(const StatusSnapshot& s) const {
  return job_->major_version() != s.major_version;
}

void StatusCache::Rebuild(bool (StatusCache::*still_due)(const StatusSnapshot&) const) {
  absl::MutexLock build_lock(&build_mu_);
  if (still_due != nullptr) {
    std::shared_ptr<const StatusSnapshot> now = Current();
    if (!(this->*still_due)(*now)) return;  // another caller rebuilt meanwhile
  }
  const absl::Duration cpu_before = ThreadCpuTime();
  std::shared_ptr<StatusSnapshot> s = Recycled();
  // Versions first: a change racing with the build makes the snapshot look stale, never fresh.
  s->major_version = job_->major_version();
  s->version = job_->version();
  s->built = clock_->Now();
  s->status = job_->Status();
  StatusRender::Output forms{std::move(s->json), std::move(s->proto_bytes), std::move(s->metrics)};
  render_.Render(s->status, &forms);
  s->json = std::move(forms.json);
  s->proto_bytes = std::move(forms.proto_bytes);
  s->metrics = std::move(forms.metrics);
  s->build_cpu = ThreadCpuTime() - cpu_before;
  std::shared_ptr<StatusSnapshot> replaced;
  {
    absl::MutexLock lock(&mu_);
    replaced = std::move(current_);
    current_ = std::move(s);
    ++builds_;
  }
  spare_ = std::move(replaced);
}

std::shared_ptr<StatusSnapshot> StatusCache::Recycled() {
  // Only this cache hands out snapshots, and only current_: once the replaced one's readers
  // are gone (an HTTP reply still being sent keeps it), nobody can take a new reference.
  if (spare_ != nullptr && spare_.use_count() == 1) {
    // The readers' last reads happen before their release of the count seen above.
    std::atomic_thread_fence(std::memory_order_acquire);
    return std::move(spare_);
  }
  spare_.reset();
  return std::make_shared<StatusSnapshot>();
}

bool StatusCache::Refresh() {
  std::shared_ptr<const StatusSnapshot> s = Current();
  if (!Due(*s)) return false;
  Rebuild(&StatusCache::Due);
  return true;
}

std::shared_ptr<const StatusSnapshot> StatusCache::Get() {
  std::shared_ptr<const StatusSnapshot> s = Current();
  if (!MajorStale(*s)) return s;
  Rebuild(&StatusCache::MajorStale);
  return Current();
}

uint64_t StatusCache::builds() const {
  absl::MutexLock lock(&mu_);
  return builds_;
}

}  // namespace ddp
