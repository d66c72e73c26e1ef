#include "trainer/app/evaluation.h"

#include <ATen/ops/tensor.h>
#include <ATen/ops/topk.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

#include "common/status_macros.h"
#include "trainer/data/batch_source.h"
#include "trainer/ddp/dist_errors.h"
#include "trainer/worker/step_runner.h"

namespace ddp {

std::pair<int64_t, int64_t> TopkCorrect(const at::Tensor& logits, const at::Tensor& labels) {
  const int64_t k = std::min<int64_t>(5, logits.size(1));
  const at::Tensor pred = std::get<1>(at::topk(logits, k, 1));
  const at::Tensor hit = pred.eq(labels.view({-1, 1}));
  const int64_t top1 = hit.narrow(1, 0, 1).sum().item<int64_t>();
  const int64_t topk = hit.sum().item<int64_t>();
  return {top1, topk};
}

absl::StatusOr<std::pair<double, double>> EvaluateAccuracy(
    const DataStage& data, ModelStage& stage, c10d::Backend& pg, int workers,
    const std::function<void()>& after_first_batch) {
  const at::Device device = stage.device();
  std::vector<int64_t> indices;
  for (int64_t i = pg.getRank(); i < data.test().size(); i += pg.getSize()) indices.push_back(i);
  ASSIGN_OR_RETURN(auto loader,
                   data.OpenBatches(data.test(), std::move(indices), 256, 0, workers, device));
  models::Model& model = stage.model();
  model.train(false);
  int64_t c1 = 0, c5 = 0, count = 0;
  {
    c10::NoGradGuard no_grad;
    for (;;) {
      ASSIGN_OR_RETURN(std::optional<data::Batch> batch, loader->Next());
      if (!batch) break;
      const at::Tensor logits = model.forward(ModelInput(stage, batch->images));
      auto [a, b] = TopkCorrect(logits.to(at::kFloat), batch->labels.to(device));
      c1 += a;
      c5 += b;
      if (count == 0 && after_first_batch) after_first_batch();
      count += batch->labels.size(0);
    }
  }
  model.train(true);
  std::vector<at::Tensor> sums = {
      at::tensor({static_cast<double>(c1), static_cast<double>(c5), static_cast<double>(count)},
                 at::kDouble)
          .to(device)};
  const auto issued = std::chrono::steady_clock::now();
  WaitForWork(*pg.allreduce(sums), pg, issued, "evaluation: summing accuracy");
  const at::Tensor s = sums[0].cpu();
  const double total = s[2].item<double>();
  if (total <= 0) return std::make_pair(0.0, 0.0);
  return std::make_pair(100.0 * s[0].item<double>() / total, 100.0 * s[1].item<double>() / total);
}

}  // namespace ddp
