#include "trainer/worker/communication_stage.h"

#include <utility>

#include "common/status_macros.h"
#include "trainer/ddp/dist_errors.h"
#include "trainer/worker/state_sync.h"

namespace ddp {

CommunicationStage::CommunicationStage(c10::intrusive_ptr<c10d::Store> store, Options options,
                                       ModelStage& model, TrainingPosition& position)
    : store_(std::move(store)), options_(std::move(options)), model_(model), position_(position) {
  // An interrupt (a newer generation announced) also ends this rank's waits on a Gloo collective
  // of the group it supersedes, which Gloo may not end by itself (dist_errors.h).
  SetCollectiveGiveUpFlag(&interrupted_);
}

CommunicationStage::~CommunicationStage() {
  ClearCollectiveGiveUpFlag(&interrupted_);
  // The engine holds the group and hooks on the model's parameters: it goes first. The group's
  // own destructor then shuts it down, or aborts it when failed or when an exception unwinds.
  if (ddp_) ddp_->ZeroGrad();
  ddp_.reset();
}

void CommunicationStage::MarkFailed() { pg_.MarkFailed(); }

namespace {

constexpr char kSuperseded[] =
    "a newer membership generation was announced while this rank built its process group";

}  // namespace

void CommunicationStage::Interrupt() {
  interrupted_.store(true, std::memory_order_release);
  build_cancel_.Cancel(kSuperseded);
  c10::intrusive_ptr<c10d::Backend> backend;
  {
    absl::MutexLock lock(&interrupt_mu_);
    backend = abortable_;
  }
  if (backend) AbortProcessGroup(*backend).IgnoreError();
}

absl::Status CommunicationStage::Disconnect() {
  {
    absl::MutexLock lock(&interrupt_mu_);
    abortable_.reset();
  }
  if (ddp_) {
    std::vector<size_t> order = ddp_->gradient_order();
    if (!order.empty()) gradient_order_ = std::move(order);
    ddp_->ZeroGrad();  // gradients are views into this engine's buckets
    ddp_.reset();
  }
  return pg_.Close();
}

absl::StatusOr<int> CommunicationStage::Connect(const std::string& prefix, int rank,
                                                int world_size) {
  // A failed teardown of the old group must not stop the new one from being built.
  Disconnect().IgnoreError();
  interrupted_.store(false, std::memory_order_release);
  build_cancel_.Reset();
  if (superseded_ && superseded_()) build_cancel_.Cancel(kSuperseded);
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(ProcessGroupHandle pg,
                   ProcessGroupHandle::Create(store_, prefix, rank, world_size,
                                              options_.process_group, &build_cancel_));
  const absl::Time built = absl::Now();
  absl::StatusOr<int> root =
      SyncTrainingState(pg.backend(), {model_, position_, gradient_order_}, sync_hook_);
  const absl::Time synced = absl::Now();
  ConnectSeconds took{absl::ToDoubleSeconds(built - start), absl::ToDoubleSeconds(synced - built)};
  if (!root.ok()) {
    pg.MarkFailed();
    return root.status();
  }
  DdpOptions ddp_options = options_.ddp;
  ddp_options.init_sync = false;  // the state sync made every rank equal to the root
  ddp_options.reducer.initial_order = gradient_order_;
  auto ddp = DistributedDataParallel::Create(model_.tensors(), pg.shared(), ddp_options);
  if (!ddp.ok()) {
    pg.MarkFailed();
    return ddp.status();
  }
  pg_ = std::move(pg);
  ddp_ = *std::move(ddp);
  ++connects_;
  took.engine = absl::ToDoubleSeconds(absl::Now() - synced);
  last_connect_ = took;
  {
    absl::MutexLock lock(&interrupt_mu_);
    if (pg_.backend().getBackendName() == "nccl") abortable_ = pg_.shared();
  }
  if (interrupted()) Interrupt();  // an interrupt that came while connecting
  return root;
}

}  // namespace ddp
