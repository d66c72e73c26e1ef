// Evaluation: top-1/top-5 accuracy over the whole test split, each rank of the process group
// taking its share of the samples and one allreduce summing the hits.
//
// Thread safety: runs on the training thread (it issues a collective on `pg`).
#ifndef SLURM_DDP_TRAINER_APP_EVALUATION_H_
#define SLURM_DDP_TRAINER_APP_EVALUATION_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <utility>

#include "absl/status/statusor.h"
#include "trainer/worker/data_stage.h"
#include "trainer/worker/model_stage.h"

namespace ddp {

// Correct top-1 and top-5 predictions in a batch: logits [N, classes], labels [N].
std::pair<int64_t, int64_t> TopkCorrect(const at::Tensor& logits, const at::Tensor& labels);

// Top-1/top-5 accuracy (percent) of `model` over `data`'s test split: rank r of `pg` takes
// samples r, r+W, ... (`workers` loader threads); `after_first_batch` runs once, after the first
// batch (an end-to-end test's hold point). The model is back in training mode on return.
absl::StatusOr<std::pair<double, double>> EvaluateAccuracy(
    const DataStage& data, ModelStage& model, c10d::Backend& pg, int workers,
    const std::function<void()>& after_first_batch);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_APP_EVALUATION_H_
