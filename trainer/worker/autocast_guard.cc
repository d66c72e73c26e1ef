#include "trainer/worker/autocast_guard.h"

#include <ATen/autocast_mode.h>

namespace ddp {

AutocastGuard::AutocastGuard(c10::DeviceType device, c10::ScalarType dtype, bool enabled)
    : device_(device), active_(enabled) {
  if (!active_) return;
  previous_enabled_ = at::autocast::is_autocast_enabled(device_);
  previous_dtype_ = at::autocast::get_autocast_dtype(device_);
  at::autocast::set_autocast_enabled(device_, true);
  at::autocast::set_autocast_dtype(device_, dtype);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_, previous_dtype_);
}

}  // namespace ddp
