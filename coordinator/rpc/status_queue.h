// GetStatus on a completion queue and a thread of its own. Every other method runs on gRPC's
// callback threads, which at 16,384 ranks are busy with registrations and thousands of
// heartbeats a second; an operator's GetStatus (ddpctl status, a dashboard) is not queued behind
// them. Its answer is the status snapshot's pre-serialized bytes (status_cache.h), so the thread
// does a memcpy per call; a snapshot rebuilt on demand (a registration just changed the job)
// is built on this thread too, not on a worker's.
//
// Each call is an asynchronous raw bidirectional stream, like the callback methods
// (service.h): it passes the CallGate on its headers, before its body is read, and a refused
// call is answered at once with its body never read. An admitted call reads one request of at
// most kMaxStatusRequestBytes and is answered with one message, an ordinary unary call on the
// wire.
//
// Lifetime: Start() after the server is built; Shutdown() after grpc::Server::Shutdown (it
// drains the queue and joins the thread), before the service, gate and cache go.
// Thread safety: Start and Shutdown from one thread; served() from any.
#ifndef SLURM_DDP_COORDINATOR_RPC_STATUS_QUEUE_H_
#define SLURM_DDP_COORDINATOR_RPC_STATUS_QUEUE_H_

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>

#include "coordinator/ops/status_cache.h"
#include "coordinator/rpc/call_gate.h"

namespace ddp {

class CoordinatorService;

// A GetStatusRequest has no fields; anything past this is refused unread.
inline constexpr size_t kMaxStatusRequestBytes = 1024;

class StatusQueue {
 public:
  // The pointers must outlive the queue; `cq` comes from ServerBuilder::AddCompletionQueue.
  StatusQueue(CoordinatorService* service, CallGate* gate, StatusCache* cache,
              std::unique_ptr<grpc::ServerCompletionQueue> cq);
  ~StatusQueue();
  StatusQueue(const StatusQueue&) = delete;
  StatusQueue& operator=(const StatusQueue&) = delete;

  // Requests the first call and starts the thread.
  void Start();
  // Stops taking calls, shuts the queue down once the thread has drained it. Idempotent.
  void Shutdown();
  // Calls answered OK so far.
  uint64_t served() const { return served_.load(std::memory_order_relaxed); }

 private:
  class Call;
  void Loop();

  CoordinatorService* const service_;
  CallGate* const gate_;
  StatusCache* const cache_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  grpc::Alarm stop_alarm_;  // wakes the thread to shut the queue down
  std::thread thread_;
  bool started_ = false;
  bool stopped_ = false;
  std::atomic<uint64_t> served_{0};
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_RPC_STATUS_QUEUE_H_
