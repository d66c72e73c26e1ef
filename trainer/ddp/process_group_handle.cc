#include "trainer/ddp/process_group_handle.h"

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <system_error>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "trainer/ddp/dist_errors.h"

namespace ddp {
namespace internal {

// One Gloo build on its own thread, shared by that thread and the caller that waits for it.
struct PendingBuild {
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  bool cancelled ABSL_GUARDED_BY(mu) = false;  // GroupBuildCancel::Cancel came
  bool abandoned ABSL_GUARDED_BY(mu) = false;  // the caller returned without the result
  absl::StatusOr<c10::intrusive_ptr<c10d::Backend>> result ABSL_GUARDED_BY(mu) =
      absl::UnknownError("not built");
};

}  // namespace internal

void GroupBuildCancel::Cancel(absl::string_view why) {
  std::shared_ptr<internal::PendingBuild> waiting;
  {
    absl::MutexLock lock(&mu_);
    if (!why_) why_ = std::string(why);
    waiting = waiting_;
  }
  if (waiting == nullptr) return;
  absl::MutexLock lock(&waiting->mu);
  waiting->cancelled = true;
}

void GroupBuildCancel::Reset() {
  absl::MutexLock lock(&mu_);
  why_.reset();
}

bool GroupBuildCancel::cancelled() const {
  absl::MutexLock lock(&mu_);
  return why_.has_value();
}

absl::Status GroupBuildCancel::Cancelled() const {
  return absl::UnavailableError(why_ ? *why_ : std::string("the group build was given up"));
}

absl::StatusOr<ProcessGroupHandle> ProcessGroupHandle::Create(
    const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix, int rank,
    int world_size, const ProcessGroupOptions& options, GroupBuildCancel* cancel) {
  c10::intrusive_ptr<c10d::Store> scoped = store;
  if (!prefix.empty()) scoped = c10::make_intrusive<c10d::PrefixStore>(prefix, store);
  // Building a group waits for every peer's address and connects to each: a peer that dies (or
  // stops) meanwhile leaves this rank waiting up to the group's timeout, --pg-timeout. To the
  // worker that is a collective wait, so that its rejoin deadline applies (ProgressReporter).
  const CollectiveWaitScope waiting;
  // NCCL builds its communicators at the first collective (and is aborted from another thread
  // there): only Gloo's build runs on a thread of its own.
  if (cancel == nullptr || ResolveBackendKind(options.backend) != BackendKind::kGloo) {
    absl::StatusOr<c10::intrusive_ptr<c10d::Backend>> backend =
        CreateProcessGroup(scoped, rank, world_size, options);
    if (!backend.ok()) return backend.status();
    return ProcessGroupHandle(*std::move(backend), prefix);
  }
  auto build = std::make_shared<internal::PendingBuild>();
  {
    absl::MutexLock lock(&cancel->mu_);
    if (cancel->why_) return cancel->Cancelled();
    cancel->waiting_ = build;
  }
  // The thread holds the build (and through it the store) until it ends: a build given up goes
  // on until Gloo's own timeout, and the group it may still complete is dropped there.
  try {
    std::thread([build, scoped, rank, world_size, options] {
      absl::StatusOr<c10::intrusive_ptr<c10d::Backend>> backend =
          CreateProcessGroup(scoped, rank, world_size, options);
      absl::MutexLock lock(&build->mu);
      if (build->abandoned) return;  // the backend, if any, is released here
      build->result = std::move(backend);
      build->done = true;
    }).detach();
  } catch (const std::system_error& e) {
    absl::MutexLock lock(&cancel->mu_);
    cancel->waiting_.reset();
    return absl::ResourceExhaustedError(
        absl::StrCat("no thread to build the process group for rank ", rank, ": ", e.what()));
  }
  absl::StatusOr<c10::intrusive_ptr<c10d::Backend>> backend;
  bool given_up = false;
  {
    absl::MutexLock lock(&build->mu);
    auto ended = [&build]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(build->mu) {
      return build->done || build->cancelled;
    };
    build->mu.Await(absl::Condition(&ended));
    given_up = !build->done;
    if (given_up) {
      build->abandoned = true;
    } else {
      backend = std::move(build->result);
    }
  }
  absl::MutexLock lock(&cancel->mu_);
  cancel->waiting_.reset();
  if (given_up) return cancel->Cancelled();
  if (!backend.ok()) return backend.status();
  return ProcessGroupHandle(*std::move(backend), prefix);
}

ProcessGroupHandle::ProcessGroupHandle(c10::intrusive_ptr<c10d::Backend> backend,
                                       std::string prefix)
    : backend_(std::move(backend)),
      prefix_(std::move(prefix)),
      uncaught_at_start_(std::uncaught_exceptions()) {}

ProcessGroupHandle::ProcessGroupHandle(ProcessGroupHandle&& other) noexcept
    : backend_(std::move(other.backend_)),
      prefix_(std::move(other.prefix_)),
      failed_(other.failed_),
      uncaught_at_start_(other.uncaught_at_start_) {
  other.backend_.reset();
}

ProcessGroupHandle& ProcessGroupHandle::operator=(ProcessGroupHandle&& other) noexcept {
  if (this != &other) {
    Close().IgnoreError();
    backend_ = std::move(other.backend_);
    other.backend_.reset();
    prefix_ = std::move(other.prefix_);
    failed_ = other.failed_;
    uncaught_at_start_ = other.uncaught_at_start_;
  }
  return *this;
}

ProcessGroupHandle::~ProcessGroupHandle() {
  if (!backend_) return;
  // An exception leaving the owner's scope means the run did not end normally: peers may be
  // gone, and a shutdown could wait for collectives that never complete.
  if (std::uncaught_exceptions() > uncaught_at_start_) failed_ = true;
  Close().IgnoreError();
}

namespace {

std::atomic<int> g_groups_ending{0};

// Drops `backend`, a failed Gloo group, on a thread of its own once that thread holds its last
// reference: the drop waits for the collectives the group's threads still run, which can last
// the group's timeout (a peer alive that never sends; a receive its dead peer cut off in the
// middle, which Gloo's TCP transport does not end). Without a thread, drops it here, as a
// collective wait (the worker's rejoin deadline then applies).
void EndInBackground(c10::intrusive_ptr<c10d::Backend> backend) {
  auto held = std::make_shared<c10::intrusive_ptr<c10d::Backend>>(std::move(backend));
  g_groups_ending.fetch_add(1, std::memory_order_relaxed);
  try {
    std::thread([held] {
      while (held->use_count() > 1) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      held->reset();
      g_groups_ending.fetch_sub(1, std::memory_order_relaxed);
    }).detach();
  } catch (const std::system_error&) {
    g_groups_ending.fetch_sub(1, std::memory_order_relaxed);
    const CollectiveWaitScope waiting;
    held->reset();
  }
}

}  // namespace

int ProcessGroupHandle::GroupsEnding() { return g_groups_ending.load(std::memory_order_relaxed); }

absl::Status ProcessGroupHandle::Close() {
  if (!backend_) return absl::OkStatus();
  c10::intrusive_ptr<c10d::Backend> backend = std::move(backend_);
  backend_.reset();
  if (!failed_) return ShutdownProcessGroup(*backend);
  if (backend->getBackendName() == "gloo") {
    // Gloo has no abort: the group ends when its last reference goes (see the header).
    EndInBackground(std::move(backend));
    return absl::OkStatus();
  }
  // An aborted communicator ends its collectives at once; its drop is marked as a collective
  // wait all the same, so that the worker's rejoin deadline applies if it does not.
  const CollectiveWaitScope waiting;
  absl::Status aborted = AbortProcessGroup(*backend);
  backend.reset();
  return aborted;
}

absl::Status ProcessGroupHandle::Abort() {
  failed_ = true;
  return Close();
}

}  // namespace ddp
