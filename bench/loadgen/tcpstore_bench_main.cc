// ddp-tcpstore-bench: the TCPStore baseline of a scale run, in C++ against LibTorch's
// c10d::TCPStore (libuv server, as PyTorch uses by default), so that no Python threads are
// measured. Two modes, both driven over stdin/stdout (bench/loadgen/agent_line.h):
//   --serve --world N        the store's server, alone in its process (as ddp-coordinator is);
//                            answers `ok port=P` once listening, then waits for quit / EOF.
//   --port P --first I --count K --world N
//                            ranks [I, I+K), one thread and one connection each; answers the
//                            connect and rendezvous commands (bench/loadgen/tcpstore_ranks.h).
#include <pthread.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/loadgen/agent_line.h"
#include "bench/loadgen/agent_loop.h"
#include "bench/loadgen/host_limits.h"
#include "bench/loadgen/tcpstore_ranks.h"
#include "common/heap_reserve.h"
#include "common/mutex_mode.h"

namespace ddp::bench {
namespace {

constexpr char kShardParams[] = "dataset_size=1281167 seed=0 shuffle=1 epoch=0";

int Serve(int world, int timeout_s) {
  try {
    c10d::TCPStoreOptions o;
    o.port = 0;
    o.isServer = true;
    o.numWorkers = static_cast<size_t>(world);
    o.waitWorkers = false;
    o.useLibUV = true;
    o.timeout = std::chrono::seconds(timeout_s);
    c10d::TCPStore store("127.0.0.1", o);
    const std::string params(kShardParams);
    store.set("shard_params", std::vector<uint8_t>(params.begin(), params.end()));
    std::printf("%s\n", ReplyFields()
                            .Add("port", static_cast<int64_t>(store.getPort()))
                            .Add("libuv", std::string(store.isLibUvBackend() ? "yes" : "no"))
                            .Format()
                            .c_str());
    std::fflush(stdout);
    return RunAgentLoop({});
  } catch (const std::exception& e) {
    std::printf("%s\n", FormatError(absl::StrCat("TCPStore server: ", e.what())).c_str());
    return 1;
  }
}

int Main(int argc, char** argv) {
  bool serve = false;
  TcpStoreRanksOptions o;
  int timeout_s = 120;
  int reserve_kib = 128;
  CLI::App app{"ddp-tcpstore-bench: the c10d::TCPStore baseline of ddp-scalebench"};
  app.add_flag("--serve", serve, "Run the store's server");
  app.add_option("--port", o.port, "The server's port (rank mode)");
  app.add_option("--first", o.first, "Global index of the first rank");
  app.add_option("--count", o.count, "Ranks in this process")->check(CLI::Range(0, 65536));
  app.add_option("--world", o.world, "Ranks in the job")->required()->check(CLI::Range(1, 65536));
  app.add_option("--phase-timeout", timeout_s, "The store's timeout, seconds")
      ->check(CLI::Range(1, 3600));
  app.add_option("--heap-reserve-kib", reserve_kib,
                 "Rank mode: heap made resident per rank before anything is timed "
                 "(common/heap_reserve.h); 0: none")
      ->check(CLI::Range(0, 1 << 20));
  CLI11_PARSE(app, argc, argv);
  if (!serve) ReserveHeap(static_cast<size_t>(reserve_kib) * 1024 * static_cast<size_t>(o.count));
  auto limit = RaiseFdLimitToHard();
  if (!limit.ok()) {
    std::fprintf(stderr, "ddp-tcpstore-bench: %s\n", std::string(limit.status().message()).c_str());
    return 1;
  }
  if (serve) return Serve(o.world, timeout_s);
  if (o.port <= 0 || o.count <= 0 || o.first < 0 || o.first + o.count > o.world) {
    std::fprintf(stderr, "ddp-tcpstore-bench: rank mode needs --port and ranks inside the world\n");
    return 2;
  }
  // Thousands of rank threads: small stacks (TCPStore's client calls need little).
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 << 10);
  pthread_setattr_default_np(&attr);
  pthread_attr_destroy(&attr);
  o.timeout = absl::Seconds(timeout_s);
  const uint64_t fd_limit = limit->soft;
  TcpStoreRanks ranks(o);
  return RunAgentLoop({
      {kCmdConnect,
       [&] {
         if (static_cast<uint64_t>(o.count) + 64 > fd_limit) {
           return FormatError(absl::StrCat(o.count, " connections need more than the fd limit ",
                                           fd_limit, " (RLIMIT_NOFILE hard limit)"));
         }
         return PhaseReply(ranks.Connect());
       }},
      {kCmdRendezvous, [&] { return PhaseReply(ranks.Rendezvous()); }},
  });
}

}  // namespace
}  // namespace ddp::bench

int main(int argc, char** argv) {
  ddp::UseReleaseMutexMode();
  return ddp::bench::Main(argc, argv);
}
