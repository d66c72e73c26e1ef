// The HTTP/2 transport settings of the control plane, in one place: the coordinator's server,
// the workers' channels (client/rpc_channel.cc) and the simulated ranks of the scale benchmark
// (bench/loadgen/grpc_ranks.cc), so that the benchmark's clients behave as ddp-trainer's do.
//
// Every worker call is small (a few hundred bytes each way; requests are bounded by
// kMaxRequestBytes), and a job keeps one connection per worker (and one per node task) open for
// its whole life. Two of gRPC's defaults cost such a server more than they give:
// - BDP probing: a ping after each read of data, so that the flow-control window can grow for
//   bulk transfers. On a connection that carries one small call per heartbeat interval it sends
//   a ping (and reads its ack) for nearly every call: about twice the packets and wake-ups per
//   call on both ends. Worker calls never need a window beyond the initial 64 KiB.
// - The server's keepalive: one pending timer per connection (every 2 hours by default) that
//   never fires in a job with heartbeats. gRPC keeps each pending timer in its timer lists, and a
//   build with debug checks (Debian's libgrpc is built without NDEBUG) also in a hash table of
//   1,009 chains that it walks on every timer set and cancelled; at 16,384 connections those
//   walks were ~9% of the coordinator's CPU during the rendezvous. A worker that vanishes is
//   found by its missed heartbeats (liveness), not by the transport.
// Operator channels (ddpctl: a GetStatus reply is ~1 MB at 16,384 ranks) keep gRPC's defaults.
#ifndef SLURM_DDP_PROTO_TRANSPORT_ARGS_H_
#define SLURM_DDP_PROTO_TRANSPORT_ARGS_H_

#include <grpcpp/grpcpp.h>

#include <climits>

namespace ddp {

// Every channel to the coordinator: reconnect back-off from 100 ms up to 1 s, so that a
// restarted coordinator is found quickly.
inline void SetReconnectArgs(grpc::ChannelArguments* args) {
  args->SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args->SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
}

// A worker's channel (a worker or its node task): as above, and no BDP pings.
inline void SetWorkerChannelArgs(grpc::ChannelArguments* args) {
  SetReconnectArgs(args);
  args->SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
}

// The coordinator's server: no BDP pings, no keepalive timer per connection (INT_MAX is gRPC's
// "never").
inline void SetCoordinatorServerArgs(grpc::ServerBuilder* builder) {
  builder->AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, INT_MAX);
}

}  // namespace ddp

#endif  // SLURM_DDP_PROTO_TRANSPORT_ARGS_H_
