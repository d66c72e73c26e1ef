#include "trainer/app/training_loop.h"

#include <ATen/autocast_mode.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/topk.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/sampler_plan.h"
#include "common/status_macros.h"
#include "trainer/app/checkpoint.h"
#include "trainer/data/gpu_jpeg_loader.h"
#include "trainer/data/image_folder_dataset.h"
#include "trainer/data/loader.h"

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Steps between the collective that lets every rank agree to stop at the same step.
constexpr int64_t kStopCheckInterval = 10;

// Running average, like the recipe's AverageMeter.
struct Meter {
  double last = 0, sum = 0;
  int64_t count = 0;
  void Add(double v, int64_t n = 1) {
    last = v;
    sum += v * static_cast<double>(n);
    count += n;
  }
  double avg() const { return count == 0 ? 0 : sum / static_cast<double>(count); }
};

// Correct top-1 and top-5 predictions in a batch.
std::pair<int64_t, int64_t> TopkCorrect(const at::Tensor& logits, const at::Tensor& labels) {
  const int64_t k = std::min<int64_t>(5, logits.size(1));
  const at::Tensor pred = std::get<1>(at::topk(logits, k, 1));
  const at::Tensor hit = pred.eq(labels.view({-1, 1}));
  const int64_t top1 = hit.narrow(1, 0, 1).sum().item<int64_t>();
  const int64_t topk = hit.sum().item<int64_t>();
  return {top1, topk};
}

std::string FirstLine(const std::exception& e) {
  std::string what = e.what();
  return what.substr(0, what.find('\n'));
}

class Loop {
 public:
  explicit Loop(const TrainingContext& ctx) : ctx_(ctx), c_(*ctx.config) {}

  absl::StatusOr<LoopResult> Run() {
    try {
      return RunUnsafe();
    } catch (const std::exception& e) {
      // A collective failed (peer gone, timeout). If the coordinator knows why, say that.
      return absl::UnavailableError(absl::StrCat("training step failed: ", FirstLine(e)));
    }
  }

 private:
  bool IsRank0() const { return ctx_.rank.rank == 0; }

  // An epoch's batches: through the GPU JPEG pipeline for image folders when it is set up, else
  // the CPU loader.
  absl::StatusOr<std::unique_ptr<data::BatchSource>> OpenBatches(const data::Dataset& dataset,
                                                                 std::vector<int64_t> indices,
                                                                 int64_t batch_size,
                                                                 int64_t epoch) const {
    const auto* folder = dynamic_cast<const data::ImageFolderDataset*>(&dataset);
    if (ctx_.gpu_decoder != nullptr && folder != nullptr) {
      data::GpuJpegLoaderOptions go;
      go.batch_size = batch_size;
      go.epoch = epoch;
      go.read_threads = std::max(1, c_.workers);
      ASSIGN_OR_RETURN(auto loader, data::GpuJpegLoader::Create(*folder, *ctx_.gpu_decoder,
                                                                std::move(indices), go));
      return std::unique_ptr<data::BatchSource>(std::move(loader));
    }
    data::LoaderOptions lo;
    lo.batch_size = batch_size;
    lo.workers = c_.workers;
    lo.epoch = epoch;
    lo.pin_memory = ctx_.device.is_cuda();
    ASSIGN_OR_RETURN(auto loader, data::Loader::Create(dataset, std::move(indices), lo));
    return std::unique_ptr<data::BatchSource>(std::move(loader));
  }

  // The model's input on its device, in its memory format.
  at::Tensor ToInput(const at::Tensor& images) const {
    at::Tensor x = images.to(ctx_.device, /*non_blocking=*/true);
    if (c_.channels_last && x.dim() == 4) x = x.contiguous(at::MemoryFormat::ChannelsLast);
    return x;
  }

  void Print(const std::string& line) const {
    std::fprintf(stdout, "%s%s\n", ctx_.log_prefix.c_str(), line.c_str());
    std::fflush(stdout);
  }

