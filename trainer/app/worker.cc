#include "trainer/app/worker.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <signal.h>
#include <torch/cuda.h>
#include <torch/utils.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "trainer/app/stage_options.h"
#include "trainer/app/training_loop.h"
#include "trainer/app/worker_exit.h"
#include "trainer/checkpoint/checkpoint_store.h"
#include "trainer/ddp/dist_errors.h"
#include "trainer/ddp/process_group.h"
#include "trainer/ddp/status_from_exception.h"
#include "trainer/launcher/host_memory.h"
#include "trainer/launcher/warm_link.h"
#include "trainer/worker/communication_stage.h"
#include "trainer/worker/coordinator_session.h"
#include "trainer/worker/data_stage.h"
#include "trainer/worker/in_job_recovery.h"
#include "trainer/worker/model_stage.h"

namespace ddp {
namespace {

std::atomic<bool> g_signal_stop{false};

void OnStopSignal(int) { g_signal_stop.store(true); }

// The reporter that collective waits are marked on (the phase "allreduce"), while one lives.
std::atomic<ProgressReporter*> g_reporter{nullptr};

// End-to-end tests: DDP_TEST_HOLD's "allreduce" point, the first wait of a step's gradient
// reduction (a collective wait that begins while the step is in its backward phase).
struct AllreduceHold {
  const TestHold* hold;
  const CoordinatorSession* session;
  const TrainingPosition* position;
};
std::atomic<const AllreduceHold*> g_allreduce_hold{nullptr};

void OnCollectiveWait(bool waiting) {
  ProgressReporter* r = g_reporter.load(std::memory_order_acquire);
  if (r == nullptr) return;
  const bool in_backward = r->phase() == StepPhase::kBackward;
  r->MarkCollectiveWait(waiting);
  const AllreduceHold* h = g_allreduce_hold.load(std::memory_order_acquire);
  if (waiting && in_backward && h != nullptr) {
    h->hold->At(TestHold::Point::kAllreduce, h->session->rank().rank, h->position->step);
  }
}

// The "published" hold point (test_hold.h), on the store every group is built through. Gloo's
// full mesh publishes a rank's addresses under the rank's plain number, the key's last part. It
// reads the rank and step of the build in progress from the build's thread while the training
// thread waits for that build (ProcessGroupHandle), which is the only time it sets keys.
CoordinatorStore::SetHook PublishedHold(const TestHold& hold, const CoordinatorSession& session,
                                        const TrainingPosition& position) {
  if (hold.empty()) return nullptr;
  return [&hold, &session, &position](const std::string& key) {
    const int rank = session.rank().rank;
    if (absl::EndsWith(key, absl::StrCat("/", rank))) {
      hold.At(TestHold::Point::kPublished, rank, position.step);
    }
  };
}

// While it lives, the "allreduce" hold point is armed (when DDP_TEST_HOLD names any point).
class AllreduceHoldScope {
 public:
  AllreduceHoldScope(const TestHold& hold, const CoordinatorSession& session,
                     const TrainingPosition& position)
      : hold_{&hold, &session, &position} {
    if (!hold.empty()) g_allreduce_hold.store(&hold_, std::memory_order_release);
  }
  ~AllreduceHoldScope() { g_allreduce_hold.store(nullptr, std::memory_order_release); }
  AllreduceHoldScope(const AllreduceHoldScope&) = delete;
  AllreduceHoldScope& operator=(const AllreduceHoldScope&) = delete;

 private:
  const AllreduceHold hold_;
};

// While it lives, `reporter` hears of collective waits and stop signals.
class ReporterHooks {
 public:
  explicit ReporterHooks(ProgressReporter& reporter) {
    reporter.WatchStopSignal(&g_signal_stop);
    g_reporter.store(&reporter, std::memory_order_release);
    SetCollectiveWaitHook(&OnCollectiveWait);
  }
  ~ReporterHooks() { g_reporter.store(nullptr, std::memory_order_release); }
  ReporterHooks(const ReporterHooks&) = delete;
  ReporterHooks& operator=(const ReporterHooks&) = delete;
};

void InstallStopSignals() {
  struct sigaction sa = {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGUSR1, SIGINT}) sigaction(sig, &sa, nullptr);
  // The launcher starts workers with SIGUSR1 blocked (LauncherOptions::
  // block_stop_request_until_ready): one that came before this handler is delivered now.
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_UNBLOCK, &usr1, nullptr);
}

