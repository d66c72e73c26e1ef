// A gRPC server interceptor that records every call's method, status code and latency (from
// arrival to the status being sent) into RpcMetrics, for /metrics.
//
// Thread safety: the factory is shared by gRPC's threads; RpcMetrics is lock-free.
#ifndef SLURM_DDP_COORDINATOR_RPC_METRICS_INTERCEPTOR_H_
#define SLURM_DDP_COORDINATOR_RPC_METRICS_INTERCEPTOR_H_

#include <grpcpp/support/server_interceptor.h>

#include <memory>

#include "coordinator/ops/rpc_metrics.h"

namespace ddp {

// `metrics` must outlive the server the factory is installed in.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeRpcMetricsInterceptor(
    RpcMetrics* metrics);

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_RPC_METRICS_INTERCEPTOR_H_