  absl::StatusOr<LoopResult> RunUnsafe() {
    LoopResult result;
    const int world = ctx_.rank.world_size;
    {
      ShardAssignment fresh;
      fresh.dataset_size = ctx_.train->size();
      fresh.world_size = world;
      fresh.consumed_world_size = world;
      steps_per_epoch_ = StepsPerEpoch(NumSamplesPerRank(fresh), c_.batch_size, false);
    }
    schedule_ = {c_.schedule,      c_.lr,     c_.lr_step_epochs,
                 c_.warmup_epochs, c_.epochs, steps_per_epoch_};
    step_ = ctx_.start.step;
    const auto train_start = Clock::now();
    const int64_t start_step = step_;

    for (int64_t epoch = ctx_.start.epoch; epoch < c_.epochs; ++epoch) {
      ShardRequest req;
      req.epoch = epoch;
      req.dataset_size = ctx_.train->size();
      req.seed = c_.seed;
      req.shuffle = true;
      req.drop_last = false;
      if (epoch == ctx_.start.epoch && ctx_.start.consumed > 0) {
        req.resume_consumed = ctx_.start.consumed;
        req.resume_world_size = ctx_.start.consumed_world_size;
      }
      ASSIGN_OR_RETURN(const ShardAssignment shard, ctx_.api->GetShard(req));
      RETURN_IF_ERROR(ValidateShardAssignment(shard));
      ASSIGN_OR_RETURN(const bool stopped, TrainEpoch(epoch, shard, &result));
      if (stopped) {
        result.outcome = LoopOutcome::kStopped;
        return result;
      }
      if (c_.evaluate) {
        ASSIGN_OR_RETURN(auto acc, Evaluate());
        result.final_top1 = acc.first;
        result.final_top5 = acc.second;
        if (IsRank0()) {
          Print(absl::StrFormat(" * Epoch %d: test Acc@1 %.3f Acc@5 %.3f", epoch, acc.first,
                                acc.second));
        }
      }
      if (!c_.checkpoint_dir.empty()) {
        RETURN_IF_ERROR(Checkpoint(epoch + 1, 0, world, &result));
      }
    }
    const double elapsed = Seconds(Clock::now() - train_start);
    if (IsRank0()) {
      const double samples = static_cast<double>((step_ - start_step) * c_.batch_size * world);
      Print(absl::StrFormat("done: %d epochs, %d steps in %.1f s, %.0f samples/s (all ranks)%s",
                            c_.epochs, step_, elapsed, elapsed > 0 ? samples / elapsed : 0.0,
                            result.final_top1 >= 0
                                ? absl::StrFormat("; test Acc@1 %.3f Acc@5 %.3f", result.final_top1,
                                                  result.final_top5)
                                : std::string()));
    }
    return result;
  }

