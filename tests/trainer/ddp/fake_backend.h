// A c10d::Backend that runs no collective: it records shutdown() and abort() calls, reports a
// chosen timeout and error type, and hands out Work objects that fail as told. For unit tests of
// code that owns or waits on a process group (process_group_handle, dist_errors).
//
// Thread safety: for one test thread.
#ifndef SLURM_DDP_TESTS_TRAINER_DDP_FAKE_BACKEND_H_
#define SLURM_DDP_TESTS_TRAINER_DDP_FAKE_BACKEND_H_

#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

namespace ddp::testing {

class FakeBackend : public c10d::Backend {
 public:
  explicit FakeBackend(std::chrono::milliseconds timeout, int rank = 0, int size = 1)
      : c10d::Backend(rank, size), timeout_(timeout) {}

  const std::string getBackendName() const override { return name; }
  c10::intrusive_ptr<Options> getBackendOptions() override {
    return c10::make_intrusive<Options>("fake", timeout_);
  }
  c10d::ErrorType getError() override { return error; }
  void shutdown() override { calls.push_back("shutdown"); }
  void abort() override { calls.push_back("abort"); }

  c10d::ErrorType error = c10d::ErrorType::SUCCESS;
  std::vector<std::string> calls;
  std::string name = "fake";  // "gloo": WaitForWork polls the give-up flag

 private:
  std::chrono::milliseconds timeout_;
};

// A finished Work whose wait() throws what `thrower` throws (nothing: success).
class FakeWork : public c10d::Work {
 public:
  explicit FakeWork(std::function<void()> thrower) : thrower_(std::move(thrower)) {}
  bool wait(std::chrono::milliseconds /*timeout*/) override {
    if (thrower_) thrower_();
    return true;
  }

 private:
  std::function<void()> thrower_;
};

}  // namespace ddp::testing

#endif  // SLURM_DDP_TESTS_TRAINER_DDP_FAKE_BACKEND_H_
