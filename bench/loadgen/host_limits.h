// What a scale run needs to know about this host: the file-descriptor limit (raised to the hard
// limit by common/fd_limit.h), the ephemeral port range, listen-queue sysctls, the kernel's TcpExt
// counters (listen overflows, SYN cookies), a process's CPU time, and a monotonic clock that every
// process on the host shares (CLOCK_MONOTONIC), so phase times can be compared across processes.
// Free functions; thread-compatible. The Parse* helpers are pure (tests feed them text).
#ifndef SLURM_DDP_BENCH_LOADGEN_HOST_LIMITS_H_
#define SLURM_DDP_BENCH_LOADGEN_HOST_LIMITS_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/fd_limit.h"  // RaiseFdLimitToHard

namespace ddp::bench {

// Nanoseconds of CLOCK_MONOTONIC: one clock for every process on the host.
int64_t MonotonicNanos();

// An integer sysctl, e.g. "/proc/sys/net/core/somaxconn".
absl::StatusOr<int64_t> ReadSysctl(const std::string& path);

// How many local ports connect() can pick from (/proc/sys/net/ipv4/ip_local_port_range).
absl::StatusOr<int64_t> EphemeralPortCount();
absl::StatusOr<int64_t> ParsePortRange(absl::string_view text);

// User + system CPU seconds a process has used so far (/proc/<pid>/stat, children excluded).
absl::StatusOr<double> ProcessCpuSeconds(pid_t pid);
// utime + stime, in clock ticks, from the text of /proc/<pid>/stat.
absl::StatusOr<int64_t> ParseStatCpuTicks(absl::string_view stat);

// The host's CPU time in seconds, summed over its CPUs (the first line of /proc/stat): `idle`
// (idle + iowait) and `steal` (time the hypervisor ran something else while this guest wanted a
// CPU). Differences over a phase say whether it was CPU-bound and whether the host's neighbours
// took part of it.
struct HostCpuTimes {
  double idle = 0;
  double steal = 0;
};
absl::StatusOr<HostCpuTimes> HostCpuSeconds();
// From the text of /proc/stat, in clock ticks (`ticks_per_second` converts them).
absl::StatusOr<HostCpuTimes> ParseProcStatCpu(absl::string_view proc_stat, double ticks_per_second);

// A process's peak resident set (VmHWM of /proc/<pid>/status), KiB.
absl::StatusOr<int64_t> ProcessPeakRssKib(pid_t pid);
// A "Key:   123 kB" line's number from the text of /proc/<pid>/status.
absl::StatusOr<int64_t> ParseStatusKib(absl::string_view status, absl::string_view key);

// The TcpExt counters of /proc/net/netstat (ListenOverflows, ListenDrops, SyncookiesSent, ...).
absl::StatusOr<std::map<std::string, int64_t>> TcpExtCounters();
absl::StatusOr<std::map<std::string, int64_t>> ParseTcpExt(absl::string_view netstat);

}  // namespace ddp::bench

#endif  // SLURM_DDP_BENCH_LOADGEN_HOST_LIMITS_H_
