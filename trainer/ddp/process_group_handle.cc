#include "trainer/ddp/process_group_handle.h"

#include <exception>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <utility>

#include "trainer/ddp/dist_errors.h"

namespace ddp {

absl::StatusOr<ProcessGroupHandle> ProcessGroupHandle::Create(
    const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix, int rank,
    int world_size, const ProcessGroupOptions& options) {
  c10::intrusive_ptr<c10d::Store> scoped = store;
  if (!prefix.empty()) scoped = c10::make_intrusive<c10d::PrefixStore>(prefix, store);
  // Building a group waits for every peer's address and connects to each: a peer that dies (or
  // stops) meanwhile leaves this rank waiting up to the group's timeout, --pg-timeout. To the
  // worker that is a collective wait, so that its rejoin deadline applies (ProgressReporter).
  absl::StatusOr<c10::intrusive_ptr<c10d::Backend>> backend;
  {
    const CollectiveWaitScope waiting;
    backend = CreateProcessGroup(scoped, rank, world_size, options);
  }
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

absl::Status ProcessGroupHandle::Close() {
  if (!backend_) return absl::OkStatus();
  c10::intrusive_ptr<c10d::Backend> backend = std::move(backend_);
  backend_.reset();
  if (!failed_) return ShutdownProcessGroup(*backend);
  // Ending a failed Gloo group waits for the collectives its threads still run, and one may wait
  // on a peer that is alive but never sends (it tears its own group down): up to the group's
  // timeout. To the worker that is a collective wait, so that its rejoin deadline applies
  // (ProgressReporter): marked until the last reference is gone.
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
