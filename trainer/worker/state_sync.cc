#include "trainer/worker/state_sync.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>

#include <chrono>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "trainer/ddp/ddp.h"
#include "trainer/ddp/dist_errors.h"
#include "trainer/ddp/status_from_exception.h"

namespace ddp {
namespace {

void Broadcast(c10d::Backend& pg, at::Tensor& t, int root, const char* what) {
  std::vector<at::Tensor> tensors = {t};
  c10d::BroadcastOptions opts;
  opts.rootRank = root;
  const auto issued = std::chrono::steady_clock::now();
  WaitForWork(*pg.broadcast(tensors, opts), pg, issued, what);
}

// The root's position record, decoded on every rank.
absl::StatusOr<TrainingPosition> BroadcastPosition(c10d::Backend& pg, int root,
                                                   const TrainingPosition& mine,
                                                   at::Device device) {
  const std::vector<uint8_t> record = EncodePosition(mine);
  at::Tensor t = at::from_blob(const_cast<uint8_t*>(record.data()),
                               {static_cast<int64_t>(record.size())}, at::kByte)
                     .clone()
                     .to(device);
  Broadcast(pg, t, root, "state sync: position");
  const at::Tensor cpu = t.cpu().contiguous();
  const uint8_t* p = cpu.data_ptr<uint8_t>();
  auto decoded = DecodePosition(absl::MakeConstSpan(p, static_cast<size_t>(cpu.numel())));
  if (!decoded.ok()) {
    return absl::DataLossError(
        absl::StrCat("position from rank ", root, ": ", decoded.status().message()));
  }
  return decoded;
}

// The root's optimizer-slot presence (one flag per parameter) and gradient order, received but
// not applied.
struct Layout {
  std::vector<bool> slot_present;
  std::vector<size_t> order;
};

Layout BroadcastLayout(c10d::Backend& pg, int root, Sgd& sgd, const std::vector<size_t>& order,
                       at::Device device) {
  const std::vector<at::Tensor>& slots = sgd.momentum_slots();
  const int64_t n = static_cast<int64_t>(slots.size());
  // [gradient order length, slot present?...]
  std::vector<int64_t> meta = {static_cast<int64_t>(order.size())};
  for (const auto& s : slots) meta.push_back(s.defined() ? 1 : 0);
  at::Tensor m = at::tensor(meta, at::kLong).to(device);
  Broadcast(pg, m, root, "state sync: optimizer layout");
  const at::Tensor cpu = m.cpu();
  const int64_t* v = cpu.data_ptr<int64_t>();
  Layout out;
  for (int64_t i = 0; i < n; ++i) out.slot_present.push_back(v[1 + i] != 0);
  const int64_t order_size = v[0];
  if (order_size == 0) return out;
  at::Tensor o = pg.getRank() == root
                     ? at::tensor(std::vector<int64_t>(order.begin(), order.end()), at::kLong)
                     : at::zeros({order_size}, at::kLong);
  o = o.to(device);
  Broadcast(pg, o, root, "state sync: gradient order");
  const at::Tensor ocpu = o.cpu();
  out.order.assign(ocpu.data_ptr<int64_t>(), ocpu.data_ptr<int64_t>() + order_size);
  return out;
}

// The root's default CPU generator state (on the root: its own).
at::Tensor BroadcastGenerator(c10d::Backend& pg, int root, at::Device device) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  at::Tensor state;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    state = gen.get_state().to(device);
  }
  Broadcast(pg, state, root, "state sync: random generator");
  return state.cpu();
}

}  // namespace

int ChooseSyncRoot(c10d::Backend& pg, int64_t committed_step, at::Device device) {
  std::vector<at::Tensor> mine = {at::tensor({committed_step}, at::kLong).to(device)};
  std::vector<std::vector<at::Tensor>> all(1);
  for (int r = 0; r < pg.getSize(); ++r) all[0].push_back(at::empty_like(mine[0]));
  const auto issued = std::chrono::steady_clock::now();
  WaitForWork(*pg.allgather(all, mine), pg, issued, "state sync: committed steps");
  int root = 0;
  int64_t best = -1;
  for (int r = 0; r < pg.getSize(); ++r) {
    const int64_t step = all[0][static_cast<size_t>(r)].cpu().item<int64_t>();
    if (step > best) {
      best = step;
      root = r;
    }
  }
  return root;
}

absl::StatusOr<int> SyncTrainingState(c10d::Backend& pg, const TrainingStateRef& state,
                                      const std::function<void()>& after_position) {
  const at::Device device = state.model.device();
  int root = 0;
  RETURN_IF_ERROR(RunGuarded("state sync", [&]() -> absl::Status {
    root = ChooseSyncRoot(pg, state.position.step, device);
    VerifyAcrossRanks(pg, state.model.tensors());
    return absl::OkStatus();
  }));
  const std::string context = absl::StrCat("state sync from rank ", root);
  // Everything is received before anything is applied: a sync that fails part way (a peer lost
  // during it) leaves this rank's state as it was. Applied as it arrived, a rank could be left
  // holding the root's step with only some of its tensors, then win the next sync's root
  // choice with that mix (the chaos run's defect 11).
  RETURN_IF_ERROR(RunGuarded(context, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(TrainingPosition position,
                     BroadcastPosition(pg, root, state.position, device));
    if (after_position) after_position();
    Sgd& sgd = state.model.optimizer();
    Layout layout = BroadcastLayout(pg, root, sgd, state.gradient_order, device);
    std::vector<at::Tensor>& slots = sgd.momentum_slots();
    const auto& params = sgd.parameters();
    const bool is_root = pg.getRank() == root;
    const ModuleTensors tensors = state.model.tensors();
    // The tensors this rank ends up with, and what the broadcast fills (the root sends its own
    // tensors; the others receive into copies).
    std::vector<at::Tensor> targets;
    for (const auto& p : tensors.parameters) targets.push_back(p.tensor);
    for (const auto& b : tensors.buffers) targets.push_back(b.tensor);
    std::vector<at::Tensor> new_slots(slots.size());
    for (size_t i = 0; i < slots.size(); ++i) {
      if (!layout.slot_present[i]) continue;
      new_slots[i] = slots[i].defined() ? slots[i] : at::zeros_like(params[i].tensor);
      targets.push_back(new_slots[i]);
    }
    std::vector<at::Tensor> received;
    received.reserve(targets.size());
    for (const auto& t : targets) received.push_back(is_root ? t : t.detach().clone());
    if (!received.empty()) BroadcastCoalesced(pg, received, root);
    const at::Tensor generator = BroadcastGenerator(pg, root, device);
    // Every collective succeeded: apply.
    if (!is_root) {
      at::NoGradGuard no_grad;
      for (size_t i = 0; i < targets.size(); ++i) targets[i].copy_(received[i]);
      at::Generator gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(generator);
    }
    for (size_t i = 0; i < slots.size(); ++i) slots[i] = new_slots[i];
    state.gradient_order = std::move(layout.order);
    state.position = std::move(position);
    return absl::OkStatus();
  }));
  return root;
}

}  // namespace ddp
