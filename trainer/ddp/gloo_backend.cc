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
  // The constructor builds the group: every rank publishes its address in the store and connects
  // to every other (Gloo's full mesh). A failure there is a peer that went away while the group
  // formed (a replacement's peer SIGKILLed as the generation formed: "Connection refused" to the
  // address it had published), which in-job recovery handles. Gloo raises it as a plain
  // c10::Error; it leaves here as the network error it is (DistNetworkError, UNAVAILABLE to
  // StatusFromException). The store's own errors and timeouts keep their types.
  try {
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
  } catch (const c10::DistError&) {
    throw;
  } catch (const c10::Error& e) {
    C10_THROW_ERROR(DistNetworkError, e.what_without_backtrace());
  } catch (const std::runtime_error& e) {
    C10_THROW_ERROR(DistNetworkError, e.what());
  }
}

}  // namespace ddp::internal
