#include "trainer/ddp/reducer.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>

#include "trainer/ddp/dist_errors.h"

namespace ddp {

Reducer::Reducer(std::vector<std::string> names, std::vector<at::Tensor> params,
                 c10::intrusive_ptr<c10d::Backend> pg, ReducerOptions options)
    : names_(std::move(names)),
      params_(std::move(params)),
      pg_(std::move(pg)),
      options_(options),
      world_size_(static_cast<double>(pg_->getSize())) {
  TORCH_CHECK(names_.size() == params_.size(), "Reducer: ", names_.size(), " names for ",
              params_.size(), " parameters");
  TORCH_CHECK(!params_.empty(), "Reducer: no parameters require a gradient");
  for (size_t i = 0; i < params_.size(); ++i) {
    TORCH_CHECK(params_[i].requires_grad() && params_[i].is_leaf(), "Reducer: parameter '",
                names_[i], "' is not a leaf tensor that requires grad");
  }
  if (options_.comm_dtype) {
    TORCH_CHECK(*options_.comm_dtype == at::kBFloat16 || *options_.comm_dtype == at::kHalf,
                "Reducer: comm_dtype must be bfloat16 or float16");
  }
  std::vector<size_t> order(params_.size());
  if (options_.initial_order.empty()) {
    for (size_t i = 0; i < params_.size(); ++i) order[i] = params_.size() - 1 - i;
  } else {
    std::vector<bool> seen(params_.size(), false);
    TORCH_CHECK_VALUE(options_.initial_order.size() == params_.size(),
                      "Reducer: initial_order has ", options_.initial_order.size(), " entries for ",
                      params_.size(), " parameters");
    for (size_t i : options_.initial_order) {
      TORCH_CHECK_VALUE(i < params_.size() && !seen[i],
                        "Reducer: initial_order is not a permutation of the parameters");
      seen[i] = true;
    }
    order = options_.initial_order;
    agreed_order_ = order;
    rebuilt_ = true;
  }
  InstallBuckets(
      ComputeBuckets(params_, order, options_.first_bucket_bytes, options_.bucket_bytes));
  for (size_t i = 0; i < params_.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(params_[i]);
    TORCH_CHECK(acc != nullptr, "Reducer: no grad accumulator for '", names_[i], "'");
    hook_keys_.push_back(
        acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, i](const torch::autograd::variable_list& outputs,
                      const torch::autograd::variable_list& /*inputs*/) {
              OnGradReady(i);
              return outputs;
            })));
    grad_accumulators_.push_back(std::move(acc));
  }
}

Reducer::~Reducer() {
  for (size_t i = 0; i < grad_accumulators_.size(); ++i) {
    grad_accumulators_[i]->del_post_hook(hook_keys_[i]);
  }
}

std::vector<std::vector<size_t>> Reducer::ComputeBuckets(const std::vector<at::Tensor>& params,
                                                         const std::vector<size_t>& order,
                                                         int64_t first_bucket_bytes,
                                                         int64_t bucket_bytes) {
  using Key = std::tuple<int, int, int>;  // dtype, device type, device index
  struct Open {
    std::vector<size_t> indices;
    int64_t bytes = 0;
    int closed = 0;
  };
  std::map<Key, Open> open;
  std::vector<std::vector<size_t>> buckets;
  for (size_t i : order) {
    const at::Tensor& p = params[i];
    Open& o = open[Key(static_cast<int>(p.scalar_type()), static_cast<int>(p.device().type()),
                       p.device().index())];
    o.indices.push_back(i);
    o.bytes += p.numel() * static_cast<int64_t>(p.element_size());
    const int64_t limit = o.closed == 0 ? first_bucket_bytes : bucket_bytes;
    if (bucket_bytes < 0 || (limit > 0 && o.bytes >= limit)) {
      buckets.push_back(std::move(o.indices));
      o.indices.clear();
      o.bytes = 0;
      ++o.closed;
    }
  }
  for (auto& [key, o] : open) {
    if (!o.indices.empty()) buckets.push_back(std::move(o.indices));
  }
  // Launch order: by where each bucket's first parameter sits in `order`.
  std::vector<size_t> position(params.size());
  for (size_t k = 0; k < order.size(); ++k) position[order[k]] = k;
  std::stable_sort(buckets.begin(), buckets.end(),
                   [&](const std::vector<size_t>& a, const std::vector<size_t>& b) {
                     return position[a.front()] < position[b.front()];
                   });
  return buckets;
}

