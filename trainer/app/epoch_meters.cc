#include "trainer/app/epoch_meters.h"

#include "absl/strings/str_format.h"

namespace ddp {

std::string ProgressLine(int64_t epoch, int64_t i, int64_t batches, const EpochMeters& m,
                         const MeterReading& r, double lr) {
  const int width = static_cast<int>(std::to_string(batches).size());
  return absl::StrFormat(
      "Epoch: [%d][%*d/%d]\tTime %6.3f (%6.3f)\tData %6.3f (%6.3f)\tLoss %.4e (%.4e)\t"
      "Acc@1 %6.2f (%6.2f)\tAcc@5 %6.2f (%6.2f)\tlr %.4g",
      epoch, width, i, batches, m.batch_time.last, m.batch_time.avg(), m.data_time.last,
      m.data_time.avg(), r.loss_last, r.loss_avg, r.top1_last, r.top1_avg, r.top5_last, r.top5_avg,
      lr);
}

ProgressReport TrainingProgress(const EpochMeters& m, const StepTimings& t, int64_t batch_size) {
  ProgressReport r;
  r.phase = WorkerPhase::kTraining;
  r.loss = m.reported_loss;
  r.samples_per_second =
      m.batch_time.last > 0 ? static_cast<double>(batch_size) / m.batch_time.last : 0;
  r.data_wait_share = m.batch_time.avg() > 0 ? m.data_time.avg() / m.batch_time.avg() : 0;
  r.forward_ms = t.forward_ms;
  r.backward_ms = t.backward_ms;
  r.comm_wait_ms = t.comm_wait_ms;
  r.optimizer_ms = t.optimizer_ms;
  r.overlap_share = t.overlap_share;
  return r;
}

}  // namespace ddp
