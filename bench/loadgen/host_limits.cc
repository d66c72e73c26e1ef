#include "bench/loadgen/host_limits.h"

#include <time.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace ddp::bench {
namespace {

// /proc and /sys files report a size of 0: read to the end.
absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

int64_t MonotonicNanos() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

absl::StatusOr<int64_t> ReadSysctl(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path));
  int64_t v = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &v)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not an integer: ", text));
  }
  return v;
}

absl::StatusOr<int64_t> ParsePortRange(absl::string_view text) {
  std::vector<absl::string_view> parts =
      absl::StrSplit(absl::StripAsciiWhitespace(text), absl::ByAnyChar(" \t"), absl::SkipEmpty());
  int64_t lo = 0;
  int64_t hi = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &lo) || !absl::SimpleAtoi(parts[1], &hi) ||
      hi < lo) {
    return absl::InvalidArgumentError(absl::StrCat("not a port range: '", text, "'"));
  }
  return hi - lo + 1;
}

absl::StatusOr<int64_t> EphemeralPortCount() {
  ASSIGN_OR_RETURN(const std::string text,
                   ReadFileToString("/proc/sys/net/ipv4/ip_local_port_range"));
  return ParsePortRange(text);
}

absl::StatusOr<int64_t> ParseStatCpuTicks(absl::string_view stat) {
  // The command name (field 2) is in parentheses and may hold spaces or ')': fields after the
  // last ')' start at field 3 (state); utime and stime are fields 14 and 15.
  const size_t close = stat.rfind(')');
  if (close == absl::string_view::npos) {
    return absl::InvalidArgumentError("no command name in /proc/<pid>/stat");
  }
  std::vector<absl::string_view> rest =
      absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipEmpty());
  constexpr size_t kUtime = 14 - 3;
  constexpr size_t kStime = 15 - 3;
  int64_t utime = 0;
  int64_t stime = 0;
  if (rest.size() <= kStime || !absl::SimpleAtoi(rest[kUtime], &utime) ||
      !absl::SimpleAtoi(rest[kStime], &stime)) {
    return absl::InvalidArgumentError("short or malformed /proc/<pid>/stat");
  }
  return utime + stime;
}

absl::StatusOr<double> ProcessCpuSeconds(pid_t pid) {
  ASSIGN_OR_RETURN(const std::string stat, ReadFileToString(absl::StrCat("/proc/", pid, "/stat")));
  ASSIGN_OR_RETURN(const int64_t ticks, ParseStatCpuTicks(stat));
  return static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

absl::StatusOr<HostCpuTimes> ParseProcStatCpu(absl::string_view proc_stat,
                                              double ticks_per_second) {
  // "cpu  user nice system idle iowait irq softirq steal guest guest_nice".
  absl::string_view line = proc_stat.substr(0, proc_stat.find('\n'));
  if (!absl::ConsumePrefix(&line, "cpu ")) {
    return absl::InvalidArgumentError("/proc/stat does not start with the cpu line");
  }
  std::vector<absl::string_view> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
  constexpr size_t kFields = 8;  // user .. steal
  if (cells.size() < kFields) return absl::InvalidArgumentError("short cpu line in /proc/stat");
  int64_t v[kFields] = {};
  for (size_t i = 0; i < kFields; ++i) {
    if (!absl::SimpleAtoi(cells[i], &v[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("/proc/stat cpu field ", i + 1, ": ", cells[i]));
    }
  }
  HostCpuTimes t;
  t.idle = static_cast<double>(v[3] + v[4]) / ticks_per_second;
  t.steal = static_cast<double>(v[7]) / ticks_per_second;
  return t;
}

absl::StatusOr<HostCpuTimes> HostCpuSeconds() {
  ASSIGN_OR_RETURN(const std::string text, ReadFileToString("/proc/stat"));
  return ParseProcStatCpu(text, static_cast<double>(sysconf(_SC_CLK_TCK)));
}

absl::StatusOr<int64_t> ParseStatusKib(absl::string_view status, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, key) || !absl::ConsumePrefix(&line, ":")) continue;
    line = absl::StripAsciiWhitespace(line);
    int64_t kib = 0;
    if (!absl::ConsumeSuffix(&line, " kB") || !absl::SimpleAtoi(line, &kib)) {
      return absl::InvalidArgumentError(absl::StrCat("malformed ", key, " line in status"));
    }
    return kib;
  }
  return absl::NotFoundError(absl::StrCat("no ", key, " in status"));
}

absl::StatusOr<int64_t> ProcessPeakRssKib(pid_t pid) {
  ASSIGN_OR_RETURN(const std::string text,
                   ReadFileToString(absl::StrCat("/proc/", pid, "/status")));
  return ParseStatusKib(text, "VmHWM");
}

absl::StatusOr<std::map<std::string, int64_t>> ParseTcpExt(absl::string_view netstat) {
  // Pairs of lines: "TcpExt: Name1 Name2 ..." then "TcpExt: 12 34 ...".
  std::vector<absl::string_view> names;
  for (absl::string_view line : absl::StrSplit(netstat, '\n')) {
    if (!absl::ConsumePrefix(&line, "TcpExt:")) continue;
    std::vector<absl::string_view> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (names.empty()) {
      names = cells;
      continue;
    }
    if (cells.size() != names.size()) {
      return absl::InvalidArgumentError("TcpExt header and values differ in length");
    }
    std::map<std::string, int64_t> out;
    for (size_t i = 0; i < cells.size(); ++i) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(cells[i], &v)) {
        return absl::InvalidArgumentError(absl::StrCat("TcpExt ", names[i], ": ", cells[i]));
      }
      out[std::string(names[i])] = v;
    }
    return out;
  }
  return absl::NotFoundError("no TcpExt lines");
}

absl::StatusOr<std::map<std::string, int64_t>> TcpExtCounters() {
  ASSIGN_OR_RETURN(const std::string text, ReadFileToString("/proc/net/netstat"));
  return ParseTcpExt(text);
}

}  // namespace ddp::bench