// Seconds since this process was started (exec, dynamic loading of LibTorch and static
// initializers happen before main): /proc/self/stat's start time against /proc/uptime, in clock
// ticks. -1 when unknown.
double SecondsSinceProcessStart() {
  std::ifstream stat("/proc/self/stat");
  std::ifstream uptime("/proc/uptime");
  std::string line;
  double up = 0;
  if (!std::getline(stat, line) || !(uptime >> up)) return -1;
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return up - std::stod(field) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return -1;
}

// Where a worker's start-up went: process start to main, then each stage. A replacement prints
// it (its start-up is part of a recovery; bench/recovery.sh reads the line).
class StartupTimes {
 public:
  StartupTimes() : last_(absl::Now()), before_main_(SecondsSinceProcessStart()) {}
  // A warm worker's, from its activation on (its process and data were ready before).
  static StartupTimes Warm() {
    StartupTimes t;
    t.warm_ = true;
    return t;
  }
  void Mark(const char* what) {
    const absl::Time now = absl::Now();
    absl::StrAppend(&text_, ", ", what, " ",
                    absl::StrFormat("%.2f", absl::ToDoubleSeconds(now - last_)), " s");
    last_ = now;
  }
  std::string Describe() const {
    if (warm_) return absl::StrCat("warm (process and data ready before)", text_);
    return absl::StrCat(absl::StrFormat("%.2f", before_main_), " s to main (exec, LibTorch load)",
                        text_);
  }

 private:
  absl::Time last_;
  double before_main_;
  bool warm_ = false;
  std::string text_;
};

absl::StatusOr<at::Device> ChooseDevice(const TrainerConfig& c, const WorkerPlacement& p) {
  ASSIGN_OR_RETURN(const BackendKind kind, ParseBackendKind(c.backend));
  const bool nccl = ResolveBackendKind(kind) == BackendKind::kNccl;
  if (nccl && c.device == "cpu") {
    return absl::InvalidArgumentError("the NCCL backend needs CUDA tensors, not --device cpu");
  }
  if (!nccl && c.device != "cuda") return at::Device(at::kCPU);
  const int count = static_cast<int>(torch::cuda::device_count());
  if (count == 0) {
    return absl::FailedPreconditionError(nccl ? "NCCL backend but no CUDA device visible"
                                              : "--device cuda but no CUDA device visible");
  }
  // One GPU visible (Slurm --gpus-per-task): use it. Several: the one of this local rank.
  const int index = count == 1 ? 0 : p.local_rank;
  if (index >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat("local rank ", p.local_rank, " but only ", count, " GPU(s) visible"));
  }
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
}

// Rank 0 picks the checkpoint (the folder's run, see CheckpointStore) and loads it into its model
// stage. Its position then has the highest committed step, so the state sync that follows the
// process group's construction hands its weights, momentum and position to every rank.
// A replacement in a job that recovers (`from_peers`) takes its state from the survivors, never
// a file; as rank 0 it only adopts the folder's current run, for the checkpoints it writes next.
absl::StatusOr<TrainingPosition> LoadStartPoint(const TrainerConfig& c, int rank,
                                                const DataStage& data, ModelStage& model,
                                                CheckpointStore& checkpoints,
                                                const std::string& prefix, bool from_peers) {
  TrainingPosition start;
  if (rank != 0) return start;
  ASSIGN_OR_RETURN(ResumePlan plan,
                   checkpoints.PlanResume({from_peers ? "auto" : c.resume, c.seed,
                                           data.train().size(), c.epochs, c.force_resume}));
  if (from_peers) {
    std::printf("%scontinuing run %s; the state comes from the other ranks\n", prefix.c_str(),
                checkpoints.run_id().c_str());
    return start;
  }
  for (const auto& f : checkpoints.removed_temp_files()) {
    std::printf("%sremoved %s, a temp file of a writer that is gone\n", prefix.c_str(), f.c_str());
  }
  for (const auto& w : plan.warnings)
    std::fprintf(stderr, "%swarning: %s\n", prefix.c_str(), w.c_str());
  if (!plan.state) {
    if (!c.checkpoint_dir.empty()) {
      std::printf("%sstarting run %s in %s\n", prefix.c_str(), checkpoints.run_id().c_str(),
                  c.checkpoint_dir.c_str());
    }
    return start;
  }
  const CheckpointState& loaded = *plan.state;
  RETURN_IF_ERROR(model.Load(loaded.model, loaded.momentum));
  start = {loaded.epoch, loaded.step, loaded.consumed, loaded.consumed_world_size};
  std::printf("%sresuming from %s (run %s): epoch %ld, step %ld, %ld samples of the epoch done\n",
              prefix.c_str(), plan.path.c_str(), checkpoints.run_id().c_str(),
              static_cast<long>(start.epoch), static_cast<long>(start.step),
              static_cast<long>(start.consumed));
  return start;
}

