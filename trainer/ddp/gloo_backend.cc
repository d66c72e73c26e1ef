// The only translation unit that includes ProcessGroupGloo.hpp (and so gloo headers).
//
// Soundness (docs/development.md, "Gloo from C++ with the pip wheel"): this file is compiled with
// hidden visibility, touches gloo types only through std::shared_ptr / intrusive_ptr, and calls
// only out-of-line functions that libtorch_cpu defines (Options::create_default, createDeviceFor*,
// the ProcessGroupGloo constructor). Every gloo symbol therefore resolves to the gloo compiled
// into libtorch_cpu; tests/integration/gloo_soundness_test.sh checks the object and the binary.
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "trainer/ddp/backend_factories.h"

namespace ddp::internal {

c10::intrusive_ptr<c10d::Backend> NewGlooBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                 int rank, int world_size,
                                                 std::chrono::milliseconds timeout,
                                                 const std::string& hostname, int threads) {
  c10::intrusive_ptr<c10d::ProcessGroupGloo::Options> options;
  if (hostname.empty()) {
    options = c10d::ProcessGroupGloo::Options::create_default(timeout);
  } else {
    options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(hostname));
  }
  options->timeout = timeout;
  options->threads = threads;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
}

}  // namespace ddp::internal
