#include "trainer/app/training_loop.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/job_status.h"
#include "common/sampler_plan.h"
#include "common/status_macros.h"
#include "trainer/app/epoch_meters.h"
#include "trainer/app/evaluation.h"
#include "trainer/app/stage_options.h"
#include "trainer/checkpoint/checkpoint_store.h"
#include "trainer/data/batch_source.h"
#include "trainer/ddp/dist_errors.h"
#include "trainer/worker/step_meters.h"
#include "trainer/worker/step_runner.h"
#include "trainer/worker/stop_agreement.h"

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Steps between the collectives that let every rank agree to stop at the same step.
constexpr int64_t kStopCheckInterval = 10;

// How often the loss sent to the coordinator is refreshed (one host sync each time): about once
// per heartbeat.
constexpr auto kLossRefresh =
    std::chrono::milliseconds(static_cast<int>(kHeartbeatPeriodSeconds * 1000));

// Where an epoch's positions of the global sample order start and end for this world.
struct EpochSpan {
  int64_t start_consumed = 0;
  int64_t end_consumed = 0;
  int64_t consumed_world = 0;  // the world whose order the positions refer to
  int64_t world = 0;
};

class Loop {
 public:
  explicit Loop(const TrainingContext& ctx)
      : ctx_(ctx),
        c_(ctx.config),
        pos_(ctx.position),
        start_step_(ctx.run_start_step),
        result_(ctx.result) {}

  absl::StatusOr<LoopResult> Run() {
    PlanSchedule();
    const auto started = Clock::now();
    while (pos_.epoch < c_.epochs) {
      ASSIGN_OR_RETURN(const std::optional<ShardAssignment> shard, RequestShard());
      // A rank may have waited for the coordinator here (or given up on it): every rank agrees
      // before the epoch's first step.
      StopCode stop = Agree(shard ? LocalCode() : StopCode::kCoordinatorLost,
                            "agreeing to stop at the epoch's start");
      if (stop == StopCode::kNone) {
        ASSIGN_OR_RETURN(stop, TrainEpoch(*shard));
      }
      if (stop != StopCode::kNone) {
        RETURN_IF_ERROR(StopHere(stop));
        result_.outcome = stop == StopCode::kCoordinatorLost ? LoopOutcome::kCoordinatorLost
                                                             : LoopOutcome::kStopped;
        return result_;
      }
      RETURN_IF_ERROR(FinishEpoch());
    }
    // A replacement rank 0 that joined after the last epoch's checkpoint still leaves one for
    // final.pt.
    if (result_.checkpoint.empty() && !c_.checkpoint_dir.empty()) {
      RETURN_IF_ERROR(Checkpoint(CheckpointKind::kFinal));
    }
    // No rank reports its end before rank 0's last checkpoint is written: a rank lost until then
    // (rank 0 killed mid-write) is recovered in the job, as at any other step, because the others
    // are still members that can rejoin (a rank that had reported done could not). One small
    // allreduce per run.
    if (c_.max_restarts > 0) {
      Agree(StopCode::kNone, "agreeing the run is complete");
      // A recovery after the last step: its line is printed here (no step follows).
      if (ctx_.recovery != nullptr) ctx_.recovery->OnStepCommitted();
    }
    PrintSummary(started);
    return result_;
  }

 private:
  int Rank() { return ctx_.comm.process_group().getRank(); }
  void Hold(TestHold::Point point) {
    if (ctx_.hold != nullptr) ctx_.hold->At(point, Rank(), pos_.step);
  }
  int World() { return ctx_.comm.process_group().getSize(); }
  bool IsRank0() { return Rank() == 0; }
  // The phase the coordinator's stall rule sees (progress_reporter.h); one atomic store.
  void MarkPhase(StepPhase phase) { ctx_.session.reporter().MarkPhase(phase); }

  void Print(const std::string& line) const {
    std::fprintf(stdout, "%s%s\n", ctx_.session.log_prefix().c_str(), line.c_str());
    std::fflush(stdout);
  }

  void PlanSchedule() {
    ShardAssignment fresh;
    fresh.dataset_size = ctx_.data.train().size();
    fresh.world_size = World();
    fresh.consumed_world_size = World();
    steps_per_epoch_ = StepsPerEpoch(NumSamplesPerRank(fresh), c_.batch_size, false);
    schedule_ = {c_.schedule,      c_.lr,     c_.lr_step_epochs,
                 c_.warmup_epochs, c_.epochs, steps_per_epoch_};
  }

