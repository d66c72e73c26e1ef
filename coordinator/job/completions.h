// Callbacks collected while the job's lock is held and run after it is released: registration
// replies and log lines never run under the lock, so a callback may call back into the job.
// Declare a Completions before the lock guard in the same scope; its destructor runs the
// callbacks in order once the guard is gone.
//
// Thread safety: one object per call, on the caller's stack; not shared.
#ifndef SLURM_DDP_COORDINATOR_JOB_COMPLETIONS_H_
#define SLURM_DDP_COORDINATOR_JOB_COMPLETIONS_H_

#include <functional>
#include <utility>
#include <vector>

namespace ddp {

class Completions {
 public:
  Completions() = default;
  ~Completions() { Run(); }
  Completions(const Completions&) = delete;
  Completions& operator=(const Completions&) = delete;

  void Add(std::function<void()> callback) { pending_.push_back(std::move(callback)); }
  // Runs what is pending now (the destructor runs what is left).
  void Run() {
    std::vector<std::function<void()>> now;
    now.swap(pending_);
    for (auto& callback : now) callback();
  }
  size_t size() const { return pending_.size(); }

 private:
  std::vector<std::function<void()>> pending_;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_JOB_COMPLETIONS_H_
