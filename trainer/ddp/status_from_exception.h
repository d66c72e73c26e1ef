// The one boundary where exceptions from LibTorch, c10d and the standard library become
// absl::Status in the data plane. Classified by type, never by message text:
//
//   StoreTimeoutError, CollectiveTimeoutError, c10::DistQueueEmptyError   DEADLINE_EXCEEDED
//   c10::DistNetworkError, DistBackendError, DistStoreError, DistError    UNAVAILABLE
//   c10::OutOfMemoryError, std::bad_alloc                                  RESOURCE_EXHAUSTED
//   c10::NotImplementedError                                               UNIMPLEMENTED
//   c10::IndexError, ValueError, TypeError, std::invalid_argument         INVALID_ARGUMENT
//   any other c10::Error or std::exception                                 INTERNAL
//   anything else                                                          UNKNOWN
//
// The message is "<context>: <first line of what()>" (c10 errors carry stack traces on later
// lines). Typical use, at a stage boundary:
//
//   absl::Status st = RunGuarded("building the process group", [&] { return Build(); });
//
// Thread safety: pure functions.
#ifndef SLURM_DDP_TRAINER_DDP_STATUS_FROM_EXCEPTION_H_
#define SLURM_DDP_TRAINER_DDP_STATUS_FROM_EXCEPTION_H_

#include <exception>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddp {

absl::Status StatusFromException(std::exception_ptr error, absl::string_view context);

// Runs `body` (returning absl::Status or absl::StatusOr<T>); an exception it throws becomes the
// Status that StatusFromException gives.
template <typename Body>
auto RunGuarded(absl::string_view context, Body&& body) -> std::invoke_result_t<Body> {
  try {
    return body();
  } catch (...) {
    return StatusFromException(std::current_exception(), context);
  }
}

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_DDP_STATUS_FROM_EXCEPTION_H_