  // The coordinator's assignment for the epoch in progress, resumed at the position's samples;
  // nullopt when the coordinator is lost before it answers (this rank's grace ran out).
  absl::StatusOr<std::optional<ShardAssignment>> RequestShard() {
    const ShardRequest req = EpochShardRequest(c_, ctx_.data.train().size(), pos_);
    // The registration answered this very request already (a run that starts fresh).
    if (std::optional<ShardAssignment> first = ctx_.session.TakeFirstShard(req)) {
      RETURN_IF_ERROR(ValidateShardAssignment(*first));
      return first;
    }
    const ProgressReporter& reporter = ctx_.session.reporter();
    for (;;) {
      if (reporter.coordinator_lost()) return std::nullopt;
      // Heartbeats go unanswered: a call would only wait for its deadline. Wait for them to
      // be answered again or for the grace to run out.
      if (reporter.coordinator_silent()) {
        absl::SleepFor(absl::Milliseconds(50));
        continue;
      }
      absl::StatusOr<ShardAssignment> shard = ctx_.session.api().GetShard(req);
      if (shard.ok()) {
        RETURN_IF_ERROR(ValidateShardAssignment(*shard));
        return std::optional<ShardAssignment>(*std::move(shard));
      }
      if (absl::IsUnavailable(shard.status())) ctx_.session.reporter().NoteUnreachable();
      // Unreachable while heartbeats are not answered either: ask again, or give up at the grace.
      if (!absl::IsUnavailable(shard.status()) ||
          reporter.unanswered_for() == absl::ZeroDuration()) {
        return shard.status();
      }
      RETURN_IF_ERROR(CheckAbort());
    }
  }

  // Trains the rest of the epoch; returns the stop every rank agreed on inside it (kNone: the
  // epoch's batches are done). The caller writes the stop checkpoint.
  absl::StatusOr<StopCode> TrainEpoch(const ShardAssignment& shard) {
    std::vector<int64_t> indices = ShardIndices(shard);
    const EpochSpan span = SpanOf(shard, static_cast<int64_t>(indices.size()));
    ASSIGN_OR_RETURN(std::unique_ptr<data::BatchSource> loader,
                     ctx_.data.OpenBatches(ctx_.data.train(), std::move(indices), c_.batch_size,
                                           pos_.epoch, c_.workers, ctx_.model.device()));
    const int64_t batches = loader->num_batches();
    ctx_.model.model().train(true);
    StepRunner runner(ctx_.model, ctx_.comm, pos_,
                      {c_.bf16, c_.max_restarts > 0, &ctx_.session.reporter(), ctx_.hold});
    EpochMeters meters;
    for (int64_t i = 0;; ++i) {
      MarkPhase(StepPhase::kData);
      Hold(TestHold::Point::kData);
      ASSIGN_OR_RETURN(std::optional<data::Batch> batch, loader->Next());
      if (!batch) break;
      const double data_s = absl::ToDoubleSeconds(loader->last_wait());
      const double lr = LearningRate(schedule_, pos_.epoch, pos_.step);
      ASSIGN_OR_RETURN(const StepResult step, runner.Run(*batch, lr));
      AdvanceData(span, i);
      if (ctx_.recovery != nullptr) ctx_.recovery->OnStepCommitted(data_s);
      Hold(TestHold::Point::kStep);
      RecordStep(step, i, batches, lr, data_s, meters);
      RETURN_IF_ERROR(CheckAbort());
      if (const StopCode stop = AgreeToStop(); stop != StopCode::kNone) return stop;
      if (c_.checkpoint_every > 0 && pos_.step % c_.checkpoint_every == 0 &&
          !c_.checkpoint_dir.empty() && i + 1 < batches) {
        RETURN_IF_ERROR(Checkpoint(CheckpointKind::kPeriodic));
      }
    }
    return StopCode::kNone;
  }

  static EpochSpan SpanOf(const ShardAssignment& shard, int64_t per_rank) {
    EpochSpan s;
    s.world = shard.world_size;
    s.start_consumed = shard.consumed;
    s.consumed_world = shard.consumed > 0 ? shard.consumed_world_size : shard.world_size;
    s.end_consumed = shard.consumed + per_rank * shard.world_size;
    return s;
  }

  // After batch `i` of the epoch: the global sample positions consumed so far.
  void AdvanceData(const EpochSpan& span, int64_t i) {
    pos_.consumed =
        std::min(span.start_consumed + (i + 1) * c_.batch_size * span.world, span.end_consumed);
    pos_.consumed_world_size = span.consumed_world;
  }

