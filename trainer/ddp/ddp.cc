#include "trainer/ddp/ddp.h"

#include <torch/csrc/utils/tensor_flatten.h>
#include <torch/nn/module.h>
#include <torch/script.h>

#include <chrono>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "trainer/ddp/dist_errors.h"
#include "trainer/ddp/status_from_exception.h"

namespace ddp {
namespace {

constexpr int64_t kMaxDims = 6;
constexpr int64_t kDescriptorSize = 2 + kMaxDims;  // dtype, ndim, dims (the rest hashed in)

std::string Describe(const int64_t* d) {
  std::ostringstream out;
  out << "[";
  for (int64_t k = 0; k < std::min(d[1], kMaxDims); ++k) out << (k ? ", " : "") << d[2 + k];
  if (d[1] > kMaxDims) out << ", ...";
  out << "] " << c10::toString(static_cast<at::ScalarType>(d[0]));
  return out.str();
}

}  // namespace

ModuleTensors TensorsOf(const torch::nn::Module& module) {
  ModuleTensors out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    out.parameters.push_back({item.key(), item.value()});
  }
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    out.buffers.push_back({item.key(), item.value()});
  }
  return out;
}

ModuleTensors TensorsOf(const torch::jit::Module& module) {
  ModuleTensors out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    out.parameters.push_back({item.name, item.value});
  }
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    out.buffers.push_back({item.name, item.value});
  }
  return out;
}

void VerifyAcrossRanks(c10d::Backend& pg, const ModuleTensors& tensors) {
  std::vector<const NamedTensor*> all;
  for (const auto& t : tensors.parameters) all.push_back(&t);
  for (const auto& t : tensors.buffers) all.push_back(&t);
  const int world = pg.getSize();
  const at::Device device = all.empty() ? at::Device(at::kCPU) : all.front()->tensor.device();
  auto gather = [&](const at::Tensor& local) {
    std::vector<at::Tensor> input = {local.to(device)};
    std::vector<std::vector<at::Tensor>> output(1);
    for (int r = 0; r < world; ++r) output[0].push_back(at::empty_like(input[0]));
    const auto issued = std::chrono::steady_clock::now();
    WaitForWork(*pg.allgather(output, input), pg, issued, "DDP: comparing the model across ranks");
    std::vector<at::Tensor> cpu;
    for (auto& t : output[0]) cpu.push_back(t.cpu());
    return cpu;
  };
  auto counts =
      gather(at::tensor(std::vector<int64_t>{static_cast<int64_t>(tensors.parameters.size()),
                                             static_cast<int64_t>(tensors.buffers.size())}));
  for (int r = 1; r < world; ++r) {
    TORCH_CHECK_VALUE(at::equal(counts[r], counts[0]),
                      "DDP: ranks disagree on the model: rank 0 has ", counts[0][0].item<int64_t>(),
                      " parameters and ", counts[0][1].item<int64_t>(), " buffers, rank ", r,
                      " has ", counts[r][0].item<int64_t>(), " and ", counts[r][1].item<int64_t>());
  }
  std::vector<int64_t> desc(all.size() * kDescriptorSize, 0);
  for (size_t i = 0; i < all.size(); ++i) {
    const at::Tensor& t = all[i]->tensor;
    int64_t* d = &desc[i * kDescriptorSize];
    d[0] = static_cast<int64_t>(t.scalar_type());
    d[1] = t.dim();
    for (int64_t k = 0; k < t.dim(); ++k) {
      if (k < kMaxDims) {
        d[2 + k] = t.size(k);
      } else {
        d[1 + kMaxDims] = d[1 + kMaxDims] * 31 + t.size(k);
      }
    }
  }
  if (desc.empty()) return;
  auto gathered = gather(at::tensor(desc));
  for (int r = 1; r < world; ++r) {
    if (at::equal(gathered[r], gathered[0])) continue;
    const int64_t* d0 = gathered[0].data_ptr<int64_t>();
    const int64_t* dr = gathered[r].data_ptr<int64_t>();
    for (size_t i = 0; i < all.size(); ++i) {
      if (std::equal(d0 + i * kDescriptorSize, d0 + (i + 1) * kDescriptorSize,
                     dr + i * kDescriptorSize)) {
        continue;
      }
      const bool is_param = i < tensors.parameters.size();
      TORCH_CHECK_VALUE(false, "DDP: ", is_param ? "parameter '" : "buffer '", all[i]->name,
                        "' differs across ranks: rank 0 has ", Describe(d0 + i * kDescriptorSize),
                        ", rank ", r, " has ", Describe(dr + i * kDescriptorSize));
    }
  }
}

