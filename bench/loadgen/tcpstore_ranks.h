// The TCPStore baseline's simulated ranks in one ddp-tcpstore-bench process: one thread per rank,
// each with its own c10d::TCPStore client (its own TCP connection), since the client API blocks.
// Connect starts the threads; each constructs its store (connect, handshake, and the "init/"
// count every client of a store with a world size does) and waits at a gate. Rendezvous opens
// the gate and every rank does what ddp-coordinator's Register + GetShard give it: take a rank
// (add), publish its address (set), count in (add; the last one sets "go"), wait for "go", read
// the shard parameters (get). Threads keep their connection until the object is destroyed.
//
// Thread safety: Connect, Rendezvous and the destructor are called from one thread, in order;
// the rank threads share only mu_-guarded state.
#ifndef SLURM_DDP_BENCH_LOADGEN_TCPSTORE_RANKS_H_
#define SLURM_DDP_BENCH_LOADGEN_TCPSTORE_RANKS_H_

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/loadgen/agent_line.h"

namespace ddp::bench {

struct TcpStoreRanksOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  int first = 0;  // global index of this process's first rank
  int count = 0;
  int world = 0;
  absl::Duration timeout = absl::Seconds(120);  // the store's timeout (connect, wait, get)
};

class TcpStoreRanks {
 public:
  explicit TcpStoreRanks(TcpStoreRanksOptions options);
  ~TcpStoreRanks();  // releases the gate and joins every thread
  TcpStoreRanks(const TcpStoreRanks&) = delete;
  TcpStoreRanks& operator=(const TcpStoreRanks&) = delete;

  PhaseReport Connect();
  PhaseReport Rendezvous();

 private:
  enum class Stage { kConnect, kRendezvous, kQuit };
  struct Tally {
    int remaining = 0;
    int failed = 0;
    int64_t last_ns = 0;
    std::vector<double> ms;
    std::string first_error;
  };

  void RankMain(int index);
  void Record(Tally* tally, int64_t start_ns, const std::string& error) ABSL_LOCKS_EXCLUDED(mu_);
  PhaseReport Await(Tally* tally, absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  const TcpStoreRanksOptions options_;
  std::vector<std::thread> threads_;
  absl::Mutex mu_;
  Stage stage_ ABSL_GUARDED_BY(mu_) = Stage::kConnect;
  int64_t gate_ns_ ABSL_GUARDED_BY(mu_) = 0;  // when the rendezvous began
  Tally connect_ ABSL_GUARDED_BY(mu_);
  Tally rendezvous_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp::bench

#endif  // SLURM_DDP_BENCH_LOADGEN_TCPSTORE_RANKS_H_
