// Mixed precision for one scope: while an AutocastGuard lives, autocast casts eligible ops on
// its device type to its dtype; when it goes — normally or by an exception — the previous
// autocast state (enabled flag and dtype) comes back and, leaving the outermost autocast scope,
// the cast cache is cleared, as torch.autocast's context manager does.
//
//   {
//     AutocastGuard autocast(at::kCUDA, at::kBFloat16, config.bf16);
//     logits = model.forward(x);
//   }  // autocast off again, even if forward threw
//
// Thread safety: autocast state is thread-local; a guard belongs to the thread that made it.
#ifndef SLURM_DDP_TRAINER_WORKER_AUTOCAST_GUARD_H_
#define SLURM_DDP_TRAINER_WORKER_AUTOCAST_GUARD_H_

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

namespace ddp {

class AutocastGuard {
 public:
  // With `enabled` false the guard does nothing (so call sites need no branch).
  AutocastGuard(c10::DeviceType device, c10::ScalarType dtype, bool enabled);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  const c10::DeviceType device_;
  const bool active_;
  bool previous_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Undefined;
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_WORKER_AUTOCAST_GUARD_H_
