// One scale measurement, as ddp-scalebench runs it: the server in its own process (the real
// ddp-coordinator, or a TCPStore server for the baseline), the simulated ranks spread over
// several agent processes with one connection per rank, and this process as the operator.
// Phases, each timed on its own: connect (every rank connected and answered once), rendezvous
// (every rank holds its rank and its shard), then for the coordinator a heartbeat window (every
// rank heartbeating; the coordinator's CPU from /proc) and a status window (GetStatus p50/p99
// while every rank heartbeats) and, if asked, a re-formation after one lost rank. Host limits (fd,
// ports, listen queues) are checked first and reported with the result. Thread-compatible: Run is
// called once, from one thread.
#ifndef SLURM_DDP_BENCH_LOADGEN_SCALE_RUN_H_
#define SLURM_DDP_BENCH_LOADGEN_SCALE_RUN_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/loadgen/agent_group.h"
#include "bench/loadgen/agent_line.h"
#include "bench/loadgen/agent_process.h"

namespace ddp::bench {

struct ScaleOptions {
  // grpc: ddp-coordinator and ddp-rankgen. tcpstore: c10d::TCPStore in C++ (ddp-tcpstore-bench).
  // tcpstore-py: torch.distributed.TCPStore from Python (tcpstore_rendezvous.py).
  std::string target = "grpc";
  int ranks = 1024;
  // Agent processes; 0: one per 2,048 connections rounded up, at least 2 (a connection per rank,
  // or per 8-rank node with node_calls).
  int procs = 0;
  std::string bin_dir;   // ddp-coordinator, ddp-rankgen, ddp-tcpstore-bench
  std::string work_dir;  // logs and the dist_file
  std::string python;    // tcpstore-py: a Python with torch, and the script
  std::string tcpstore_script;
  absl::Duration window = absl::Seconds(10);  // each of the two heartbeat windows
  absl::Duration warmup = absl::Seconds(3);   // heartbeating before the first window
  absl::Duration heartbeat = absl::Seconds(1);
  // grpc: node (8 ranks per simulated node send one NodeHeartbeat, as ddp-trainer's node tasks
  // do) or worker (one Heartbeat per rank).
  std::string heartbeats = "node";
  // grpc: each node task of 8 simulated ranks carries their Register, GetShard, Rejoin and
  // heartbeats in one call per node over its one connection (NODE CALLS in
  // proto/coordinator.proto); the ranks open no connection. false: one connection per rank.
  bool node_calls = false;
  // grpc, node_calls: the start-up's shards in a NodeGetShard of their own after the
  // NodeRegister (GrpcRanksOptions::separate_shard_call), not inside the registrations.
  bool separate_shard_call = false;
  // grpc: the coordinator without TLS (ddp-coordinator --bench-plaintext), to compare TLS's cost
  // like with like. Never what a job runs.
  bool plaintext = false;
  // grpc: after the status window, one rank is lost and the job re-forms (in-job recovery: its
  // replacement registers, every other rank rejoins, the replacement fetches its shard (and a
  // survivor whose rank or world changed, or every rank with reform_all_shards)), timed from the
  // command that starts it, which the loss report follows, to the last rank holding its new rank
  // and shard; the agents make the calls' contexts and requests before it (prepare-reform,
  // untimed). -1: no re-formation (the coordinator then runs without restarts, as before).
  int lost_rank = -1;
  // grpc: in the re-formation every rank fetches its shard again (GrpcRanksOptions).
  bool reform_all_shards = false;
  absl::Duration status_pause = absl::Milliseconds(20);
  absl::Duration phase_timeout = absl::Seconds(180);
};

class ScaleRun {
 public:
  explicit ScaleRun(ScaleOptions options);
  ~ScaleRun();  // kills and reaps every process it started

  // The result as `ok key=value ...` fields. A host that cannot take the run is an error; a
  // phase that fails ends the run, and the result then holds what was measured before it, an
  // `error` field naming the phase, and the job's state and failure reason if it has them.
  absl::StatusOr<ReplyFields> Run();
  // After Run: false if any heartbeat failed or the job did not stay RUNNING with every rank.
  bool healthy() const { return healthy_; }
  // After Run: why the run ended early ("" if it did not).
  const std::string& error() const { return error_; }

 private:
  absl::Status CheckHost();
  absl::Status RunPhases();
  void NoteJobState();
  absl::Status StartCoordinator();
  // The TCPStore server, then its agents; `command` is the executable (and script) to run.
  absl::Status StartTcpStoreServer(const std::vector<std::string>& command);
  absl::Status StartAgents(const std::vector<std::string>& base_argv);
  absl::Status TimedPhase(const std::string& command, const std::string& name);
  absl::Status HeartbeatWindows();
  absl::Status Reformation();
  absl::StatusOr<std::map<std::string, int64_t>> TcpExtDelta(
      const std::map<std::string, int64_t>& before);

  const ScaleOptions options_;
  int procs_ = 0;
  bool healthy_ = false;
  std::string error_;
  ReplyFields result_;
  std::unique_ptr<AgentProcess> server_;
  std::unique_ptr<AgentGroup> agents_;
  std::string address_;   // the coordinator's gRPC address (grpc target)
  std::string token_;     // the view token (status calls)
  std::string tls_cert_;  // the job's certificate (empty with plaintext)
};

}  // namespace ddp::bench

#endif  // SLURM_DDP_BENCH_LOADGEN_SCALE_RUN_H_
