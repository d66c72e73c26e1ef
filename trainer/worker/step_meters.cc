#include "trainer/worker/step_meters.h"

#include <ATen/ops/stack.h>
#include <ATen/ops/topk.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>

#include <algorithm>

namespace ddp {

void StepMeters::Add(const at::Tensor& loss, const at::Tensor& logits, const at::Tensor& labels) {
  c10::NoGradGuard no_grad;
  const int64_t n = labels.size(0);
  const int64_t k = std::min<int64_t>(5, logits.size(1));
  const at::Tensor pred = std::get<1>(at::topk(logits.detach(), k, 1));
  const at::Tensor hit = pred.eq(labels.view({-1, 1})).to(at::kDouble);
  last_ = at::stack({loss.detach().to(at::kDouble).reshape({}) * static_cast<double>(n),
                     hit.narrow(1, 0, 1).sum(), hit.sum()});
  if (!epoch_.defined()) {
    epoch_ = at::zeros_like(last_);
    window_ = at::zeros_like(last_);
  }
  epoch_.add_(last_);
  window_.add_(last_);
  last_n_ = n;
  epoch_n_ += n;
  window_n_ += n;
  ++window_steps_;
  ++steps_;
}

MeterReading StepMeters::Read(bool restart_since_previous) {
  MeterReading r;
  if (!last_.defined()) return r;
  const at::Tensor all = at::stack({last_, epoch_, window_}).cpu();
  const double* v = all.data_ptr<double>();
  auto per = [](double sum, int64_t n) { return n > 0 ? sum / static_cast<double>(n) : 0.0; };
  r.loss_last = per(v[0], last_n_);
  r.top1_last = 100 * per(v[1], last_n_);
  r.top5_last = 100 * per(v[2], last_n_);
  r.loss_avg = per(v[3], epoch_n_);
  r.top1_avg = 100 * per(v[4], epoch_n_);
  r.top5_avg = 100 * per(v[5], epoch_n_);
  r.loss_since_previous = per(v[6], window_n_);
  r.steps_since_previous = window_steps_;
  if (restart_since_previous) {
    window_.zero_();
    window_n_ = 0;
    window_steps_ = 0;
  }
  return r;
}

}  // namespace ddp