  // Returns true when training stopped (checkpoint written) inside this epoch.
  absl::StatusOr<bool> TrainEpoch(int64_t epoch, const ShardAssignment& shard, LoopResult* result) {
    const int world = ctx_.rank.world_size;
    std::vector<int64_t> indices = ShardIndices(shard);
    const int64_t per_rank = static_cast<int64_t>(indices.size());
    ASSIGN_OR_RETURN(auto loader,
                     OpenBatches(*ctx_.train, std::move(indices), c_.batch_size, epoch));
    const int64_t start_consumed = shard.consumed;
    const int64_t g_world = shard.consumed > 0 ? shard.consumed_world_size : shard.world_size;
    const int64_t end_consumed = start_consumed + per_rank * world;
    const int64_t batches = loader->num_batches();

    ctx_.model->train(true);
    Meter batch_time, data_time, losses, top1, top5;
    auto tick = Clock::now();
    for (int64_t i = 0;; ++i) {
      ASSIGN_OR_RETURN(std::optional<data::Batch> batch, loader->Next());
      if (!batch) break;
      const double data_s = absl::ToDoubleSeconds(loader->last_wait());
      at::Tensor x = ToInput(batch->images);
      at::Tensor y = batch->labels.to(ctx_.device, /*non_blocking=*/true);
      const double lr = LearningRate(schedule_, epoch, step_);

      RETURN_IF_ERROR(ctx_.ddp->BeginStep());
      at::Tensor logits;
      {
        const bool autocast = c_.bf16 && ctx_.device.is_cuda();
        if (autocast) {
          at::autocast::set_autocast_enabled(at::kCUDA, true);
          at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
        }
        logits = ctx_.model->forward(x);
        if (autocast) {
          at::autocast::set_autocast_enabled(at::kCUDA, false);
          at::autocast::clear_cache();
        }
      }
      at::Tensor loss = at::cross_entropy_loss(logits.to(at::kFloat), y);
      RETURN_IF_ERROR(ctx_.ddp->Backward(loss));
      ctx_.ddp->BeginOptimizer();
      ctx_.sgd->Step(lr);
      ctx_.ddp->ZeroGrad();
      ctx_.ddp->EndOptimizer();
      ++step_;

      const auto now = Clock::now();
      const int64_t n = batch->labels.size(0);
      batch_time.Add(Seconds(now - tick));
      data_time.Add(data_s);
      tick = now;
      const bool print = IsRank0() && (i % c_.print_freq == 0 || i + 1 == batches);
      if (print || i % c_.print_freq == 0) {
        losses.Add(loss.item<double>(), n);
        c10::NoGradGuard no_grad;
        auto [c1, c5] = TopkCorrect(logits.detach(), y);
        top1.Add(100.0 * static_cast<double>(c1) / static_cast<double>(n), n);
        top5.Add(100.0 * static_cast<double>(c5) / static_cast<double>(n), n);
      }
      Report(epoch, losses.last, batch_time, data_time);
      if (print) {
        const int width = static_cast<int>(std::to_string(batches).size());
        Print(absl::StrFormat(
            "Epoch: [%d][%*d/%d]\tTime %6.3f (%6.3f)\tData %6.3f (%6.3f)\tLoss %.4e (%.4e)\t"
            "Acc@1 %6.2f (%6.2f)\tAcc@5 %6.2f (%6.2f)\tlr %.4g",
            epoch, width, i, batches, batch_time.last, batch_time.avg(), data_time.last,
            data_time.avg(), losses.last, losses.avg(), top1.last, top1.avg(), top5.last,
            top5.avg(), lr));
      }
      if (auto reason = ctx_.reporter->abort_reason()) {
        ctx_.reporter->AcknowledgeAbort();
        return absl::AbortedError(*reason);
      }
      const int64_t consumed =
          std::min(start_consumed + (i + 1) * c_.batch_size * world, end_consumed);
      ASSIGN_OR_RETURN(const bool stop, AgreeToStop());
      if (stop) {
        if (!c_.checkpoint_dir.empty()) {
          RETURN_IF_ERROR(Checkpoint(epoch, consumed, g_world, result));
        }
        if (IsRank0()) {
          Print(absl::StrCat("stopped at step ", step_, " (epoch ", epoch, ", ", consumed,
                             " samples of the epoch consumed); resumable"));
        }
        return true;
      }
      if (c_.checkpoint_every > 0 && step_ % c_.checkpoint_every == 0 &&
          !c_.checkpoint_dir.empty() && i + 1 < batches) {
        RETURN_IF_ERROR(Checkpoint(epoch, consumed, g_world, result));
      }
    }
    return false;
  }

  // Every rank must stop after the same step: --stop-after-steps is deterministic; a signal or
  // a coordinator command is agreed through a MAX allreduce every kStopCheckInterval steps.
  absl::StatusOr<bool> AgreeToStop() {
    if (c_.stop_after_steps > 0 && step_ - ctx_.start.step >= c_.stop_after_steps) return true;
    if (step_ % kStopCheckInterval != 0) return false;
    const bool local = ctx_.reporter->stop_requested() ||
                       (ctx_.signal_stop != nullptr && ctx_.signal_stop->load());
    std::vector<at::Tensor> flag = {
        at::full({1}, local ? 1 : 0, at::TensorOptions().dtype(at::kInt).device(ctx_.device))};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::MAX;
    ctx_.pg->allreduce(flag, opts)->wait();
    return flag[0].item<int>() != 0;
  }

