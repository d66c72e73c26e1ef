// ddp-leasebench: what the coordinator's fencing adds to every call. Publishes a dist_file in a
// temp folder, holds an EpochLease on it (the coordinator's: re-read when older than 250 ms, a
// refresh thread every 125 ms) and times Current() on 1 and 2 threads, against an empty loop of
// the same length. Prints ns per call; bench/standby.sh compares it with a heartbeat's round trip.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/dist_file.h"
#include "coordinator/epoch_lease.h"

namespace {

double NanosPerCall(ddp::EpochLease* lease, int threads, int calls) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([lease, calls] {
      int ok = 0;
      for (int i = 0; i < calls; ++i) ok += lease->Current().ok() ? 1 : 0;
      if (ok != calls) std::abort();  // never fenced here
    });
  }
  for (std::thread& t : pool) t.join();
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  return ns / calls;  // per call on each thread (threads run at once)
}

}  // namespace

int main() {
  char dir_template[] = "/tmp/ddp-leasebench.XXXXXX";
  const char* dir = ::mkdtemp(dir_template);
  if (dir == nullptr) return 1;
  const std::string path = std::string(dir) + "/dist_file";
  absl::StatusOr<ddp::DistFileContents> contents =
      ddp::NewDistFileContents("leasebench", 0, "127.0.0.1:1", 0);
  if (!contents.ok() || !ddp::PublishDistFile(path, *contents).ok()) return 1;
  ddp::EpochLease::Options options;
  options.dist_file = path;
  options.mine = *contents;
  {
    ddp::EpochLease lease(options);
    constexpr int kCalls = 20'000'000;
    for (int threads : {1, 2}) {
      const double ns = NanosPerCall(&lease, threads, kCalls / threads);
      std::printf("lease check: %.1f ns per call (%d thread%s, %d calls each)\n", ns, threads,
                  threads == 1 ? "" : "s", kCalls / threads);
    }
  }
  ::unlink(path.c_str());
  ::rmdir(dir);
  return 0;
}