  // Meters, the heartbeat's progress, and rank 0's progress line. The loss and accuracy columns
  // average every step of the epoch; the device sums are read only when a line is printed or
  // the coordinator's loss is refreshed.
  void RecordStep(const StepResult& step, int64_t i, int64_t batches, double lr, double data_s,
                  EpochMeters& m) {
    const auto now = Clock::now();
    m.batch_time.Add(Seconds(now - m.tick));
    m.data_time.Add(data_s);
    m.tick = now;
    m.steps.Add(step.loss, step.logits, step.labels);
    const bool print = IsRank0() && (i % c_.print_freq == 0 || i + 1 == batches);
    const bool refresh = !m.refreshed || now - *m.refreshed >= kLossRefresh || i + 1 == batches;
    if (print || refresh) {
      const MeterReading r = m.steps.Read(/*restart_since_previous=*/refresh);
      if (refresh) {
        m.reported_loss = r.loss_since_previous;
        m.refreshed = now;
      }
      if (print) {
        Print(ProgressLine(pos_.epoch, i, batches, m, r, lr));
      }
    }
    Report(m);
  }

  void Report(const EpochMeters& m) {
    ProgressReport r = TrainingProgress(m, ctx_.comm.ddp().timings(), c_.batch_size);
    r.epoch = pos_.epoch;
    r.epochs = c_.epochs;
    r.step = pos_.step;
    r.steps_per_epoch = steps_per_epoch_;
    ctx_.session.reporter().Update(r);
  }

  // The coordinator said abort (another rank failed): stop here, naming it. Or it announced a
  // newer membership generation (a rank was lost, the job recovers): leave this group.
  absl::Status CheckAbort() {
    ProgressReporter& reporter = ctx_.session.reporter();
    if (auto reason = reporter.abort_reason()) {
      reporter.AcknowledgeAbort();
      return absl::AbortedError(*reason);
    }
    if (reporter.newer_generation()) {
      return absl::UnavailableError(absl::StrCat("membership generation ",
                                                 reporter.announced_generation(),
                                                 " is forming at the coordinator"));
    }
    return absl::OkStatus();
  }

  // Every rank must stop after the same step: --stop-after-steps is deterministic; a signal, a
  // coordinator command or a lost coordinator is agreed every kStopCheckInterval steps.
  StopCode AgreeToStop() {
    if (c_.stop_after_steps > 0 && pos_.step - start_step_ >= c_.stop_after_steps) {
      return StopCode::kStop;
    }
    if (pos_.step % kStopCheckInterval != 0) return StopCode::kNone;
    return Agree(LocalCode(), "agreeing to stop");
  }

  StopCode LocalCode() const {
    const ProgressReporter& reporter = ctx_.session.reporter();
    return LocalStopCode(reporter.stop_requested() || ctx_.signal_stop.load(),
                         reporter.coordinator_lost());
  }

  // The highest code of every rank (one small allreduce); from a lost coordinator on, no call
  // to it is made.
  StopCode Agree(StopCode local, const char* what) {
    const StopCode agreed =
        AgreeStopCode(ctx_.comm.process_group(), local, ctx_.model.device(), what);
    if (agreed == StopCode::kCoordinatorLost) {
      coordinator_lost_ = true;
      ctx_.session.reporter().MarkCoordinatorLost();
    }
    return agreed;
  }

  // The graceful stop's checkpoint at the committed position (rank 0), for every stop.
  absl::Status StopHere(StopCode why) {
    if (!c_.checkpoint_dir.empty()) RETURN_IF_ERROR(Checkpoint(CheckpointKind::kStop));
    const bool lost = why == StopCode::kCoordinatorLost;
    // Without a checkpoint a lost coordinator's stop is a failure (the worker says so).
    if (IsRank0() && !(lost && c_.checkpoint_dir.empty())) {
      const std::string reason =
          lost ? absl::StrCat("coordinator lost (unreachable for ",
                              ctx_.session.reporter().unanswered_text(), ", --coordinator-grace ",
                              c_.coordinator_grace_s, "s): ")
               : std::string();
      Print(absl::StrCat(reason, "stopped at step ", pos_.step, " (epoch ", pos_.epoch, ", ",
                         pos_.consumed, " samples of the epoch consumed); resumable"));
    }
    return absl::OkStatus();
  }

  // Evaluation, then the position moves to the next epoch and is checkpointed.
  absl::Status FinishEpoch() {
    if (c_.evaluate) {
      ASSIGN_OR_RETURN(auto acc, Evaluate());
      result_.final_top1 = acc.first;
      result_.final_top5 = acc.second;
      if (IsRank0()) {
        Print(absl::StrFormat(" * Epoch %d: test Acc@1 %.3f Acc@5 %.3f", pos_.epoch, acc.first,
                              acc.second));
      }
    }
    pos_ = {pos_.epoch + 1, pos_.step, 0, 0};
    if (!c_.checkpoint_dir.empty()) {
      RETURN_IF_ERROR(
          Checkpoint(pos_.epoch == c_.epochs ? CheckpointKind::kFinal : CheckpointKind::kPeriodic));
    }
    return absl::OkStatus();
  }

