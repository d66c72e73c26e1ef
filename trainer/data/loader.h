// Loads a rank's batches for one epoch, in exactly the order of the given sample indices, in the
// background.
//
// The caller (the training loop) computes the rank's index order for the epoch (common/
// sampler_plan.h) and creates one Loader per epoch. Batch k holds indices
// [k*B, min((k+1)*B, n)); with drop_last the final short batch is dropped. With workers > 0,
// worker threads fill batches ahead of the consumer, at most `prefetch` batches beyond the one
// Next() is waiting for (a bounded queue: memory stays at about prefetch batches). Batches are
// delivered in order whatever order the workers finish in. With workers == 0 Next() loads the
// batch in the calling thread.
//
// Worker threads run torch ops with intra-op parallelism switched off (like PyTorch's DataLoader
// workers, which call torch.set_num_threads(1)), so they do not compete with the training thread.
//
// Errors: a dataset error in any batch is returned by the Next() that reaches that batch; Next()
// keeps returning it afterwards.
//
// Thread safety: Next() and the accessors are for one consumer thread. The destructor stops the
// workers and joins them, even mid-epoch (a worker finishes at most the batch it is loading).
#ifndef SLURM_DDP_TRAINER_DATA_LOADER_H_
#define SLURM_DDP_TRAINER_DATA_LOADER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "trainer/data/batch_source.h"
#include "trainer/data/dataset.h"

namespace ddp::data {

struct LoaderOptions {
  int64_t batch_size = 64;
  bool drop_last = false;
  int workers = 2;          // background threads; 0 loads in the thread calling Next()
  int prefetch = 0;         // batches loaded ahead; 0 means 2 * workers (at least 1)
  bool pin_memory = false;  // page-locked batches for fast, async host-to-GPU copies (needs CUDA)
  int64_t epoch = 0;        // passed to Dataset::GetBatch (augmentation)
};

class Loader : public BatchSource {
 public:
  // `dataset` must outlive the Loader. Errors: batch_size < 1, workers < 0, pin_memory without
  // CUDA.
  static absl::StatusOr<std::unique_ptr<Loader>> Create(const Dataset& dataset,
                                                        std::vector<int64_t> indices,
                                                        LoaderOptions options);
  ~Loader() override;
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch in order; std::nullopt after the last one.
  absl::StatusOr<std::optional<Batch>> Next() override;

  int64_t num_batches() const override { return num_batches_; }
  // Batches returned so far.
  int64_t batches_returned() const { return next_; }
  // Total time Next() spent waiting for data (loading, with workers == 0), and for the last call.
  absl::Duration total_wait() const override { return total_wait_; }
  absl::Duration last_wait() const override { return last_wait_; }

 private:
  struct Slot {
    bool ready = false;
    absl::StatusOr<Batch> batch;
  };

  Loader(const Dataset& dataset, std::vector<int64_t> indices, LoaderOptions options);
  absl::StatusOr<Batch> Load(int64_t batch) const;
  void WorkerLoop();

  const Dataset& dataset_;
  const std::vector<int64_t> indices_;
  const LoaderOptions options_;
  const int64_t num_batches_;
  const int prefetch_;

  // Consumer state (the thread calling Next()).
  int64_t next_ = 0;
  absl::Duration total_wait_;
  absl::Duration last_wait_;
  std::optional<absl::Status> failed_;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t consumed_ ABSL_GUARDED_BY(mu_) = 0;     // == next_, published to the workers
  int64_t claimed_ ABSL_GUARDED_BY(mu_) = 0;      // next batch a worker will take
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);  // batch k lives in slots_[k % prefetch_]

  std::vector<std::thread> workers_;
};

}  // namespace ddp::data

#endif  // SLURM_DDP_TRAINER_DATA_LOADER_H_
