// A Job behind a real CoordinatorServer on a free port, for the client tests (ranks as threads).
// Thread-compatible: built and destroyed by the test's thread; the server serves any thread.
#ifndef SLURM_DDP_TESTS_CLIENT_LIVE_COORDINATOR_H_
#define SLURM_DDP_TESTS_CLIENT_LIVE_COORDINATOR_H_

#include <memory>
#include <string>

#include "client/coordinator_client.h"
#include "common/dist_file.h"
#include "coordinator/job/job.h"
#include "coordinator/kv_store.h"
#include "coordinator/rpc/server.h"

namespace ddp {

// A Job of `world_size` ranks behind a real CoordinatorServer on a free port, with the three
// tokens of a fresh dist_file; connect() builds ConnectOptions for the server with one token.
struct LiveCoordinator {
  LiveCoordinator(const std::string& job_id, int world_size, int max_restarts)
      : contents(*NewDistFileContents(job_id, 0, "", 0)),
        job(Config(job_id, contents.nonce, world_size, max_restarts), MonotonicClock::Get()) {
    ServerOptions options;
    options.tokens = {contents.token, contents.view_token, contents.control_token};
    server = CoordinatorServer::Start(options, &job, &store, MonotonicClock::Get());
  }
  static JobConfig Config(const std::string& job_id, const std::string& nonce, int world_size,
                          int max_restarts) {
    JobConfig config;
    config.job_id = job_id;
    config.nonce = nonce;
    config.world_size = world_size;
    config.max_restarts = max_restarts;
    return config;
  }
  ConnectOptions connect(const std::string& token) const {
    ConnectOptions o;
    o.address = (*server)->address();
    o.token = token;
    o.tls_cert = (*server)->tls_cert();
    return o;
  }

  DistFileContents contents;
  Job job;
  KvStore store;
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server;
};

}  // namespace ddp

#endif  // SLURM_DDP_TESTS_CLIENT_LIVE_COORDINATOR_H_