  void PrintSummary(Clock::time_point started) {
    if (!IsRank0()) return;
    const double elapsed = Seconds(Clock::now() - started);
    const double samples = static_cast<double>((pos_.step - start_step_) * c_.batch_size * World());
    Print(absl::StrFormat("done: %d epochs, %d steps in %.1f s, %.0f samples/s (all ranks)%s",
                          c_.epochs, pos_.step, elapsed, elapsed > 0 ? samples / elapsed : 0.0,
                          result_.final_top1 >= 0
                              ? absl::StrFormat("; test Acc@1 %.3f Acc@5 %.3f", result_.final_top1,
                                                result_.final_top5)
                              : std::string()));
  }

  // Rank 0 writes the position atomically and tells the coordinator; others do nothing. A
  // periodic checkpoint that meets a full disk is a warning (CheckpointStore says which).
  absl::Status Checkpoint(CheckpointKind kind) {
    if (!IsRank0() || ctx_.checkpoints == nullptr) return absl::OkStatus();
    MarkPhase(StepPhase::kCheckpoint);
    if (ctx_.checkpoints->run_id().empty() && !c_.checkpoint_dir.empty()) {
      // This rank became rank 0 in a recovery (the old one's node was dropped, or lost with the
      // coordinator): it adopts the folder's current run before it writes the run's checkpoints.
      ASSIGN_OR_RETURN(const ResumePlan adopted,
                       ctx_.checkpoints->PlanResume({"auto", c_.seed, ctx_.data.train().size(),
                                                     c_.epochs, c_.force_resume}));
      (void)adopted;  // the state is the ranks' own, never the file's
      Print(absl::StrCat("rank 0 from now on: continuing run ", ctx_.checkpoints->run_id(), " in ",
                         c_.checkpoint_dir));
    }
    CheckpointState s;
    s.model = ctx_.model.model().state_dict();
    s.momentum = ctx_.model.optimizer().MomentumBuffers();
    s.lr = LearningRate(schedule_, pos_.epoch, pos_.step);
    s.base_lr = c_.lr;
    s.momentum_factor = c_.momentum;
    s.weight_decay = c_.weight_decay;
    s.nesterov = c_.nesterov;
    s.schedule = c_.schedule;
    s.epoch = pos_.epoch;
    s.step = pos_.step;
    s.consumed = pos_.consumed;
    s.consumed_world_size = pos_.consumed > 0 ? pos_.consumed_world_size : World();
    s.seed = c_.seed;
    s.dataset_size = ctx_.data.train().size();
    Hold(TestHold::Point::kCheckpoint);
    ASSIGN_OR_RETURN(const SavedCheckpoint saved, ctx_.checkpoints->Save(std::move(s), kind));
    if (saved.path.empty()) {
      Print(absl::StrCat("warning: ", saved.warning));
      return absl::OkStatus();
    }
    const std::string& path = saved.path;
    result_.checkpoint = path;
    // A lost coordinator is not called again; one that does not answer would keep this rank
    // (and the others, at the next collective) waiting for the call's deadline.
    if (coordinator_lost_) return absl::OkStatus();
    if (ctx_.session.reporter().coordinator_silent()) {
      Print(
          absl::StrCat("warning: checkpoint written but not committed: the coordinator has not "
                       "answered for ",
                       ctx_.session.reporter().unanswered_text()));
      return absl::OkStatus();
    }
    CommittedCheckpoint committed{pos_.epoch, pos_.step, pos_.consumed, path};
    if (absl::Status st = ctx_.session.api().CommitCheckpoint(committed); !st.ok()) {
      if (absl::IsUnavailable(st)) ctx_.session.reporter().NoteUnreachable();
      Print(absl::StrCat("warning: checkpoint written but not committed: ", st.message()));
    }
    return absl::OkStatus();
  }

  // Top-1/top-5 accuracy (percent) over the whole test split (evaluation.h).
  absl::StatusOr<std::pair<double, double>> Evaluate() {
    MarkPhase(StepPhase::kEval);
    return EvaluateAccuracy(ctx_.data, ctx_.model, ctx_.comm.process_group(), c_.workers,
                            [this] { Hold(TestHold::Point::kEval); });
  }

  const TrainingContext& ctx_;
  const TrainerConfig& c_;
  TrainingPosition& pos_;
  const int64_t start_step_;
  LoopResult& result_;
  ScheduleOptions schedule_;
  int64_t steps_per_epoch_ = 0;
  bool coordinator_lost_ = false;  // agreed: no more coordinator calls
};

}  // namespace

absl::StatusOr<LoopResult> RunTrainingLoop(const TrainingContext& ctx) { return Loop(ctx).Run(); }

}  // namespace ddp
