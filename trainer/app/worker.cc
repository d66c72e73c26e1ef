#include "trainer/app/worker.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>
#include <signal.h>
#include <torch/cuda.h>
#include <torch/utils.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/coordinator_client.h"
#include "common/status_macros.h"
#include "trainer/app/checkpoint.h"
#include "trainer/app/host_memory.h"
#include "trainer/app/optimizer.h"
#include "trainer/app/progress_reporter.h"
#include "trainer/app/training_loop.h"
#include "trainer/data/data_spec.h"
#include "trainer/data/gpu_jpeg_decoder.h"
#include "trainer/data/image_folder_dataset.h"
#include "trainer/dist/ddp.h"
#include "trainer/dist/grpc_store.h"
#include "trainer/dist/process_group.h"
#include "trainer/models/model_factory.h"

namespace ddp {
namespace {

std::atomic<bool> g_signal_stop{false};

void OnStopSignal(int) { g_signal_stop.store(true); }

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// Everything a worker builds before it can train, in the order it is built.
struct Setup {
  data::DatasetPair data;
  std::unique_ptr<models::Model> model;
  std::unique_ptr<CoordinatorApi> api;
  RankAssignment rank;
  c10::intrusive_ptr<c10d::Backend> pg;
  at::Device device = at::kCPU;
  std::unique_ptr<data::GpuJpegDecoder> gpu_decoder;  // --data-pipeline gpu
};

// The GPU JPEG pipeline when asked for (or, under auto, when it can run: imagefolder data on a
// CUDA device with nvJPEG present). Returns "" or a note for rank 0's log; an error only when
// --data-pipeline gpu cannot be honoured.
absl::StatusOr<std::string> SetUpDataPipeline(const TrainerConfig& c, Setup& s) {
  if (c.data_pipeline == "cpu") return std::string();
  const bool folder = dynamic_cast<const data::ImageFolderDataset*>(s.data.train.get()) != nullptr;
  if (!folder || !s.device.is_cuda()) {
    if (c.data_pipeline == "gpu") {
      return absl::InvalidArgumentError(
          "--data-pipeline gpu needs imagefolder data and a CUDA device");
    }
    return std::string();
  }
  auto decoder = data::GpuJpegDecoder::Create(s.device.index());
  if (!decoder.ok()) {
    if (c.data_pipeline == "gpu") return decoder.status();
    return absl::StrCat(
        "data pipeline: cpu (GPU pipeline unavailable: ", decoder.status().message(), ")");
  }
  s.gpu_decoder = std::move(*decoder);
  return absl::StrCat("data pipeline: gpu (nvJPEG ", s.gpu_decoder->backend_name(),
                      "; transforms on the GPU)");
}

// Channels-last weights (as model.to(memory_format=torch.channels_last)).
void ToChannelsLast(models::Model& model) {
  c10::NoGradGuard no_grad;
  for (auto list : {model.named_parameters(), model.named_buffers()}) {
    for (auto& t : list) {
      if (t.tensor.dim() == 4) {
        t.tensor.set_data(t.tensor.data().contiguous(at::MemoryFormat::ChannelsLast));
      }
    }
  }
}

absl::StatusOr<data::DatasetPair> OpenData(const TrainerConfig& c) {
  ASSIGN_OR_RETURN(const data::DataSpec spec, data::ParseDataSpec(c.data));
  data::DataOptions options;
  options.seed = static_cast<uint64_t>(c.seed);
  if (!c.normalize.empty()) {
    ASSIGN_OR_RETURN(options.normalization, data::ParseNormalization(c.normalize));
  }
  return data::OpenDatasets(spec, options);
}

absl::StatusOr<std::unique_ptr<models::Model>> BuildModel(const TrainerConfig& c,
                                                          const data::Dataset& train) {
  if (!c.model_path.empty()) return models::LoadScriptModel(c.model_path);
  const std::vector<int64_t> shape = train.sample_shape();
  models::InputShape input;
  if (shape.size() == 3) input = {shape[0], shape[1], shape[2]};
  return models::CreateModel(c.arch, train.num_classes(), input);
}

absl::Status LoadStateDict(models::Model& model, const std::vector<models::NamedTensor>& state) {
  std::map<std::string, at::Tensor> saved;
  for (const auto& t : state) saved[t.name] = t.tensor;
  c10::NoGradGuard no_grad;
  for (const auto& t : model.state_dict()) {
    auto it = saved.find(t.name);
    if (it == saved.end()) {
      return absl::DataLossError(absl::StrCat("checkpoint lacks model entry ", t.name));
    }
    if (!it->second.sizes().equals(t.tensor.sizes())) {
      return absl::DataLossError(absl::StrCat("checkpoint entry ", t.name, " has shape ",
                                              c10::str(it->second.sizes()), ", model has ",
                                              c10::str(t.tensor.sizes())));
    }
    t.tensor.copy_(it->second);
  }
  return absl::OkStatus();
}

// Rank 0 picks the checkpoint (newest valid one under --resume auto) and loads it; every rank
// learns the start point through the store; DDP's construction broadcast then hands rank 0's
// weights to everyone, and the momentum buffers are broadcast here.
absl::StatusOr<StartPoint> Resume(const TrainerConfig& c, Setup& s, CoordinatorStore& store,
                                  Sgd& sgd, const std::string& prefix) {
  StartPoint start;
  std::optional<CheckpointState> loaded;
  if (s.rank.rank == 0 && c.resume != "none") {
    std::string path;
    if (c.resume == "auto") {
      if (!c.checkpoint_dir.empty()) {
        std::vector<std::string> warnings;
        auto found = FindResumableCheckpoint(c.checkpoint_dir, &warnings);
        for (const auto& w : warnings)
          std::fprintf(stderr, "%swarning: %s\n", prefix.c_str(), w.c_str());
        if (found.ok()) path = *found;
      }
    } else {
      path = c.resume;
    }
    if (!path.empty()) {
      ASSIGN_OR_RETURN(loaded, ReadCheckpoint(path));
      RETURN_IF_ERROR(LoadStateDict(*s.model, loaded->model));
      start = {loaded->epoch, loaded->step, loaded->consumed,
               static_cast<int>(loaded->consumed_world_size)};
      std::printf("%sresuming from %s: epoch %ld, step %ld, %ld samples of the epoch done\n",
                  prefix.c_str(), path.c_str(), static_cast<long>(start.epoch),
                  static_cast<long>(start.step), static_cast<long>(start.consumed));
    }
  }
  const std::string key = "slurm-ddp/start";
  try {
    if (s.rank.rank == 0) {
      const std::string v = absl::StrCat(start.epoch, ",", start.step, ",", start.consumed, ",",
                                         start.consumed_world_size, ",", loaded ? 1 : 0);
      store.set(key, std::vector<uint8_t>(v.begin(), v.end()));
    }
    const std::vector<uint8_t> raw = store.get(key);
    const std::vector<std::string> f = absl::StrSplit(std::string(raw.begin(), raw.end()), ',');
    int64_t has_checkpoint = 0;
    if (f.size() != 5 || !absl::SimpleAtoi(f[0], &start.epoch) ||
        !absl::SimpleAtoi(f[1], &start.step) || !absl::SimpleAtoi(f[2], &start.consumed) ||
        !absl::SimpleAtoi(f[3], &start.consumed_world_size) ||
        !absl::SimpleAtoi(f[4], &has_checkpoint)) {
      return absl::InternalError("malformed start point from rank 0");
    }
    if (has_checkpoint != 0 && c.momentum != 0) {
      std::vector<models::NamedTensor> buffers;
      std::map<std::string, at::Tensor> saved;
      if (loaded) {
        for (const auto& b : loaded->momentum) saved[b.name] = b.tensor;
      }
      std::vector<at::Tensor> flat;
      for (const auto& p : s.model->named_parameters()) {
        at::Tensor b = at::zeros_like(p.tensor);
        if (auto it = saved.find(p.name); it != saved.end()) b.copy_(it->second);
        buffers.push_back({p.name, b});
        flat.push_back(b);
      }
      BroadcastCoalesced(*s.pg, flat, 0);
      const std::string err = sgd.LoadMomentumBuffers(buffers);
      if (!err.empty()) return absl::DataLossError(err);
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("agreeing on the start point: ", FirstLine(e.what())));
  }
  return start;
}

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

int Fail(const std::string& prefix, int code, const std::string& message) {
  std::fprintf(stderr, "%serror: %s\n", prefix.c_str(), FirstLine(message).c_str());
  return code;
}

}  // namespace

int RunWorker(const TrainerConfig& c, const WorkerPlacement& p) {
  std::string prefix = absl::StrCat("[node ", p.node_rank, " local ", p.local_rank, "] ");
  struct sigaction sa = {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGUSR1, SIGINT}) sigaction(sig, &sa, nullptr);
  const std::string host_memory = TuneHostAllocator();  // before the first tensor