  void Report(int64_t epoch, double loss, const Meter& batch_time, const Meter& data_time) {
    ProgressReport r;
    r.phase = WorkerPhase::kTraining;
    r.epoch = epoch;
    r.epochs = c_.epochs;
    r.step = step_;
    r.steps_per_epoch = steps_per_epoch_;
    r.loss = loss;
    r.samples_per_second = batch_time.last > 0 ? c_.batch_size / batch_time.last : 0;
    r.data_wait_share = batch_time.avg() > 0 ? data_time.avg() / batch_time.avg() : 0;
    const StepTimings t = ctx_.ddp->timings();
    r.forward_ms = t.forward_ms;
    r.backward_ms = t.backward_ms;
    r.comm_wait_ms = t.comm_wait_ms;
    r.optimizer_ms = t.optimizer_ms;
    r.overlap_share = t.overlap_share;
    ctx_.reporter->Update(r);
  }

  // Rank 0 writes (epoch, consumed) atomically and tells the coordinator; others do nothing.
  absl::Status Checkpoint(int64_t epoch, int64_t consumed, int64_t g_world, LoopResult* result) {
    if (!IsRank0()) return absl::OkStatus();
    CheckpointState s;
    s.model = ctx_.model->state_dict();
    s.momentum = ctx_.sgd->MomentumBuffers();
    s.lr = LearningRate(schedule_, epoch, step_);
    s.base_lr = c_.lr;
    s.momentum_factor = c_.momentum;
    s.weight_decay = c_.weight_decay;
    s.nesterov = c_.nesterov;
    s.schedule = c_.schedule;
    s.epoch = epoch;
    s.step = step_;
    s.consumed = consumed;
    s.consumed_world_size = g_world;
    s.seed = c_.seed;
    const std::string path = CheckpointPath(c_.checkpoint_dir, step_);
    RETURN_IF_ERROR(WriteCheckpoint(path, s));
    PruneCheckpoints(c_.checkpoint_dir, c_.keep_checkpoints);
    result->checkpoint = path;
    CommittedCheckpoint committed{epoch, step_, consumed, path};
    if (absl::Status st = ctx_.api->CommitCheckpoint(committed); !st.ok()) {
      Print(absl::StrCat("warning: checkpoint written but not committed: ", st.message()));
    }
    return absl::OkStatus();
  }

  // Top-1/top-5 accuracy (percent) over the whole test split: rank r takes r, r+W, ...
  absl::StatusOr<std::pair<double, double>> Evaluate() {
    const int world = ctx_.rank.world_size;
    std::vector<int64_t> indices;
    for (int64_t i = ctx_.rank.rank; i < ctx_.test->size(); i += world) indices.push_back(i);
    ASSIGN_OR_RETURN(auto loader, OpenBatches(*ctx_.test, std::move(indices), 256, 0));
    ctx_.model->train(false);
    int64_t c1 = 0, c5 = 0, count = 0;
    {
      c10::NoGradGuard no_grad;
      for (;;) {
        ASSIGN_OR_RETURN(std::optional<data::Batch> batch, loader->Next());
        if (!batch) break;
        const at::Tensor logits = ctx_.model->forward(ToInput(batch->images));
        auto [a, b] = TopkCorrect(logits.to(at::kFloat), batch->labels.to(ctx_.device));
        c1 += a;
        c5 += b;
        count += batch->labels.size(0);
      }
    }
    ctx_.model->train(true);
    std::vector<at::Tensor> sums = {
        at::tensor({static_cast<double>(c1), static_cast<double>(c5), static_cast<double>(count)},
                   at::kDouble)
            .to(ctx_.device)};
    ctx_.pg->allreduce(sums)->wait();
    const at::Tensor s = sums[0].cpu();
    const double total = s[2].item<double>();
    if (total <= 0) return std::make_pair(0.0, 0.0);
    return std::make_pair(100.0 * s[0].item<double>() / total, 100.0 * s[1].item<double>() / total);
  }

  const TrainingContext& ctx_;
  const TrainerConfig& c_;
  ScheduleOptions schedule_;
  int64_t steps_per_epoch_ = 0;
  int64_t step_ = 0;
};

}  // namespace

absl::StatusOr<LoopResult> RunTrainingLoop(const TrainingContext& ctx) { return Loop(ctx).Run(); }

}  // namespace ddp