// The worker's exception boundaries. Everything that runs collectives lives inside them: the
// communication stage is built here and ends here — shut down when training ended normally,
// aborted when it failed or an exception unwinds through it. Each run of the training loop has
// its own boundary, so that a failed collective (a peer lost) can be recovered from in place
// (trainer/worker/in_job_recovery.h) and the loop run again from the synced position.
TrainOutcome Train(const TrainerConfig& c, const WorkerPlacement& p, const DataStage& data,
                   ModelStage& model, CoordinatorSession& session, CheckpointStore& checkpoints,
                   const std::string& host_memory, const std::string& pipeline_note,
                   const TestHold& hold) {
  TrainOutcome out{true, absl::UnknownError("not started")};
  out.result = RunGuarded("training step failed", [&]() -> absl::StatusOr<LoopResult> {
    // Copies: the session's rank changes with each membership generation.
    const std::string prefix = session.log_prefix();
    const RankAssignment rank = session.rank();
    ASSIGN_OR_RETURN(
        TrainingPosition position,
        LoadStartPoint(c, rank.rank, data, model, checkpoints, prefix, rank.state_from_peers));
    const auto options = CommunicationOptions(c, p, model.device());
    CommunicationStage comm(
        session.Store(options.process_group.timeout, PublishedHold(hold, session, position)),
        options, model, position);
    if (!hold.empty()) {
      comm.SetSyncHook([&hold, &session, &position] {
        hold.At(TestHold::Point::kSync, session.rank().rank, position.step);
      });
    }
    const AllreduceHoldScope allreduce_hold(hold, session, position);
    InJobRecovery recovery(comm, session, position, RecoveryOptions(c, p, &hold));
    RETURN_IF_ERROR(c.max_restarts > 0
                        ? recovery.Connect()
                        : comm.Connect(rank.store_prefix, rank.rank, rank.world_size).status());
    if (rank.rank == 0) {
      std::printf("%s%d workers (%s backend, %s); model %s; data %s (%ld train, %ld test)\n",
                  prefix.c_str(), rank.world_size, comm.process_group().getBackendName().c_str(),
                  model.device().str().c_str(), model.model().description().c_str(),
                  data.train().description().c_str(), static_cast<long>(data.train().size()),
                  static_cast<long>(data.test().size()));
      std::printf("%s%s\n", prefix.c_str(), host_memory.c_str());
      if (!pipeline_note.empty()) std::printf("%s%s\n", prefix.c_str(), pipeline_note.c_str());
      // A finished run relaunched in place (or a requeue that lands after the last epoch).
      if (position.epoch >= c.epochs) {
        std::printf("%srun %s is already complete (%ld epochs, step %ld); nothing to train\n",
                    prefix.c_str(), checkpoints.run_id().c_str(), static_cast<long>(position.epoch),
                    static_cast<long>(position.step));
      }
      std::fflush(stdout);
    }
    out.in_setup = false;
    LoopResult so_far;
    const TrainingContext ctx{c,      data,          model,         session,
                              comm,   position,      g_signal_stop, &checkpoints,
                              so_far, position.step, &recovery,     &hold};
    for (;;) {
      absl::StatusOr<LoopResult> result =
          RunGuarded("training step failed", [&] { return RunTrainingLoop(ctx); });
      if (result.ok()) return result;
      comm.MarkFailed();
      // --max-restarts 0 fails fast, as it always did (the coordinator names the lost rank).
      if (c.max_restarts == 0 || !InJobRecovery::Recoverable(result.status())) return result;
      RETURN_IF_ERROR(recovery.Recover(result.status()));
    }
  });
  return out;
}

}  // namespace