  // Cheap, local checks first: a bad flag or file must fail before the job waits on us.
  if (!c.checkpoint_dir.empty()) {
    if (absl::Status st = CheckCheckpointDirWritable(c.checkpoint_dir); !st.ok()) {
      return Fail(prefix, kExitUsage, std::string(st.message()));
    }
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
  Setup s;
  auto data = OpenData(c);
  if (!data.ok()) return Fail(prefix, kExitUsage, std::string(data.status().message()));
  s.data = std::move(*data);
  auto model = BuildModel(c, *s.data.train);
  if (!model.ok()) return Fail(prefix, kExitUsage, std::string(model.status().message()));
  s.model = std::move(*model);
  auto device = ChooseDevice(c, p);
  if (!device.ok()) return Fail(prefix, kExitUsage, std::string(device.status().message()));
  s.device = *device;
  // cuDNN picks the fastest convolution algorithm per shape (the recipe's cudnn.benchmark = True).
  if (s.device.is_cuda() && !c.deterministic) at::globalContext().setBenchmarkCuDNN(true);
  auto pipeline_note = SetUpDataPipeline(c, s);
  if (!pipeline_note.ok()) {
    return Fail(prefix, kExitUsage, std::string(pipeline_note.status().message()));
  }

  ConnectOptions co;
  co.dist_file = p.dist_file;
  co.expected_job_id = p.job_id;
  co.min_generation = p.generation;
  co.dist_file_timeout = absl::Seconds(c.registration_timeout_s);
  auto api = ConnectToCoordinator(co);
  if (!api.ok()) {
    return Fail(
        prefix, kExitFailed,
        absl::StrCat(api.status().message(), " (coordinator log: ", p.coordinator_log, ")"));
  }
  s.api = std::move(*api);
  WorkerIdentity who;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  who.host = host;
  who.node_rank = p.node_rank;
  who.local_rank = p.local_rank;
  who.local_world_size = p.local_world_size;
  who.pid = getpid();
  auto rank = s.api->Register(who, absl::Seconds(c.registration_timeout_s));
  if (!rank.ok()) {
    return Fail(prefix, kExitFailed,
                absl::StrCat("registration failed: ", rank.status().message()));
  }
  s.rank = *rank;
  prefix = absl::StrCat("[rank ", s.rank.rank, "] ");

  ProgressReporterOptions ro;
  ro.unreachable_timeout = absl::Seconds(std::max(10.0, 3 * c.heartbeat_timeout_s));
  ro.log_prefix = prefix;
  ProgressReporter reporter(s.api.get(), ro);

  const std::chrono::milliseconds pg_timeout(static_cast<int64_t>(c.pg_timeout_s * 1000));
  auto store = c10::make_intrusive<CoordinatorStore>(*s.api, absl::StrCat("gen", p.generation, "/"),
                                                     pg_timeout);
  ProcessGroupOptions po;
  po.backend = *ParseBackendKind(c.backend);
  po.timeout = pg_timeout;
  po.cuda_device = s.device.is_cuda() ? s.device.index() : 0;
  if (p.local_mode) po.gloo_hostname = "127.0.0.1";
  auto pg = CreateProcessGroup(store, s.rank.rank, s.rank.world_size, po);
  if (!pg.ok()) return Fail(prefix, kExitFailed, std::string(pg.status().message()));
  s.pg = *pg;
  s.model->to(s.device);
  if (c.channels_last) ToChannelsLast(*s.model);

  auto report_done = [&](const absl::Status& outcome) {
    if (absl::Status st = s.api->ReportDone(outcome); !st.ok() && s.rank.rank == 0) {
      std::fprintf(stderr, "%swarning: could not report the outcome: %s\n", prefix.c_str(),
                   std::string(st.message()).c_str());
    }
  };
  Sgd sgd(s.model->named_parameters(), {c.momentum, c.weight_decay, c.nesterov});
  auto start = Resume(c, s, *store, sgd, prefix);
  if (!start.ok()) {
    report_done(start.status());
    return Fail(prefix, kExitFailed, std::string(start.status().message()));
  }

  ModuleTensors tensors{s.model->named_parameters(), s.model->named_buffers()};
  DdpOptions dopts;
  dopts.reducer.bucket_bytes = c.bucket_mb << 20;
  auto ddp = DistributedDataParallel::Create(std::move(tensors), s.pg, dopts);
  if (!ddp.ok()) {
    report_done(ddp.status());
    return Fail(prefix, kExitFailed, std::string(ddp.status().message()));
  }

  TrainingContext ctx;
  ctx.config = &c;
  ctx.rank = s.rank;
  ctx.api = s.api.get();
  ctx.pg = s.pg.get();
  ctx.model = s.model.get();
  ctx.ddp = ddp->get();
  ctx.sgd = &sgd;
  ctx.train = s.data.train.get();
  ctx.test = s.data.test.get();
  ctx.reporter = &reporter;
  ctx.device = s.device;
  ctx.gpu_decoder = s.gpu_decoder.get();
  ctx.log_prefix = prefix;
  ctx.signal_stop = &g_signal_stop;
  ctx.start = *start;
  if (s.rank.rank == 0) {
    std::printf("%s%d workers (%s backend, %s); model %s; data %s (%ld train, %ld test)\n",
                prefix.c_str(), s.rank.world_size, s.pg->getBackendName().c_str(),
                s.device.str().c_str(), s.model->description().c_str(),
                s.data.train->description().c_str(), static_cast<long>(s.data.train->size()),
                static_cast<long>(s.data.test->size()));
    std::printf("%s%s\n", prefix.c_str(), host_memory.c_str());
    if (!pipeline_note->empty()) std::printf("%s%s\n", prefix.c_str(), pipeline_note->c_str());
    std::fflush(stdout);
  }

  absl::StatusOr<LoopResult> result = RunTrainingLoop(ctx);
  if (!result.ok()) {
    std::string reason(result.status().message());
    int code = result.status().code() == absl::StatusCode::kAborted ? kExitAborted : kExitFailed;
    report_done(result.status());
    reporter.AcknowledgeAbort();  // this thread acts on it now: no forced exit meanwhile
    if (code != kExitAborted) {
      // A collective failed: usually a peer died. The coordinator learns which one from that
      // peer's launcher at once, or within its heartbeat timeout; wait that long for it to name
      // the rank. If the reason names this rank (our own report got there first), give the
      // coordinator a moment to re-attribute it to a dead peer (Job::kRootCauseWindow).
      const absl::Time deadline = absl::Now() + absl::Seconds(c.heartbeat_timeout_s + 3);
      const std::string self = absl::StrCat("rank ", s.rank.rank, " (");
      absl::Time settle = absl::InfiniteFuture();
      for (;;) {
        const absl::Time now = absl::Now();
        auto why = reporter.abort_reason();
        if (now >= deadline || (why && !absl::StartsWith(*why, self)) || now >= settle) break;
        if (why && settle == absl::InfiniteFuture()) settle = now + absl::Seconds(2);
        absl::SleepFor(absl::Milliseconds(300));
        if (why) reporter.Flush();
      }
      if (auto why = reporter.abort_reason()) {
        reason = absl::StrCat(*why, " (", reason, ")");
        code = kExitAborted;
      }
    }
    return Fail(prefix, code, reason);
  }
  if (result->outcome == LoopOutcome::kStopped) {
    report_done(
        absl::CancelledError(absl::StrCat("stopped after checkpoint ", result->checkpoint)));
    s.pg->shutdown();
    return kExitResumable;
  }
  if (s.rank.rank == 0 && !c.checkpoint_dir.empty()) {
    auto last = ReadCheckpoint(result->checkpoint);
    absl::Status st =
        last.ok() ? WriteCheckpoint(c.checkpoint_dir + "/final.pt", *last) : last.status();
    if (!st.ok()) {
      report_done(st);
      return Fail(prefix, kExitFailed, std::string(st.message()));
    }
    std::printf("%sfinal weights: %s/final.pt\n", prefix.c_str(), c.checkpoint_dir.c_str());
  }
  report_done(absl::OkStatus());
  s.pg->shutdown();
  return kExitOk;
}

}  // namespace ddp
