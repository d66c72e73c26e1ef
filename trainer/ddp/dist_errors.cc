#include "trainer/ddp/dist_errors.h"

#include <atomic>
#include <exception>
#include <string>

namespace ddp {
namespace {

std::string FirstLine(const char* text) {
  std::string s(text);
  return s.substr(0, s.find('\n'));
}

bool BackendSaysTimeout(c10d::Backend& pg) {
  try {
    return pg.getError() == c10d::ErrorType::TIMEOUT;
  } catch (const std::exception&) {
    return false;  // Gloo keeps no error state
  }
}

}  // namespace

std::chrono::milliseconds CollectiveTimeout(c10d::Backend& pg) {
  try {
    const auto options = pg.getBackendOptions();
    return options ? options->timeout : std::chrono::milliseconds(0);
  } catch (const std::exception&) {
    return std::chrono::milliseconds(0);
  }
}

namespace {

std::atomic<CollectiveWaitHook> g_wait_hook{nullptr};
std::atomic<const std::atomic<bool>*> g_give_up{nullptr};

// Point-to-point works of Gloo wait on their own buffer, and a wait with a timeout that runs out
// fails the whole group: they are never polled.
bool IsCollective(c10d::Work& work) {
  switch (work.retrieveOpType()) {
    case c10d::OpType::SEND:
    case c10d::OpType::RECV:
    case c10d::OpType::RECVANYSOURCE:
      return false;
    default:
      return true;
  }
}

// Waits for `work` to end; throws what it failed with, or CollectiveAbandonedError once
// `give_up` reads true (polled every kGiveUpPollInterval).
void WaitOrGiveUp(c10d::Work& work, const std::atomic<bool>& give_up, const char* what) {
  for (;;) {
    if (give_up.load(std::memory_order_acquire) && !work.isCompleted()) {
      DDP_THROW(CollectiveAbandonedError,
                std::string(what) +
                    " given up: a newer membership generation was announced while this rank "
                    "waited (its Gloo collective cannot end by itself)");
    }
    try {
      work.wait(kGiveUpPollInterval);
      return;
    } catch (...) {
      // Work::wait(timeout) throws the work's own error, or a plain error when the time ran out
      // first. The work may complete between that timeout and this check: then its own outcome
      // (wait() without a timeout returns it at once) is the answer, never the timeout's error.
      if (work.isCompleted()) {
        work.wait();
        return;
      }
    }
  }
}

}  // namespace

CollectiveWaitScope::CollectiveWaitScope() : hook_(g_wait_hook.load(std::memory_order_relaxed)) {
  if (hook_ != nullptr) hook_(true);
}

CollectiveWaitScope::~CollectiveWaitScope() {
  if (hook_ != nullptr) hook_(false);
}

void SetCollectiveWaitHook(CollectiveWaitHook hook) {
  g_wait_hook.store(hook, std::memory_order_relaxed);
}

void SetCollectiveGiveUpFlag(const std::atomic<bool>* flag) {
  g_give_up.store(flag, std::memory_order_release);
}

void ClearCollectiveGiveUpFlag(const std::atomic<bool>* flag) {
  g_give_up.compare_exchange_strong(flag, nullptr, std::memory_order_acq_rel);
}

void WaitForWork(c10d::Work& work, c10d::Backend& pg, std::chrono::steady_clock::time_point issued,
                 const char* what) {
  const CollectiveWaitScope mark;
  std::exception_ptr error;
  std::string message;
  bool distributed = false;
  try {
    const std::atomic<bool>* give_up = g_give_up.load(std::memory_order_acquire);
    if (give_up != nullptr && pg.getBackendName() == "gloo" && IsCollective(work)) {
      WaitOrGiveUp(work, *give_up, what);
    } else {
      work.wait();
    }
    return;
  } catch (const CollectiveTimeoutError&) {
    throw;
  } catch (const CollectiveAbandonedError&) {
    throw;
  } catch (const c10::DistError& e) {
    message = FirstLine(e.what_without_backtrace());
    distributed = true;
    error = std::current_exception();
  } catch (const c10::Error& e) {
    message = FirstLine(e.what_without_backtrace());
  } catch (const std::exception& e) {
    message = FirstLine(e.what());
  }
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - issued);
  const std::chrono::milliseconds timeout = CollectiveTimeout(pg);
  if (BackendSaysTimeout(pg) || (timeout.count() > 0 && elapsed >= timeout)) {
    DDP_THROW(CollectiveTimeoutError, std::string(what) + " timed out after " +
                                          std::to_string(elapsed.count()) +
                                          " ms (process group timeout " +
                                          std::to_string(timeout.count()) + " ms): " + message);
  }
  if (distributed) std::rethrow_exception(error);
  DDP_THROW(c10::DistBackendError, std::string(what) + " failed: " + message);
}

}  // namespace ddp
