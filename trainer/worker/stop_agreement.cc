#include "trainer/worker/stop_agreement.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "trainer/ddp/dist_errors.h"

namespace ddp {

StopCode LocalStopCode(bool stop_requested, bool coordinator_lost) {
  if (coordinator_lost) return StopCode::kCoordinatorLost;
  return stop_requested ? StopCode::kStop : StopCode::kNone;
}

StopCode AgreeStopCode(c10d::Backend& pg, StopCode local, const at::Device& device,
                       const char* what) {
  std::vector<at::Tensor> code = {
      at::full({1}, static_cast<int>(local), at::TensorOptions().dtype(at::kInt).device(device))};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::MAX;
  const auto issued = std::chrono::steady_clock::now();
  WaitForWork(*pg.allreduce(code, opts), pg, issued, what);
  const int agreed = code[0].item<int>();
  // Codes beyond the known ones (a newer peer) mean at least the most cautious known decision.
  return static_cast<StopCode>(std::clamp(agreed, static_cast<int>(StopCode::kNone),
                                          static_cast<int>(StopCode::kCoordinatorLost)));
}

const char* StopCodeName(StopCode code) {
  switch (code) {
    case StopCode::kNone:
      return "none";
    case StopCode::kStop:
      return "stop";
    case StopCode::kCoordinatorLost:
      return "coordinator lost";
  }
  return "unknown";
}

}  // namespace ddp