int RunWorker(const TrainerConfig& c, const WorkerPlacement& placement, const TestHold& hold) {
  StartupTimes startup;
  WorkerPlacement p = placement;  // a warm worker learns its local rank below
  std::string prefix = p.warm_fd >= 0
                           ? absl::StrCat("[node ", p.node_rank, " warm worker] ")
                           : absl::StrCat("[node ", p.node_rank, " local ", p.local_rank, "] ");
  InstallStopSignals();
  const std::string host_memory = TuneHostAllocator();  // before the first tensor

  // Cheap, local checks first: a bad flag or file must fail before the job waits on us.
  auto checkpoints =
      CheckpointStore::Open({c.checkpoint_dir, c.keep_checkpoints, absl::StrCat("job ", p.job_id)});
  if (!checkpoints.ok()) {
    return Fail(prefix, kExitUsage, std::string(checkpoints.status().message()));
  }
  torch::manual_seed(static_cast<uint64_t>(c.seed));
  if (c.deterministic) {
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
    at::globalContext().setDeterministicCuDNN(true);
    at::globalContext().setBenchmarkCuDNN(false);
  }
  // Several CPU workers on one node share its cores (as torchrun sets OMP_NUM_THREADS=1).
  if (p.local_world_size > 1 && std::getenv("OMP_NUM_THREADS") == nullptr) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    at::set_num_threads(std::max(1, cores / p.local_world_size));
  }

  // The stages, outermost first; each lives until RunWorker returns (innermost goes first).
  absl::StatusOr<DataStage> data =
      RunGuarded("opening the data", [&] { return DataStage::Open(DataOptions(c)); });
  if (!data.ok()) return Fail(prefix, kExitUsage, std::string(data.status().message()));
  startup.Mark("data");
  if (p.warm_fd >= 0) {
    // A warm worker (trainer/launcher/warm_link.h): LibTorch is loaded and the data open; it
    // waits for the slot of a lost worker. Its start-up as a replacement begins when it has one.
    const absl::StatusOr<WarmActivation> slot =
        AwaitWarmActivation(p.warm_fd, [] { return g_signal_stop.load(); });
    if (!slot.ok()) return absl::IsCancelled(slot.status()) ? kExitOk : kExitFailed;
    const std::string ready = startup.Describe();
    // p.warm_fd stays open until the first committed step (RecoveryOptions): the task starts
    // its next warm worker when it closes.
    p.local_rank = slot->local_rank;
    p.heartbeat_fd = slot->relay_fd;
    prefix = absl::StrCat("[node ", p.node_rank, " local ", p.local_rank, "] ");
    std::fprintf(stderr, "%swarm worker (pid %d) takes this slot; it was ready after %s\n",
                 prefix.c_str(), static_cast<int>(::getpid()), ready.c_str());
    startup = StartupTimes::Warm();
  }
  absl::StatusOr<at::Device> device = ChooseDevice(c, p);
  if (!device.ok()) return Fail(prefix, kExitUsage, std::string(device.status().message()));
  // cuDNN picks the fastest convolution algorithm per shape (the recipe's cudnn.benchmark = True).
  if (device->is_cuda() && !c.deterministic) at::globalContext().setBenchmarkCuDNN(true);
  absl::StatusOr<std::string> pipeline_note = data->SetUpPipeline(c.data_pipeline, *device);
  if (!pipeline_note.ok()) {
    return Fail(prefix, kExitUsage, std::string(pipeline_note.status().message()));
  }
  absl::StatusOr<ModelStage> model = RunGuarded("building the model", [&] {
    return ModelStage::Create(ModelOptions(c), data->train(), *device);
  });
  if (!model.ok()) return Fail(prefix, kExitUsage, std::string(model.status().message()));
  startup.Mark("model");
  CoordinatorSession::Options session_options = SessionOptions(c, data->train().size());
  // A warm worker always replaces a lost one: its first shard is the epoch in progress.
  if (p.warm_fd >= 0) session_options.first_shard.reset();
  auto session = CoordinatorSession::Open(session_options, p);
  if (!session.ok()) return Fail(prefix, kExitFailed, std::string(session.status().message()));
  if ((*session)->rank().membership_generation > 0) {
    startup.Mark("coordinator and registration (until the generation formed)");
    std::fprintf(stderr, "%sreplacement start-up: %s\n", (*session)->log_prefix().c_str(),
                 startup.Describe().c_str());
  }
  const ReporterHooks hooks((*session)->reporter());

  const TrainOutcome outcome =
      Train(c, p, *data, *model, **session, **checkpoints, host_memory, *pipeline_note, hold);
  return Finish(c, p, **session, **checkpoints, outcome);
}

}  // namespace ddp
