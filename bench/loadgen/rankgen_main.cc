// ddp-rankgen: one client process of a scale run (ddp-scalebench starts several). Simulates
// ranks [--first, --first + --count) of a --world-rank job against a running ddp-coordinator
// found through its dist_file, one gRPC connection per rank, and answers the driver's commands
// on stdin/stdout (bench/loadgen/agent_line.h): connect, rendezvous, beat, reform, count, stop,
// quit.
#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/loadgen/agent_line.h"
#include "bench/loadgen/agent_loop.h"
#include "bench/loadgen/grpc_ranks.h"
#include "bench/loadgen/host_limits.h"
#include "common/dist_file.h"
#include "common/heap_reserve.h"
#include "common/mutex_mode.h"

namespace ddp::bench {
namespace {

std::string BeatReply(const HeartbeatReport& r) {
  return ReplyFields()
      .Add("ok_beats", r.ok)
      .Add("failed_beats", r.failed)
      .Add("aborted", r.aborted)
      .Add("late", r.late)
      .Add("hb", r.latency)
      .Add("first_error", r.first_error)
      .Format();
}

int Main(int argc, char** argv) {
  std::string dist_file;
  GrpcRanksOptions o;
  double heartbeat_s = 1;
  double rpc_timeout_s = 10;
  double phase_timeout_s = 120;
  int reserve_kib = 128;
  CLI::App app{"ddp-rankgen: simulated ranks of a scale run, one gRPC connection each"};
  app.add_option("--dist-file", dist_file, "The coordinator's dist_file")->required();
  app.add_option("--first", o.first, "Global index of the first simulated rank")->required();
  app.add_option("--count", o.count, "Simulated ranks in this process")
      ->required()
      ->check(CLI::Range(1, 131072));
  app.add_option("--world", o.world, "Ranks in the job")->required()->check(CLI::Range(1, 131072));
  app.add_option("--per-node", o.per_node, "Simulated workers per node")
      ->check(CLI::Range(1, 1024));
  std::string heartbeats = "node";
  app.add_option("--heartbeats", heartbeats,
                 "node: one NodeHeartbeat per simulated node per period, on the node task's own "
                 "connection (ddp-trainer's default); worker: one Heartbeat per rank")
      ->check(CLI::IsMember({"node", "worker"}));
  app.add_flag("--node-calls", o.node_calls,
               "Each simulated node task carries its ranks' Register, GetShard, Rejoin and "
               "heartbeats in one call per node on its own connection (NODE CALLS); the ranks "
               "open no connection of their own");
  app.add_option("--heartbeat", heartbeat_s, "Seconds between a rank's heartbeats")
      ->check(CLI::PositiveNumber);
  app.add_option("--rpc-timeout", rpc_timeout_s, "Heartbeat deadline, seconds")
      ->check(CLI::PositiveNumber);
  app.add_option("--phase-timeout", phase_timeout_s, "Connect / rendezvous deadline, seconds")
      ->check(CLI::PositiveNumber);
  app.add_option("--lost-rank", o.lost_rank,
                 "reform: the global rank whose loss is reported (its replacement registers; "
                 "every other rank rejoins)")
      ->check(CLI::Range(0, 131071));
  app.add_flag("--separate-shard-call", o.separate_shard_call,
               "node calls: the start-up's shards in a NodeGetShard after the NodeRegister, not "
               "inside it (RegisterRequest.first_shard)");
  app.add_flag("--reform-all-shards", o.reform_all_shards,
               "reform: every rank fetches its shard again (default: the replacement, and a "
               "survivor whose rank or world size changed)");
  app.add_option("--heap-reserve-kib", reserve_kib,
                 "Heap made resident per simulated rank before anything is timed "
                 "(common/heap_reserve.h); 0: none")
      ->check(CLI::Range(0, 1 << 20));
  CLI11_PARSE(app, argc, argv);
  ReserveHeap(static_cast<size_t>(reserve_kib) * 1024 * static_cast<size_t>(o.count));
  if (o.first < 0 || o.first + o.count > o.world) {
    std::fprintf(stderr, "ddp-rankgen: ranks [%d, %d) are outside the world of %d\n", o.first,
                 o.first + o.count, o.world);
    return 2;
  }
  o.node_heartbeats = heartbeats == "node" || o.node_calls;
  o.heartbeat_period = absl::Seconds(heartbeat_s);
  o.rpc_timeout = absl::Seconds(rpc_timeout_s);
  o.phase_timeout = absl::Seconds(phase_timeout_s);

  auto limit = RaiseFdLimitToHard();
  if (!limit.ok()) {
    std::fprintf(stderr, "ddp-rankgen: %s\n", std::string(limit.status().message()).c_str());
    return 1;
  }
  auto file = ReadDistFile(dist_file, {"", 0});
  if (!file.ok()) {
    std::fprintf(stderr, "ddp-rankgen: %s\n", std::string(file.status().message()).c_str());
    return 1;
  }
  o.address = file->grpc_address;
  o.token = file->token;
  o.nonce = file->nonce;
  o.tls_cert = file->tls_cert;
  const uint64_t fd_limit = limit->soft;
  GrpcRanks ranks(o);
  return RunAgentLoop({
      {kCmdConnect,
       [&] {
         // One socket per rank plus gRPC's own descriptors (epoll, wakeup pipes, files).
         const uint64_t per_8 = o.node_calls ? 1 : o.node_heartbeats ? 9 : 8;
         if (static_cast<uint64_t>(o.count) * per_8 / 8 + 64 > fd_limit) {
           return FormatError(absl::StrCat(o.count, " connections need more than the fd limit ",
                                           fd_limit, " (RLIMIT_NOFILE hard limit)"));
         }
         return PhaseReply(ranks.Connect());
       }},
      {kCmdRendezvous, [&] { return PhaseReply(ranks.Rendezvous()); }},
      {kCmdBeat,
       [&] {
         ranks.StartHeartbeats();
         return ReplyFields().Format();
       }},
      {kCmdPrepareReform,
       [&] {
         const absl::Status st = ranks.PrepareReform();
         return st.ok() ? ReplyFields().Format() : FormatError(st.message());
       }},
      {kCmdReform, [&] { return PhaseReply(ranks.Reform()); }},
      {kCmdCount, [&] { return BeatReply(ranks.Counts()); }},
      {kCmdStop, [&] { return BeatReply(ranks.StopHeartbeats()); }},
  });
}

}  // namespace
}  // namespace ddp::bench

int main(int argc, char** argv) {
  ddp::UseReleaseMutexMode();
  return ddp::bench::Main(argc, argv);
}
