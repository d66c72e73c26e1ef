// Methods served asynchronously, on completion queues and threads of the coordinator's own
// instead of gRPC's callback threads and queue. Two sets use it (server.cc):
// - GetStatus, on one queue and thread: every other method runs on gRPC's callback threads, which
//   at 16,384 ranks are busy with registrations and thousands of heartbeats a second, so an
//   operator's GetStatus (ddpctl status, a dashboard) is not queued behind them. Its answer is
//   the status snapshot's pre-serialized bytes (status_cache.h), a memcpy per call; a snapshot
//   rebuilt on demand (a registration just changed the job) is built on this thread too.
// - Register and Rejoin, the calls that wait for the world, spread over kParkedQueues queues. A
//   callback-API server has one completion queue for all its callback calls, and a build of gRPC
//   with debug checks (Debian's libgrpc is built without NDEBUG) looks every completed operation
//   up in its queue's list of outstanding tags by a linear scan. Each open call keeps one tag
//   there until it ends (its close notification), so while 16,384 Register calls waited for the
//   world, each of the rendezvous's other completions (reads, replies, GetShard, heartbeats)
//   scanned ~16,000 entries: 15% of the coordinator's CPU in `perf`. Spread over their own
//   queues, each scan is a fraction as long, and the callback queue keeps only the short calls.
//
// A method here is served as every other method is (unary_call.h): the call passes the CallGate
// on its headers, before its body is read (a refused call is answered at once, its body never
// read); an admitted call reads one request message, which the method's Body bounds and answers
// through its Reply, at once or later from any thread. On the wire it is an ordinary unary call.
//
// Lifetime: Start() after the server is built; Shutdown() after grpc::Server::Shutdown (it
// drains the queues and joins the threads), before the service and gate go.
// Thread safety: Start and Shutdown from one thread.
#ifndef SLURM_DDP_COORDINATOR_RPC_ASYNC_QUEUES_H_
#define SLURM_DDP_COORDINATOR_RPC_ASYNC_QUEUES_H_

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <thread>
#include <vector>

#include "coordinator/rpc/call_gate.h"
#include "coordinator/rpc/service.h"

namespace ddp {

// The queues (each with a thread) that Register and Rejoin are spread over, and the calls of
// each requested ahead on each queue (a burst of 16,384 registrations).
inline constexpr int kParkedQueues = 4;
inline constexpr int kParkedRequestsAhead = 16;

class AsyncQueues {
 public:
  // Serves `methods` on `cqs` (from ServerBuilder::AddCompletionQueue), keeping `requests_ahead`
  // calls of each method requested on each queue, so that a burst is matched as it arrives
  // rather than one call per turn of a queue's thread. The pointers must outlive this.
  AsyncQueues(CoordinatorService* service, CallGate* gate,
              std::vector<CoordinatorService::AsyncMethod> methods, int requests_ahead,
              std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs);
  ~AsyncQueues();
  AsyncQueues(const AsyncQueues&) = delete;
  AsyncQueues& operator=(const AsyncQueues&) = delete;

  // Requests the first calls of every method on every queue and starts the threads.
  void Start();
  // Stops taking calls and shuts each queue down once its thread has drained it. Idempotent.
  void Shutdown();

 private:
  class Call;
  struct Queue {
    std::unique_ptr<grpc::ServerCompletionQueue> cq;
    grpc::Alarm stop_alarm;  // wakes the thread to shut the queue down
    std::thread thread;
  };
  void Loop(Queue* queue);

  CoordinatorService* const service_;
  CallGate* const gate_;
  const std::vector<CoordinatorService::AsyncMethod> methods_;
  const int requests_ahead_;
  std::vector<std::unique_ptr<Queue>> queues_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_RPC_ASYNC_QUEUES_H_