void BroadcastCoalesced(c10d::Backend& pg, const std::vector<at::Tensor>& tensors, int root) {
  at::NoGradGuard no_grad;
  using Key = std::tuple<int, int, int>;
  std::map<Key, std::vector<at::Tensor>> groups;
  for (const auto& t : tensors) {
    groups[Key(static_cast<int>(t.scalar_type()), static_cast<int>(t.device().type()),
               t.device().index())]
        .push_back(t);
  }
  for (auto& [key, group] : groups) {
    std::vector<at::Tensor> flat = {torch::utils::flatten_dense_tensors(group)};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    const auto issued = std::chrono::steady_clock::now();
    WaitForWork(*pg.broadcast(flat, opts), pg, issued, "broadcast");
    if (pg.getRank() == root) continue;
    auto views = torch::utils::unflatten_dense_tensors(flat[0], group);
    for (size_t i = 0; i < group.size(); ++i) group[i].copy_(views[i]);
  }
}

DistributedDataParallel::DistributedDataParallel(ModuleTensors tensors,
                                                 c10::intrusive_ptr<c10d::Backend> pg,
                                                 DdpOptions options)
    : tensors_(std::move(tensors)), pg_(std::move(pg)), options_(options) {}

absl::StatusOr<std::unique_ptr<DistributedDataParallel>> DistributedDataParallel::Create(
    ModuleTensors tensors, c10::intrusive_ptr<c10d::Backend> pg, DdpOptions options) {
  if (!pg) return absl::InvalidArgumentError("DDP: no process group");
  std::unique_ptr<DistributedDataParallel> ddp(
      new DistributedDataParallel(std::move(tensors), std::move(pg), options));
  absl::Status built = RunGuarded("", [&]() -> absl::Status {
    VerifyAcrossRanks(*ddp->pg_, ddp->tensors_);
    std::vector<at::Tensor> sync;
    std::vector<std::string> names;
    std::vector<at::Tensor> reduced;
    for (const auto& p : ddp->tensors_.parameters) {
      sync.push_back(p.tensor);
      if (p.tensor.requires_grad()) {
        names.push_back(p.name);
        reduced.push_back(p.tensor);
      }
    }
    for (const auto& b : ddp->tensors_.buffers) sync.push_back(b.tensor);
    if (options.init_sync && !sync.empty()) BroadcastCoalesced(*ddp->pg_, sync, 0);
    ddp->reducer_ =
        std::make_unique<Reducer>(std::move(names), std::move(reduced), ddp->pg_, options.reducer);
    return absl::OkStatus();
  });
  if (!built.ok()) return built;
  return ddp;
}

absl::Status DistributedDataParallel::BeginStep() {
  step_start_ = Clock::now();
  return absl::OkStatus();
}

absl::Status DistributedDataParallel::SyncBuffers() {
  if (!options_.broadcast_buffers || tensors_.buffers.empty() || pg_->getSize() == 1) {
    return absl::OkStatus();
  }
  std::vector<at::Tensor> buffers;
  for (const auto& b : tensors_.buffers) buffers.push_back(b.tensor);
  return RunGuarded("DDP: broadcasting buffers", [&] {
    BroadcastCoalesced(*pg_, buffers, 0);
    return absl::OkStatus();
  });
}

absl::Status DistributedDataParallel::Backward(const at::Tensor& loss) {
  const auto forward_end = Clock::now();
  reducer_->MarkBackwardStart();
  RETURN_IF_ERROR(RunGuarded("DDP: backward", [&] {
    loss.backward();
    return absl::OkStatus();
  }));
  const bool synced = reducer_->sync_enabled();
  StepTimings t;
  if (synced) {
    t = reducer_->last_timings();
  } else {
    t.backward_ms = std::chrono::duration<double, std::milli>(Clock::now() - forward_end).count();
  }
  t.forward_ms = std::chrono::duration<double, std::milli>(forward_end - step_start_).count();
  timings_ = std::move(t);
  return SyncBuffers();
}

void DistributedDataParallel::BeginOptimizer() { optimizer_start_ = Clock::now(); }

void DistributedDataParallel::EndOptimizer() {
  timings_.optimizer_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - optimizer_start_).count();
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(Reducer* reducer)
    : reducer_(reducer), previous_(reducer->sync_enabled()) {
  reducer_->set_sync_enabled(false);
}

DistributedDataParallel::NoSyncGuard::~NoSyncGuard() { reducer_->set_sync_enabled(previous_); }

}  // namespace ddp
