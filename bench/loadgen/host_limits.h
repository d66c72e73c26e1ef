// What a scale run needs to know about this host: the file-descriptor limit (raised to the hard
// limit), the ephemeral port range, listen-queue sysctls, the kernel's TcpExt counters (listen
// overflows, SYN cookies), a process's CPU time, and a monotonic clock that every process on the
// host shares (CLOCK_MONOTONIC), so phase times can be compared across processes.
// Free functions; thread-compatible. The Parse* helpers are pure (tests feed them text).
#ifndef SLURM_DDP_BENCH_LOADGEN_HOST_LIMITS_H_
#define SLURM_DDP_BENCH_LOADGEN_HOST_LIMITS_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddp::bench {

// Nanoseconds of CLOCK_MONOTONIC: one clock for every process on the host.
int64_t MonotonicNanos();

// Raises RLIMIT_NOFILE's soft limit to its hard limit (inherited by children started later).
// Returns the soft limit now in force.
absl::StatusOr<uint64_t> RaiseFdLimitToHard();

// An integer sysctl, e.g. "/proc/sys/net/core/somaxconn".
absl::StatusOr<int64_t> ReadSysctl(const std::string& path);

// How many local ports connect() can pick from (/proc/sys/net/ipv4/ip_local_port_range).
absl::StatusOr<int64_t> EphemeralPortCount();
absl::StatusOr<int64_t> ParsePortRange(absl::string_view text);

// User + system CPU seconds a process has used so far (/proc/<pid>/stat, children excluded).
absl::StatusOr<double> ProcessCpuSeconds(pid_t pid);
// utime + stime, in clock ticks, from the text of /proc/<pid>/stat.
absl::StatusOr<int64_t> ParseStatCpuTicks(absl::string_view stat);

// The TcpExt counters of /proc/net/netstat (ListenOverflows, ListenDrops, SyncookiesSent, ...).
absl::StatusOr<std::map<std::string, int64_t>> TcpExtCounters();
absl::StatusOr<std::map<std::string, int64_t>> ParseTcpExt(absl::string_view netstat);

}  // namespace ddp::bench

#endif  // SLURM_DDP_BENCH_LOADGEN_HOST_LIMITS_H_
