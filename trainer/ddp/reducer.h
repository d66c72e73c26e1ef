// The gradient reducer at the heart of DDP: flat gradient buckets, autograd hooks that launch an
// asynchronous allreduce for each bucket as soon as all of its gradients are ready (strictly in
// bucket order on every rank, overlapping with the rest of backward), and a finalizer queued on
// the autograd engine so that gradients are averaged when backward() returns. The algorithm
// mirrors PyTorch's c10d Reducer (torch/csrc/distributed/c10d/reducer.cpp):
//
//   * Buckets hold parameters in reverse registration order (roughly the order in which backward
//     produces their gradients), one dtype/device per bucket, the first one capped at
//     first_bucket_bytes and the rest at bucket_bytes. After the first synchronized backward the
//     buckets are rebuilt once from the gradient-ready order observed on rank 0 (broadcast, so
//     every rank agrees).
//   * Gradients live in the buckets: after a synchronized backward, param.grad() is a view into
//     its bucket's flat tensor (PyTorch's gradient_as_bucket_view=True). When param.grad() is
//     a bucket view (after ZeroGrad() or optimizer.zero_grad(), which set grads to none, as
//     PyTorch does) the hook divides it while copying it into the bucket and repoints grad().
//   * Averaging is PyTorch's: each gradient is multiplied by 1/world_size when it enters its
//     bucket, then the bucket is SUM-allreduced. With comm_dtype set (bf16/fp16) the bucket is
//     cast after the division, allreduced in that dtype and cast back.
//   * A parameter that got no gradient in a synchronized backward is an error naming it. With
//     find_unused_parameters it is marked ready at the end of backward with a zero local
//     gradient, so its grad() becomes sum(gradients of ranks that used it) / world_size -- zero
//     if no rank used it (PyTorch instead leaves a globally unused grad untouched).
//
// Errors are thrown as c10::Error, a failed collective as typed in dist_errors.h (this file
// depends on LibTorch only, so the GPU benchmark can build it without abseil);
// DistributedDataParallel (ddp.h) is the absl::Status boundary.
//
// Thread safety: the hooks may run on autograd worker threads; all mutable state is guarded by
// mu_. The public methods are for the training thread, and not while a backward is running.
#ifndef SLURM_DDP_TRAINER_DDP_REDUCER_H_
#define SLURM_DDP_TRAINER_DDP_REDUCER_H_

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <vector>

namespace ddp {

struct ReducerOptions {
  int64_t first_bucket_bytes = int64_t{1} << 20;  // 1 MiB, as PyTorch
  int64_t bucket_bytes = int64_t{25} << 20;       // 25 MiB, as PyTorch
  // 0 for either limit means "no cap" (everything of one dtype in one bucket). A negative
  // bucket_bytes puts each parameter in its own bucket.
  bool find_unused_parameters = false;
  bool rebuild_buckets = true;  // once, after the first synchronized backward
  // Allreduce in this floating type (kBFloat16 or kHalf) instead of the gradient's.
  std::optional<at::ScalarType> comm_dtype;
  // Non-empty: the buckets come from this parameter order (agreed_order() of an earlier reducer
  // over the same parameters) from the start, and are never rebuilt.
  std::vector<size_t> initial_order;
};

// Per-step measurements. The reducer fills backward/comm fields; forward and optimizer are
// filled by DistributedDataParallel's step markers (or by the caller).
struct StepTimings {
  double forward_ms = 0;    // BeginStep -> Backward
  double backward_ms = 0;   // backward() called -> backward's last gradient computed
  double comm_wait_ms = 0;  // blocked at the end of backward waiting for allreduces
  double optimizer_ms = 0;
  double allreduce_span_ms = 0;  // first bucket launched -> last bucket done
  // Share of allreduce_span_ms hidden behind backward: 1 - comm_wait / span (0 when no comm).
  double overlap_share = 0;
  int64_t buckets = 0;
  int64_t allreduce_calls = 0;  // issued in this backward (== buckets when synchronized)
  bool synchronized = false;    // false for a no_sync backward
  // Bucket launch times and the time of the last gradient hook, relative to backward start.
  std::vector<double> bucket_launch_ms;
  double last_grad_ready_ms = 0;
};

class Reducer {
 public:
  // `params` (with names, for error messages) must be leaf tensors requiring grad; they are
  // kept alive by the reducer. `pg` is used from the autograd threads and must outlive it.
  Reducer(std::vector<std::string> names, std::vector<at::Tensor> params,
          c10::intrusive_ptr<c10d::Backend> pg, ReducerOptions options);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // While false, backward only accumulates local gradients (no_sync).
  void set_sync_enabled(bool enabled);
  bool sync_enabled() const;

  // Marks the start of backward (for timings); optional.
  void MarkBackwardStart();

  // Sets every param.grad() to none (PyTorch's zero_grad(set_to_none=True)); the next backward
  // moves fresh gradients into the buckets with one pass.
  void ZeroGrad();

  StepTimings last_timings() const;
  // Parameter indices per bucket, in launch order.
  std::vector<std::vector<size_t>> bucket_assignment() const;
  // The order the buckets were built from after the rebuild (or initial_order); empty before.
  std::vector<size_t> agreed_order() const;

  // Bucket assignment of parameters taken in `order` (indices), PyTorch's rule; public for tests.
  static std::vector<std::vector<size_t>> ComputeBuckets(const std::vector<at::Tensor>& params,
                                                         const std::vector<size_t>& order,
                                                         int64_t first_bucket_bytes,
                                                         int64_t bucket_bytes);

 private:
  struct Bucket {
    at::Tensor flat;
    std::vector<size_t> params;
    size_t pending = 0;
    bool launched = false;
    at::Tensor comm;  // what was allreduced (== flat unless comm_dtype)
    c10::intrusive_ptr<c10d::Work> work;
    std::chrono::steady_clock::time_point launched_at;
  };
  struct Slot {
    size_t bucket = 0;
    at::Tensor view;  // into buckets_[bucket].flat
    bool ready = false;
  };
  using Clock = std::chrono::steady_clock;

  void InstallBuckets(const std::vector<std::vector<size_t>>& assignment);
  void OnGradReady(size_t index);
  void MarkReadyLocked(size_t index);
  void LaunchReadyBucketsLocked();
  void Finalize();
  void ResetIterationLocked();
  void RebuildBucketsLocked();
  double MsSince(Clock::time_point t) const;

  const std::vector<std::string> names_;
  const std::vector<at::Tensor> params_;
  const c10::intrusive_ptr<c10d::Backend> pg_;
  const ReducerOptions options_;
  const double world_size_;
  std::vector<std::shared_ptr<torch::autograd::Node>> grad_accumulators_;
  std::vector<uintptr_t> hook_keys_;

  mutable std::mutex mu_;
  bool sync_enabled_ = true;
  std::vector<Bucket> buckets_;
  std::vector<Slot> slots_;
  size_t next_bucket_ = 0;
  bool in_backward_ = false;
  bool backward_start_marked_ = false;
  Clock::time_point backward_start_;
  Clock::time_point first_launch_;
  Clock::time_point last_ready_;
  std::vector<size_t> ready_order_;  // this backward's gradient-ready order
  bool rebuilt_ = false;
  std::vector<size_t> agreed_order_;
  StepTimings current_;
  StepTimings last_;
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_DDP_REDUCER_H_
