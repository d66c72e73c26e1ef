// StatusFromException: each exception type maps to its code, by type alone (the messages below
// are chosen to mislead any text matching), with the context and only the first line.
#include "trainer/ddp/status_from_exception.h"

#include <c10/util/Exception.h>

#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/ddp/dist_errors.h"

namespace ddp {
namespace {

std::exception_ptr Capture(const std::function<void()>& thrower) {
  try {
    thrower();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

struct Case {
  const char* name;
  std::function<void()> thrower;
  absl::StatusCode code;
};

TEST(StatusFromException, MapsEachTypeToItsCodeWhateverTheMessageSays) {
  const std::vector<Case> cases = {
      {"store timeout", [] { DDP_THROW(StoreTimeoutError, "connection reset"); },
       absl::StatusCode::kDeadlineExceeded},
      {"collective timeout", [] { DDP_THROW(CollectiveTimeoutError, "peer closed"); },
       absl::StatusCode::kDeadlineExceeded},
      {"queue empty", [] { C10_THROW_ERROR(DistQueueEmptyError, "nothing"); },
       absl::StatusCode::kDeadlineExceeded},
      {"backend", [] { C10_THROW_ERROR(DistBackendError, "Timeout after 5 ms"); },
       absl::StatusCode::kUnavailable},
      {"network", [] { C10_THROW_ERROR(DistNetworkError, "timed out"); },
       absl::StatusCode::kUnavailable},
      {"store", [] { C10_THROW_ERROR(DistStoreError, "Timeout waiting for key"); },
       absl::StatusCode::kUnavailable},
      {"oom", [] { C10_THROW_ERROR(OutOfMemoryError, "Timeout"); },
       absl::StatusCode::kResourceExhausted},
      {"not implemented", [] { C10_THROW_ERROR(NotImplementedError, "x"); },
       absl::StatusCode::kUnimplemented},
      {"index", [] { C10_THROW_ERROR(IndexError, "x"); }, absl::StatusCode::kInvalidArgument},
      {"value", [] { TORCH_CHECK_VALUE(false, "timed out"); }, absl::StatusCode::kInvalidArgument},
      {"type", [] { TORCH_CHECK_TYPE(false, "x"); }, absl::StatusCode::kInvalidArgument},
      {"c10 error", [] { TORCH_CHECK(false, "Timeout"); }, absl::StatusCode::kInternal},
      {"bad_alloc", [] { throw std::bad_alloc(); }, absl::StatusCode::kResourceExhausted},
      {"invalid_argument", [] { throw std::invalid_argument("timed out"); },
       absl::StatusCode::kInvalidArgument},
      {"runtime_error", [] { throw std::runtime_error("Timed out waiting"); },
       absl::StatusCode::kInternal},
      {"not an exception", [] { throw 42; }, absl::StatusCode::kUnknown},
  };
  for (const Case& c : cases) {
    const absl::Status st = StatusFromException(Capture(c.thrower), "ctx");
    EXPECT_EQ(st.code(), c.code) << c.name << ": " << st;
    EXPECT_EQ(st.message().substr(0, 5), "ctx: ") << c.name << ": " << st;
  }
}

TEST(StatusFromException, KeepsTheFirstLineAndNoContextWhenEmpty) {
  const absl::Status st =
      StatusFromException(Capture([] { throw std::runtime_error("first\nsecond"); }), "");
  EXPECT_EQ(st.message(), "first");
  const absl::Status c10 =
      StatusFromException(Capture([] { TORCH_CHECK(false, "only this"); }), "w");
  EXPECT_EQ(c10.message(), "w: only this") << c10;  // no stack trace
  EXPECT_TRUE(StatusFromException(nullptr, "x").ok());
}

TEST(RunGuarded, PassesStatusAndValuesThroughAndConvertsExceptions) {
  EXPECT_TRUE(RunGuarded("x", [] { return absl::OkStatus(); }).ok());
  EXPECT_EQ(RunGuarded("x", [] { return absl::NotFoundError("n"); }).code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<int> v = RunGuarded("x", []() -> absl::StatusOr<int> { return 7; });
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 7);
  absl::StatusOr<int> thrown = RunGuarded(
      "making an int", []() -> absl::StatusOr<int> { DDP_THROW(CollectiveTimeoutError, "gone"); });
  EXPECT_EQ(thrown.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(thrown.status().message(), "making an int: gone");
}

}  // namespace
}  // namespace ddp