void Reducer::InstallBuckets(const std::vector<std::vector<size_t>>& assignment) {
  at::NoGradGuard no_grad;
  std::vector<Bucket> buckets(assignment.size());
  std::vector<Slot> slots(params_.size());
  size_t assigned = 0;
  for (size_t b = 0; b < assignment.size(); ++b) {
    int64_t total = 0;
    for (size_t i : assignment[b]) total += params_[i].numel();
    buckets[b].flat = at::zeros({total}, params_[assignment[b].front()].options());
    buckets[b].params = assignment[b];
    int64_t offset = 0;
    for (size_t i : assignment[b]) {
      const at::Tensor& p = params_[i];
      Slot& slot = slots[i];
      slot.bucket = b;
      // Same strides as the parameter (e.g. channels-last) so AccumulateGrad adds in place.
      slot.view = p.is_non_overlapping_and_dense()
                      ? buckets[b].flat.as_strided(p.sizes(), p.strides(), offset)
                      : buckets[b].flat.narrow(0, offset, p.numel()).view(p.sizes());
      offset += p.numel();
      at::Tensor& grad = params_[i].mutable_grad();
      if (grad.defined()) {
        slot.view.copy_(grad);
        grad = slot.view;
      }
      ++assigned;
    }
  }
  TORCH_CHECK(assigned == params_.size(), "Reducer: bucket assignment covers ", assigned, " of ",
              params_.size(), " parameters");
  buckets_ = std::move(buckets);
  slots_ = std::move(slots);
  ResetIterationLocked();
}

void Reducer::ResetIterationLocked() {
  for (auto& b : buckets_) {
    b.pending = b.params.size();
    b.launched = false;
    b.work.reset();
    b.comm = at::Tensor();
  }
  for (auto& s : slots_) s.ready = false;
  next_bucket_ = 0;
  in_backward_ = false;
  backward_start_marked_ = false;
  ready_order_.clear();
  current_ = StepTimings();
}

void Reducer::set_sync_enabled(bool enabled) {
  std::lock_guard<std::mutex> lock(mu_);
  sync_enabled_ = enabled;
}

bool Reducer::sync_enabled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sync_enabled_;
}

void Reducer::MarkBackwardStart() {
  std::lock_guard<std::mutex> lock(mu_);
  backward_start_ = Clock::now();
  backward_start_marked_ = true;
}

void Reducer::ZeroGrad() {
  // set_to_none, as PyTorch's default: AccumulateGrad then hands over the fresh gradient and the
  // hook divides it while copying it into the bucket (one pass). Zeroing the buckets in place
  // instead costs two extra passes per step (the zeroing, and AccumulateGrad's in-place add).
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& p : params_) p.mutable_grad().reset();
}

StepTimings Reducer::last_timings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_;
}

std::vector<size_t> Reducer::agreed_order() const {
  std::lock_guard<std::mutex> lock(mu_);
  return agreed_order_;
}

std::vector<std::vector<size_t>> Reducer::bucket_assignment() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::vector<size_t>> out;
  for (const auto& b : buckets_) out.push_back(b.params);
  return out;
}

double Reducer::MsSince(Clock::time_point t) const {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

void Reducer::OnGradReady(size_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!sync_enabled_) return;  // no_sync: gradients just accumulate locally
  if (!in_backward_) {
    in_backward_ = true;
    if (!backward_start_marked_) backward_start_ = Clock::now();
    torch::autograd::Engine::get_default_engine().queue_callback([this] { Finalize(); });
  }
  TORCH_CHECK(!slots_[index].ready, "DDP: parameter '", names_[index],
              "' received its gradient twice in one backward (reentrant backward or a second "
              "backward without finishing the first are not supported)");
  MarkReadyLocked(index);
  last_ready_ = Clock::now();
  LaunchReadyBucketsLocked();
}

void Reducer::MarkReadyLocked(size_t index) {
  at::NoGradGuard no_grad;
  Slot& slot = slots_[index];
  slot.ready = true;
  ready_order_.push_back(index);
  at::Tensor& grad = params_[index].mutable_grad();
  if (!grad.defined()) {
    slot.view.zero_();  // find_unused: a parameter without gradient contributes zeros
    grad = slot.view;
  } else if (grad.is_alias_of(slot.view)) {
    slot.view.mul_(1.0 / world_size_);
  } else {
    at::mul_out(slot.view, grad, 1.0 / world_size_);  // divide while copying in
    grad = slot.view;
  }
  --buckets_[slot.bucket].pending;
}

