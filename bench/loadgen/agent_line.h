// The line protocol between ddp-scalebench (the driver) and its agent processes (ddp-rankgen,
// ddp-tcpstore-bench): the driver writes one command word per line on the agent's stdin; the
// agent answers each with one line on stdout, `ok key=value ...` or `error <text>`. Values carry
// no spaces. Pure functions and value types; thread-compatible.
#ifndef SLURM_DDP_BENCH_LOADGEN_AGENT_LINE_H_
#define SLURM_DDP_BENCH_LOADGEN_AGENT_LINE_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/loadgen/quantiles.h"

namespace ddp::bench {

// Commands, in the order the driver sends them (an agent answers `error` to one it lacks).
inline constexpr char kCmdConnect[] = "connect";        // open one connection per rank
inline constexpr char kCmdRendezvous[] = "rendezvous";  // every rank: rank + shard
inline constexpr char kCmdBeat[] = "beat";              // start heartbeating
inline constexpr char kCmdCount[] = "count";            // heartbeat counters so far
inline constexpr char kCmdStop[] = "stop";              // stop heartbeating, final counters
// One rank lost (its node task reports it), every other rank rejoins the next membership
// generation and the lost rank's replacement registers; each then fetches its shard.
inline constexpr char kCmdReform[] = "reform";
// Makes the next reform's contexts and requests (untimed), so that its time is the calls' alone.
inline constexpr char kCmdPrepareReform[] = "prepare-reform";
inline constexpr char kCmdQuit[] = "quit";  // exit (EOF on stdin does the same)

// Reply fields, ordered as written.
class ReplyFields {
 public:
  ReplyFields& Add(const std::string& key, int64_t value);
  ReplyFields& Add(const std::string& key, double value);
  ReplyFields& Add(const std::string& key, const std::string& value);
  // key_n, key_p50_ms, key_p99_ms, key_max_ms.
  ReplyFields& Add(const std::string& key, const Quantiles& q);
  // "ok k=v ..." (no newline).
  std::string Format() const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

// One timed phase (connect, rendezvous) across an agent's ranks.
struct PhaseReport {
  int64_t done_ns = 0;  // MonotonicNanos() when the last rank finished
  // gRPC: when the last rank held its rank (Register's or Rejoin's answer), before its shard;
  // 0 when not recorded (TCPStore: its rendezvous ends there).
  int64_t ranked_ns = 0;
  int failed = 0;
  Quantiles latency;  // per rank, issue to completion, ms
  std::string first_error;
};

// `ok done_ns=... failed=0 lat_...` or, if any rank failed, an error line naming the first
// failure.
std::string PhaseReply(const PhaseReport& report);

// "error <message>" on one line (newlines become spaces).
std::string FormatError(absl::string_view message);

// A parsed reply line.
class AgentReply {
 public:
  // An `error` line becomes a non-OK status carrying its text; a malformed line is an error too.
  static absl::StatusOr<AgentReply> Parse(absl::string_view line);

  bool Has(absl::string_view key) const { return fields_.count(std::string(key)) > 0; }
  absl::StatusOr<std::string> String(absl::string_view key) const;
  absl::StatusOr<int64_t> Int(absl::string_view key) const;
  absl::StatusOr<double> Double(absl::string_view key) const;
  absl::StatusOr<Quantiles> Summary(absl::string_view key) const;

 private:
  std::map<std::string, std::string> fields_;
};

}  // namespace ddp::bench

#endif  // SLURM_DDP_BENCH_LOADGEN_AGENT_LINE_H_
