// ddp-scalebench: one control-plane scale measurement (bench/loadgen/scale_run.h), printed as one
// `ok key=value ...` line on stdout (progress on stderr). bench/loadgen.sh runs it for each size
// and target and prints the table. Exit 0: measured; 3: this host cannot hold the run (the reason
// on stderr); 1: the run failed.
//   ddp-scalebench --target grpc|tcpstore|tcpstore-py --ranks N [--procs P] [--window S] [--keep]
#include <ftw.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "bench/loadgen/scale_run.h"
#include "common/mutex_mode.h"

namespace ddp::bench {
namespace {

// The exit code of a run this host cannot hold (ScaleRun::CheckHost: descriptors, ephemeral
// ports, thread ids); bench/loadgen.sh lists such runs as not run rather than failed.
constexpr int kNotRunOnThisHost = 3;

// The folder of this executable: the other binaries are built beside it.
std::string OwnDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  const std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

void RemoveTree(const std::string& dir) {
  nftw(
      dir.c_str(),
      [](const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }, 16,
      FTW_DEPTH | FTW_PHYS);
}

int Main(int argc, char** argv) {
  ScaleOptions o;
  double window_s = 10;
  double warmup_s = 3;
  double heartbeat_s = 1;
  double phase_timeout_s = 180;
  bool keep = false;
  CLI::App app{"ddp-scalebench: connect / rendezvous / heartbeat / status at scale"};
  app.add_option("--target", o.target,
                 "grpc (ddp-coordinator), tcpstore (c10d::TCPStore, C++) or tcpstore-py (Python)")
      ->check(CLI::IsMember({"grpc", "tcpstore", "tcpstore-py"}));
  app.add_option("--ranks", o.ranks, "Simulated ranks, one connection each")
      ->check(CLI::Range(1, 131072));
  app.add_option("--procs", o.procs,
                 "Agent processes (default: max(2, connections/2048); a connection per rank, or "
                 "per 8-rank node with --node-calls)")
      ->check(CLI::Range(0, 256));
  app.add_option("--bin-dir", o.bin_dir, "Where the binaries are (default: beside this one)");
  app.add_option("--python", o.python, "tcpstore-py: a Python with torch");
  app.add_option("--tcpstore-py", o.tcpstore_script,
                 "tcpstore-py: bench/loadgen/tcpstore_rendezvous.py");
  app.add_option("--window", window_s, "Seconds of each heartbeat window")
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup_s, "Seconds of heartbeats before measuring")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--heartbeat", heartbeat_s, "Seconds between a rank's heartbeats")
      ->check(CLI::PositiveNumber);
  app.add_option("--heartbeats", o.heartbeats,
                 "grpc: node (one NodeHeartbeat per 8-rank node, ddp-trainer's default) or "
                 "worker (one Heartbeat per rank)")
      ->check(CLI::IsMember({"node", "worker"}));
  app.add_option("--phase-timeout", phase_timeout_s, "Deadline of the connect and rendezvous")
      ->check(CLI::PositiveNumber);
  app.add_option("--lost-rank", o.lost_rank,
                 "grpc: after the status window this rank is lost and the job re-forms (timed); "
                 "-1: no re-formation")
      ->check(CLI::Range(-1, 131071));
  app.add_flag("--reform-all-shards", o.reform_all_shards,
               "grpc: in the re-formation every rank fetches its shard again (default: the "
               "replacement, and a survivor whose rank or world size changed, as ddp-trainer's "
               "workers do)");
  app.add_flag("--node-calls", o.node_calls,
               "grpc: one connection and one call per 8-rank node (NODE CALLS), not per rank");
  app.add_flag("--separate-shard-call", o.separate_shard_call,
               "grpc, --node-calls: the start-up's shards in a NodeGetShard after the "
               "NodeRegister (a run that resumes), not inside the registrations (one that starts "
               "fresh)");
  app.add_flag("--plaintext", o.plaintext,
               "grpc: run the coordinator without TLS (a benchmark comparison only)");
  app.add_flag("--keep", keep, "Keep the work folder (logs) after a successful run");
  CLI11_PARSE(app, argc, argv);
  if (o.bin_dir.empty()) o.bin_dir = OwnDir();
  o.window = absl::Seconds(window_s);
  o.warmup = absl::Seconds(warmup_s);
  o.heartbeat = absl::Seconds(heartbeat_s);
  o.phase_timeout = absl::Seconds(phase_timeout_s);

  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/ddp-scale.XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    std::perror("ddp-scalebench: mkdtemp");
    return 1;
  }
  o.work_dir = pattern;
  absl::StatusOr<ReplyFields> result;
  bool healthy = false;
  std::string error;
  {
    ScaleRun run(o);
    result = run.Run();
    healthy = run.healthy();
    error = run.error();
  }  // every process of the run is gone here
  if (absl::IsResourceExhausted(result.status())) {
    // The host cannot hold the run (descriptors, ports, thread ids): not a result, not a failure.
    std::fprintf(stderr, "ddp-scalebench: not run on this host: %s\n",
                 std::string(result.status().message()).c_str());
    RemoveTree(o.work_dir);
    return kNotRunOnThisHost;
  }
  if (!result.ok()) {
    std::fprintf(stderr, "ddp-scalebench: %s (logs in %s)\n",
                 std::string(result.status().message()).c_str(), o.work_dir.c_str());
    return 1;
  }
  std::printf("%s\n", result->Format().c_str());
  if (!healthy) {
    std::fprintf(
        stderr, "ddp-scalebench: %s (logs in %s)\n",
        error.empty() ? "a heartbeat failed or the job did not stay RUNNING" : error.c_str(),
        o.work_dir.c_str());
    return 1;
  }
  if (!keep) RemoveTree(o.work_dir);
  return 0;
}

}  // namespace
}  // namespace ddp::bench

int main(int argc, char** argv) {
  ddp::UseReleaseMutexMode();
  signal(SIGPIPE, SIG_IGN);  // a dead agent is an error reply, not the driver's death
  return ddp::bench::Main(argc, argv);
}
