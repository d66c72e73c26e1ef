// DistributedDataParallel: data-parallel training over a c10d process group, PyTorch's DDP for
// C++. It owns no model: it takes the model's named parameters and buffers (TensorsOf() adapts
// torch::nn::Module and TorchScript modules), so any model representation works.
//
// At construction it checks that every rank has the same parameters and buffers (count, shape,
// dtype; a mismatch names the tensor and the ranks) and broadcasts them from rank 0 (init_sync;
// off when the caller synced them itself). Gradient averaging is done by Reducer (reducer.h:
// buckets, overlap with backward, bucket rebuild).
//
// One training step, from the trainer's thread, through the step guard (ddp_step.h) that keeps
// the order:
//
//   ASSIGN_OR_RETURN(DdpStep step, DdpStep::Begin(*ddp));  // forward timer
//   at::Tensor loss = criterion(model.forward(x), y);
//   RETURN_IF_ERROR(step.Backward(loss));     // averaged gradients in param.grad(), and rank 0's
//                                             // buffers (BatchNorm statistics) on every rank
//   RETURN_IF_ERROR(step.ApplyOptimizer([&] { optimizer.step(); }));  // then ZeroGrad()
//   StepTimings t = ddp->timings();           // forward/backward/comm wait/optimizer/overlap
//
// Buffers: PyTorch broadcasts rank 0's buffers before each forward; we broadcast the same values
// one moment earlier, at the end of each Backward() (nothing changes them in between), so that
// every rank leaves a step with rank 0's buffers. Rank 0's own buffers evolve exactly as in
// PyTorch, and at every step boundary all ranks are exact replicas (parameters, buffers,
// optimizer state): any of them can hand the full state to a replacement (state_sync.h).
//
// The engine can be destroyed and built again over the same model (a new process group after a
// failure): gradient_order() is the bucket layout this engine agreed on, and passing it back as
// ReducerOptions::initial_order gives the new engine the same buckets, hence the same reduction
// order and bitwise the same gradients as an uninterrupted run.
//
// Backward() is loss.backward() plus timing and error conversion; a plain loss.backward() also
// finalizes (the reducer queues its finalizer on the autograd engine), so averaged gradients can
// never be forgotten. Gradient accumulation: run the first micro-batches under
// `auto guard = ddp->NoSync();` and the last one without it.
//
// Thread safety: one training thread calls everything; c10d's rule applies (every rank runs the
// same sequence of steps).
#ifndef SLURM_DDP_TRAINER_DDP_DDP_H_
#define SLURM_DDP_TRAINER_DDP_DDP_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/ddp/reducer.h"
#include "trainer/named_tensor.h"

namespace torch::nn {
class Module;
}  // namespace torch::nn
namespace torch::jit {
struct Module;
}  // namespace torch::jit

namespace ddp {

struct ModuleTensors {
  std::vector<NamedTensor> parameters;  // all parameters (those not requiring grad are synced
                                        // at construction but not reduced)
  std::vector<NamedTensor> buffers;
};

// Adapters: the named parameters and buffers of a module (recursively, with dotted names).
ModuleTensors TensorsOf(const torch::nn::Module& module);
ModuleTensors TensorsOf(const torch::jit::Module& module);

struct DdpOptions {
  ReducerOptions reducer;
  // Broadcast buffers (e.g. BatchNorm running statistics) from rank 0 after every Backward().
  bool broadcast_buffers = true;
  // Broadcast parameters and buffers from rank 0 at construction (PyTorch's init_sync). The
  // check that every rank has the same tensors runs either way.
  bool init_sync = true;
};

class DistributedDataParallel {
 public:
  // Verifies parameters and buffers across ranks, broadcasts them from rank 0 and installs the
  // gradient hooks. A collective: every rank calls it. `pg` must outlive the returned object.
  static absl::StatusOr<std::unique_ptr<DistributedDataParallel>> Create(
      ModuleTensors tensors, c10::intrusive_ptr<c10d::Backend> pg, DdpOptions options = {});

  // Start of a step (before forward): starts the forward timer.
  absl::Status BeginStep();
  // loss.backward(); on return the gradients are averaged across ranks (unless in NoSync) and
  // the buffers are rank 0's (broadcast_buffers). Collective failures (a peer gone, the
  // process-group timeout) come back as errors.
  absl::Status Backward(const at::Tensor& loss);
  void BeginOptimizer();
  void EndOptimizer();
  // Sets gradients to none (PyTorch's default zero_grad); same as optimizer.zero_grad().
  void ZeroGrad() { reducer_->ZeroGrad(); }

  // Timings of the last completed step (optimizer_ms once EndOptimizer() ran).
  StepTimings timings() const { return timings_; }

  // RAII: while alive, backward accumulates local gradients without communication.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(Reducer* reducer);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    Reducer* reducer_;
    bool previous_;
  };
  [[nodiscard]] NoSyncGuard NoSync() { return NoSyncGuard(reducer_.get()); }

  Reducer& reducer() { return *reducer_; }
  // Parameter order (indices into the reduced parameters) that fixed the buckets; empty until the
  // buckets were rebuilt after the first synchronized backward.
  std::vector<size_t> gradient_order() const { return reducer_->agreed_order(); }
  const std::vector<NamedTensor>& parameters() const { return tensors_.parameters; }
  const std::vector<NamedTensor>& buffers() const { return tensors_.buffers; }

 private:
  using Clock = std::chrono::steady_clock;
  DistributedDataParallel(ModuleTensors tensors, c10::intrusive_ptr<c10d::Backend> pg,
                          DdpOptions options);
  absl::Status SyncBuffers();

  ModuleTensors tensors_;
  c10::intrusive_ptr<c10d::Backend> pg_;
  DdpOptions options_;
  std::unique_ptr<Reducer> reducer_;
  Clock::time_point step_start_;
  Clock::time_point optimizer_start_;
  StepTimings timings_;
};

// Broadcasts `tensors` from `root` in place, coalesced into one flat tensor per dtype/device.
// Throws c10::Error (a failed broadcast as typed in dist_errors.h).
void BroadcastCoalesced(c10d::Backend& pg, const std::vector<at::Tensor>& tensors, int root);

// Throws c10::Error naming the first tensor whose count/shape/dtype differs between ranks (a
// failed collective as typed in dist_errors.h).
void VerifyAcrossRanks(c10d::Backend& pg, const ModuleTensors& tensors);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_DDP_DDP_H_
