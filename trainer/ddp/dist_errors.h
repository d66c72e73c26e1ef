// Typed failures of the data plane's communication, so that callers classify them by type and
// never by message text (status_from_exception.h maps them to absl::Status codes):
//
//   StoreTimeoutError       a store get()/wait() ran past its timeout   (a c10::DistStoreError)
//   CollectiveTimeoutError  a collective ran past the group's timeout   (a c10::DistBackendError)
//   c10::DistBackendError   any other failed collective (a peer gone, a closed connection)
//
// WaitForWork() is the one place a collective is waited for. Gloo reports a timeout and a lost
// peer with the same exception type (gloo::IoException, which is no c10 type), so WaitForWork
// decides by what it knows: NCCL's own error type (Backend::getError() == TIMEOUT), or a failure
// that came after the group's timeout had elapsed since the collective was issued.
//
// LibTorch only (no abseil): the reducer, which the GPU benchmark builds alone, uses it.
//
// Thread safety: WaitForWork may be called from any thread that may wait on `work`.
#ifndef SLURM_DDP_TRAINER_DDP_DIST_ERRORS_H_
#define SLURM_DDP_TRAINER_DDP_DIST_ERRORS_H_

#include <c10/util/Exception.h>

#include <atomic>
#include <chrono>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace ddp {

class StoreTimeoutError : public c10::DistStoreError {
 public:
  using c10::DistStoreError::DistStoreError;
};

class CollectiveTimeoutError : public c10::DistBackendError {
 public:
  using c10::DistBackendError::DistBackendError;
};

class CollectiveAbandonedError : public c10::DistBackendError {
 public:
  using c10::DistBackendError::DistBackendError;
};

// Throws `E` with `message` and the caller's source location.
template <typename E>
[[noreturn]] void ThrowTyped(const std::string& message, const char* function, const char* file,
                             uint32_t line) {
  throw E(c10::SourceLocation{function, file, line}, message);
}
#define DDP_THROW(E, message) ::ddp::ThrowTyped<E>((message), __func__, __FILE__, __LINE__)

// The timeout of `pg`'s collectives, or zero when the backend does not say.
std::chrono::milliseconds CollectiveTimeout(c10d::Backend& pg);

// Called with true before WaitForWork waits and with false once it returns or throws, from the
// waiting thread (e.g. to report the step phase "allreduce wait"). Null by default; set it once,
// before any collective, to a function that is cheap and never throws.
using CollectiveWaitHook = void (*)(bool waiting);
void SetCollectiveWaitHook(CollectiveWaitHook hook);

// Calls the hook with true when made and with false when it ends: for the other waits on a
// group's collectives than WaitForWork's (the teardown of a failed group, which waits for the
// collectives still in flight).
class CollectiveWaitScope {
 public:
  CollectiveWaitScope();
  ~CollectiveWaitScope();
  CollectiveWaitScope(const CollectiveWaitScope&) = delete;
  CollectiveWaitScope& operator=(const CollectiveWaitScope&) = delete;

 private:
  const CollectiveWaitHook hook_;
};

// While `*flag` is true, WaitForWork gives up its wait on a Gloo collective within
// kGiveUpPollInterval and throws CollectiveAbandonedError; the collective itself goes on in
// Gloo's threads (its group can then only be dropped: ProcessGroupHandle ends it in the
// background). The worker sets it when a newer membership generation is announced: the old
// group's collectives can no longer complete, and Gloo's TCP transport does not end every wait
// that a peer's death leaves without data (a receive that the dead peer's message was cut off
// in the middle of waits for the group's whole timeout). NCCL's waits are ended by aborting the
// communicator instead, and are not polled. Null by default; `flag` must outlive every wait
// that reads it.
inline constexpr std::chrono::milliseconds kGiveUpPollInterval{50};
void SetCollectiveGiveUpFlag(const std::atomic<bool>* flag);
// Back to null, if `flag` is the one set (an owner that ends leaves another owner's flag).
void ClearCollectiveGiveUpFlag(const std::atomic<bool>* flag);

// Waits for `work` (a collective of `pg` issued at `issued`). On failure throws
// CollectiveTimeoutError or c10::DistBackendError (see above) naming `what`; errors that already
// are c10 distributed errors keep their type unless they are a timeout.
void WaitForWork(c10d::Work& work, c10d::Backend& pg, std::chrono::steady_clock::time_point issued,
                 const char* what);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_DDP_DIST_ERRORS_H_