void Reducer::LaunchReadyBucketsLocked() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    Bucket& b = buckets_[next_bucket_];
    b.comm = options_.comm_dtype ? b.flat.to(*options_.comm_dtype) : b.flat;
    std::vector<at::Tensor> tensors = {b.comm};
    b.launched_at = Clock::now();
    b.work = pg_->allreduce(tensors);
    b.launched = true;
    if (current_.allreduce_calls == 0) first_launch_ = Clock::now();
    current_.bucket_launch_ms.push_back(MsSince(backward_start_));
    ++current_.allreduce_calls;
    ++next_bucket_;
  }
}

void Reducer::Finalize() {
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::time_point backward_end = Clock::now();
  try {
    std::vector<size_t> missing;
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (!slots_[i].ready) missing.push_back(i);
    }
    if (!missing.empty()) {
      if (!options_.find_unused_parameters) {
        std::ostringstream msg;
        msg << "DDP: " << missing.size() << " parameter(s) received no gradient in this backward: ";
        for (size_t k = 0; k < missing.size() && k < 10; ++k) {
          msg << (k ? ", " : "") << "'" << names_[missing[k]] << "'";
        }
        if (missing.size() > 10) msg << ", ...";
        msg << ". Every parameter must take part in computing the loss, or enable "
               "find_unused_parameters";
        TORCH_CHECK_VALUE(false, msg.str());
      }
      for (size_t i : missing) MarkReadyLocked(i);
      LaunchReadyBucketsLocked();
    }
    TORCH_CHECK(next_bucket_ == buckets_.size(), "DDP: internal error: ", next_bucket_, " of ",
                buckets_.size(), " buckets launched at the end of backward");
    for (auto& b : buckets_) {
      WaitForWork(*b.work, *pg_, b.launched_at, "DDP: gradient allreduce");
      if (options_.comm_dtype) b.flat.copy_(b.comm);
    }
  } catch (...) {
    ResetIterationLocked();
    throw;
  }
  const auto done = Clock::now();
  StepTimings t = std::move(current_);
  t.synchronized = true;
  t.buckets = static_cast<int64_t>(buckets_.size());
  t.backward_ms = std::chrono::duration<double, std::milli>(backward_end - backward_start_).count();
  t.comm_wait_ms = std::chrono::duration<double, std::milli>(done - backward_end).count();
  t.allreduce_span_ms = std::chrono::duration<double, std::milli>(done - first_launch_).count();
  t.overlap_share =
      t.allreduce_span_ms > 0 ? std::max(0.0, 1.0 - t.comm_wait_ms / t.allreduce_span_ms) : 0.0;
  t.last_grad_ready_ms =
      std::chrono::duration<double, std::milli>(last_ready_ - backward_start_).count();
  last_ = std::move(t);
  if (options_.rebuild_buckets && !rebuilt_) RebuildBucketsLocked();
  ResetIterationLocked();
}

void Reducer::RebuildBucketsLocked() {
  rebuilt_ = true;
  // Rank 0's gradient-ready order decides, so every rank builds the same buckets.
  auto order = at::tensor(std::vector<int64_t>(ready_order_.begin(), ready_order_.end()),
                          at::TensorOptions().dtype(at::kLong))
                   .to(params_.front().device());
  TORCH_CHECK(order.numel() == static_cast<int64_t>(params_.size()),
              "DDP: internal error: incomplete gradient-ready order");
  std::vector<at::Tensor> tensors = {order};
  c10d::BroadcastOptions opts;
  opts.rootRank = 0;
  const auto issued = Clock::now();
  WaitForWork(*pg_->broadcast(tensors, opts), *pg_, issued, "DDP: agreeing on the buckets");
  auto cpu = order.cpu();
  std::vector<size_t> agreed(params_.size());
  for (size_t k = 0; k < agreed.size(); ++k) {
    agreed[k] = static_cast<size_t>(cpu[static_cast<int64_t>(k)].item<int64_t>());
  }
  InstallBuckets(
      ComputeBuckets(params_, agreed, options_.first_bucket_bytes, options_.bucket_bytes));
  agreed_order_ = std::move(agreed);
}

}  // namespace ddp
