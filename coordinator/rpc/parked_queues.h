// The calls that park until the world is complete (Register, Rejoin) on completion queues and
// threads of their own, spread over several queues.
//
// Why: a callback-API server has one completion queue for all its callback calls, and a build of
// gRPC with debug checks (Debian's libgrpc is built without NDEBUG) checks every completed
// operation against the queue's list of outstanding tags by a linear scan. Each open call keeps
// one tag outstanding until it ends (its close notification), so while 16,384 Register calls
// wait for the world, each of the ~130,000 other completions of the rendezvous (reads, replies,
// GetShard, heartbeats) scanned ~16,000 entries: 15% of the coordinator's CPU in `perf`. Here
// the parked calls are spread over `kParkedQueues` queues, so each scan is a fraction as long,
// and the callback queue keeps only the short calls.
//
// A parked method is served as every other method is (unary_call.h): the call passes the
// CallGate on its headers, before its body is read (a refused call is answered at once, its body
// never read); an admitted call reads one request message, which the method's Body bounds and
// answers through its Reply, at once or later from any thread. On the wire it is an ordinary
// unary call.
//
// Lifetime: Start() after the server is built; Shutdown() after grpc::Server::Shutdown (it
// drains the queues and joins the threads), before the service and gate go.
// Thread safety: Start and Shutdown from one thread.
#ifndef SLURM_DDP_COORDINATOR_RPC_PARKED_QUEUES_H_
#define SLURM_DDP_COORDINATOR_RPC_PARKED_QUEUES_H_

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <thread>
#include <vector>

#include "coordinator/rpc/call_gate.h"
#include "coordinator/rpc/unary_call.h"

namespace ddp {

class CoordinatorService;

// The queues (each with a thread) that parked calls are spread over.
inline constexpr int kParkedQueues = 4;

class ParkedQueues {
 public:
  // `cqs` come from ServerBuilder::AddCompletionQueue; the pointers must outlive this.
  ParkedQueues(CoordinatorService* service, CallGate* gate,
               std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs);
  ~ParkedQueues();
  ParkedQueues(const ParkedQueues&) = delete;
  ParkedQueues& operator=(const ParkedQueues&) = delete;

  // Requests the first calls of every parked method on every queue and starts the threads.
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
  std::vector<std::unique_ptr<Queue>> queues_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_RPC_PARKED_QUEUES_H_
