// The load generators' channel credentials: the job's TLS, as every client of the product uses
// (client/tls_credentials.h), or plaintext against a coordinator started for a plaintext
// comparison (`bench/loadgen.sh --plaintext`, ddp-coordinator --bench-plaintext), whose dist_file
// carries no certificate. Includes gRPC.
#ifndef SLURM_DDP_BENCH_LOADGEN_BENCH_CREDENTIALS_H_
#define SLURM_DDP_BENCH_LOADGEN_BENCH_CREDENTIALS_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "client/tls_credentials.h"

namespace ddp::bench {

inline std::shared_ptr<grpc::ChannelCredentials> BenchChannelCredentials(
    const std::string& tls_cert, grpc::ChannelArguments* args) {
  if (tls_cert.empty()) return grpc::InsecureChannelCredentials();
  return JobChannelCredentials(tls_cert, args);
}

}  // namespace ddp::bench

#endif  // SLURM_DDP_BENCH_LOADGEN_BENCH_CREDENTIALS_H_
