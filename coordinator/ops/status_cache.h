// Published snapshots of the job's status, so readers (GetStatus, WatchStatus, /api/status,
// /metrics) never build a 4096-rank status themselves or hold the job's locks: a snapshot holds
// the JobStatus, its JSON (the `ddpctl status --json` contract), its protobuf form and the job's
// Prometheus gauges (job_metrics.h), built together from one Job::Status() call, incrementally:
// only the ranks whose row changed since the last build are rendered again (status_render.h).
//
// Freshness: the server's ticker calls Refresh(), which rebuilds after a major change (a
// registration, state change, event, checkpoint or finished rank) at once, after any other change
// once the snapshot is `max_age` old, and once a second so ages keep moving; while workers
// register, only once a second, so it stays out of the registration lock's way. Never sooner than
// kBuildCpuFactor times the CPU time the last build took: at 16,384 ranks a build costs tens of
// milliseconds, and a rebuild every 200 ms took ~9% of the coordinator's CPU while the ranks
// fetched their shards, so the ticker's builds stay under about a tenth of a core (a recovery's
// events and state changes included: rebuilt on each, two builds fell inside a 0.23 s
// re-formation at 16,384 ranks). Get() rebuilds first when the major version moved, whatever the
// budget, so a reader never misses a state change it caused; heartbeat progress may be up to
// `max_age` old.
//
// Thread safety: every method is thread-safe. At most one snapshot is built at a time.
#ifndef SLURM_DDP_COORDINATOR_OPS_STATUS_CACHE_H_
#define SLURM_DDP_COORDINATOR_OPS_STATUS_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/job_status.h"
#include "coordinator/clock.h"
#include "coordinator/job/job.h"
#include "coordinator/ops/status_render.h"

namespace ddp {

// Refresh() waits at least this many times the last build's CPU time between builds.
inline constexpr int kBuildCpuFactor = 10;

struct StatusSnapshot {
  JobStatus status;
  std::string json;            // ToJson(status)
  std::string proto_bytes;     // ToProto(status), serialized (the GetStatus reply)
  std::string metrics;         // RenderJobMetrics(status)
  absl::Time built;            // clock time of the build
  absl::Duration build_cpu;    // CPU time the build took, on the building thread
  uint64_t version = 0;        // Job::version() before the build
  uint64_t major_version = 0;  // Job::major_version() before the build
};

class StatusCache {
 public:
  // `job` and `clock` must outlive the cache.
  StatusCache(const Job* job, const Clock* clock, absl::Duration max_age);
  StatusCache(const StatusCache&) = delete;
  StatusCache& operator=(const StatusCache&) = delete;

  // Rebuilds the snapshot when due (see above). Returns true when it rebuilt.
  bool Refresh();
  // The current snapshot (never null), rebuilt first when MajorStale.
  std::shared_ptr<const StatusSnapshot> Get();
  // The snapshot as last published, never rebuilding (never null).
  std::shared_ptr<const StatusSnapshot> Current() const;
  // Snapshots built so far (tests, metrics).
  uint64_t builds() const;

 private:
  // Builds and publishes unless `still_due` says another builder already did the work.
  void Rebuild(bool (StatusCache::*still_due)(const StatusSnapshot&) const);
  bool Due(const StatusSnapshot& s) const;
  bool MajorStale(const StatusSnapshot& s) const;
  // The snapshot replaced last, for its buffers, once no reader holds it; else a new one.
  std::shared_ptr<StatusSnapshot> Recycled() ABSL_EXCLUSIVE_LOCKS_REQUIRED(build_mu_);

  const Job* const job_;
  const Clock* const clock_;
  const absl::Duration max_age_;
  absl::Mutex build_mu_;  // one builder at a time; never held while taking mu_ for long
  StatusRender render_ ABSL_GUARDED_BY(build_mu_);  // each rank's pieces, kept between builds
  mutable absl::Mutex mu_;
  std::shared_ptr<StatusSnapshot> current_ ABSL_GUARDED_BY(mu_);  // handed out as const only
  // The snapshot current_ replaced: at 16,384 ranks its three forms are several MB, and new
  // strings of that size are fresh pages the kernel zeroes on every build.
  std::shared_ptr<StatusSnapshot> spare_ ABSL_GUARDED_BY(build_mu_);
  uint64_t builds_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_OPS_STATUS_CACHE_H_
