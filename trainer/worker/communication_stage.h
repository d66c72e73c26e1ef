// The part of a worker that is torn down and rebuilt while it runs: the process group
// (ProcessGroupHandle) and the DDP engine over the model stage's tensors.
//
// Connect(prefix, rank, world) builds the group with its keys under `prefix` of the store (one
// prefix per membership generation), makes every rank's training state equal to the most
// advanced rank's (state_sync.h), then builds the DDP engine with the bucket layout agreed
// before (so reductions add up in the same order as an uninterrupted run). Connecting again
// first tears the current engine and group down — the group is shut down, or aborted once
// MarkFailed() was called or when an exception unwinds — while the model, the optimizer state
// and the position stay in place. In-job recovery is one more Connect with a new prefix, the
// same path as the start.
//
//   CommunicationStage comm(store, options, model, position);
//   ASSIGN_OR_RETURN(int root, comm.Connect("gen0", rank, world));
//   ... train with comm.ddp() and comm.process_group() ...
//   if (!status.ok()) comm.MarkFailed();           // a collective failed: abort, not shutdown
//   ASSIGN_OR_RETURN(root, comm.Connect("gen1", rank, world));  // rebuilt, state from `root`
//
// Never cache comm.ddp() or comm.process_group() across a Connect.
//
// Interrupt() may come from another thread (the heartbeat thread, when the coordinator announces
// a newer membership generation): it aborts an NCCL group's communicators so that work blocked
// on a dead peer fails at once instead of at NCCL's timeout. Gloo has no abort: its collectives
// usually fail as the dead peer's and then the other survivors' connections close, but not a
// receive that the dead peer's message was cut off in the middle of (it waits for the group's
// timeout), so this rank's wait on a Gloo collective is given up instead (WaitForWork, through
// SetCollectiveGiveUpFlag: one stage per process) and the failed group is dropped in the
// background. A Gloo group still being built is given up too (ProcessGroupHandle's
// GroupBuildCancel): a peer that died after
// it published its address would otherwise hold this rank in Gloo's connect until the group's
// timeout, and Connect returns UNAVAILABLE at once. interrupted() stays true until the next
// Connect: a step that ran while it turned true must not be committed. An interrupt that comes
// between the decision to connect and the build is not lost when SetSupersededCheck names what
// makes it stale (a newer generation announced): Connect consults it once the build can be
// given up.
//
// Thread safety: the training thread only, except Interrupt() and interrupted() (any thread).
#ifndef SLURM_DDP_TRAINER_WORKER_COMMUNICATION_STAGE_H_
#define SLURM_DDP_TRAINER_WORKER_COMMUNICATION_STAGE_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "trainer/ddp/ddp.h"
#include "trainer/ddp/process_group.h"
#include "trainer/ddp/process_group_handle.h"
#include "trainer/worker/model_stage.h"
#include "trainer/worker/training_position.h"

namespace ddp {

class CommunicationStage {
 public:
  struct Options {
    ProcessGroupOptions process_group;
    DdpOptions ddp;  // init_sync and reducer.initial_order are the stage's to set
  };

  // `store` (the coordinator's, or any c10d store) is shared by every build; `model` and
  // `position` must outlive the stage.
  CommunicationStage(c10::intrusive_ptr<c10d::Store> store, Options options, ModelStage& model,
                     TrainingPosition& position);
  ~CommunicationStage();  // the engine, then the group (see above)
  CommunicationStage(const CommunicationStage&) = delete;
  CommunicationStage& operator=(const CommunicationStage&) = delete;

  // Tears down what is connected, then builds and syncs as above. Returns the rank the state
  // came from. On error nothing is connected (a group built on the way is aborted).
  absl::StatusOr<int> Connect(const std::string& prefix, int rank, int world_size);
  // The engine, then the group: shut down, or aborted after MarkFailed(). OK when not connected.
  absl::Status Disconnect();
  // A collective of the current group failed: end it with an abort.
  void MarkFailed();
  // From any thread: see above.
  void Interrupt();
  // Called by Connect once a build can be given up: true gives it up at once. Set before
  // connecting; it runs on the training thread.
  void SetSupersededCheck(std::function<bool()> superseded) { superseded_ = std::move(superseded); }
  // Called in each state sync once the root's position has arrived (tests: the "sync" hold
  // point of test_hold.h). Set before connecting.
  void SetSyncHook(std::function<void()> hook) { sync_hook_ = std::move(hook); }
  bool interrupted() const { return interrupted_.load(std::memory_order_acquire); }

  bool connected() const { return ddp_ != nullptr; }
  DistributedDataParallel& ddp() { return *ddp_; }
  c10d::Backend& process_group() { return pg_.backend(); }
  const std::string& prefix() const { return pg_.prefix(); }
  int connects() const { return connects_; }  // successful Connect() calls so far
  // How the last successful Connect() spent its time: building the process group (the store
  // rendezvous and the connections), the training-state sync, and the DDP engine's build.
  struct ConnectSeconds {
    double group = 0;
    double sync = 0;
    double engine = 0;
  };
  const ConnectSeconds& last_connect() const { return last_connect_; }
  // The DDP bucket layout the next engine will be built with (empty until agreed).
  const std::vector<size_t>& gradient_order() const { return gradient_order_; }

 private:
  const c10::intrusive_ptr<c10d::Store> store_;
  const Options options_;
  ModelStage& model_;
  TrainingPosition& position_;
  std::vector<size_t> gradient_order_;
  int connects_ = 0;
  ConnectSeconds last_connect_;
  ProcessGroupHandle pg_;  // declared before ddp_: outlives it
  std::unique_ptr<DistributedDataParallel> ddp_;
  std::atomic<bool> interrupted_{false};
  std::function<bool()> superseded_;
  std::function<void()> sync_hook_;
  GroupBuildCancel build_cancel_;
  absl::Mutex interrupt_mu_;
  // The connected group when its backend can be aborted from another thread (NCCL).
  c10::intrusive_ptr<c10d::Backend> abortable_ ABSL_GUARDED_BY(interrupt_mu_);
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_WORKER_COMMUNICATION_STAGE_H_
