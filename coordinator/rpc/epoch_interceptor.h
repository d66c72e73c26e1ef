// A gRPC server interceptor that puts the coordinator's epoch on every reply's initial metadata
// (kEpochHeaderName, the header client/rpc_channel.h reads), so that a client can refuse to obey
// a coordinator older than the newest it has seen (docs/architecture.md, "Standby coordinator").
// Epoch 0 (task 0's coordinator) sends no header: a reply without one reads as epoch 0.
//
// Thread safety: the factory is shared by gRPC's threads; it holds a constant.
#ifndef SLURM_DDP_COORDINATOR_RPC_EPOCH_INTERCEPTOR_H_
#define SLURM_DDP_COORDINATOR_RPC_EPOCH_INTERCEPTOR_H_

#include <grpcpp/support/server_interceptor.h>

#include <cstdint>
#include <memory>

namespace ddp {

inline constexpr char kEpochHeaderName[] = "ddp-epoch";

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeEpochInterceptor(
    int64_t epoch);

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_RPC_EPOCH_INTERCEPTOR_H_
