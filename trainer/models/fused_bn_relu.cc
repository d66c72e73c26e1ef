#include "trainer/models/fused_bn_relu.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/autograd.h>

#include <cstdint>
#include <string>

#include "trainer/models/bn_relu_math.h"

#ifdef DDP_WITH_MODEL_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ddp::models {
namespace {

namespace br = bn_relu;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The CPU plan: a few slabs, so the tests go through every merge the kernels make.
constexpr int kCpuTargetBlocks = 8;

br::ElementType TypeOf(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kHalf:
      return br::ElementType::kHalf;
    case at::kBFloat16:
      return br::ElementType::kBFloat16;
    default:
      return br::ElementType::kFloat;
  }
}

br::GridPlan PlanFor(const at::Tensor& x) {
  const int64_t rows = x.numel() / x.size(1);
  int target = kCpuTargetBlocks;
#ifdef DDP_WITH_MODEL_KERNELS
  if (x.is_cuda()) target = br::CudaTargetBlocks();
#endif
  return br::PlanGrid(rows, static_cast<int>(x.size(1)), static_cast<int>(x.element_size()),
                      target);
}

// The kernels load and store 16-byte vectors.
bool Aligned(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

// Runs `args` on x's device: the CPU implementation, or the kernels on the current stream with a
// workspace of `workspace_bytes`.
template <typename Args>
void Run(const at::Tensor& x, Args& args, const br::GridPlan& plan, int64_t workspace_bytes,
         void (*on_cpu)(const Args&, const br::GridPlan&),
         int (*on_cuda)(const Args&, const br::GridPlan&, void*), const char* what) {
  if (x.is_cpu()) {
    on_cpu(args, plan);
    return;
  }
#ifdef DDP_WITH_MODEL_KERNELS
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor workspace = at::empty({workspace_bytes / 4}, x.options().dtype(at::kFloat));
  args.workspace = workspace.data_ptr();
  const int err = on_cuda(args, plan, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == 0, "fused BatchNorm+ReLU ", what, ": CUDA error ", err);
#else
  (void)workspace_bytes;
  (void)on_cuda;
  TORCH_CHECK(false, "fused BatchNorm+ReLU ", what, ": this build has no CUDA kernels");
#endif
}

// The forward and backward of both autograd functions below (residual undefined: none).
at::Tensor ForwardImpl(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                       const at::Tensor& bias, const at::Tensor& residual,
                       const at::Tensor& running_mean, const at::Tensor& running_var,
                       double momentum, double eps) {
  const int64_t channels = x.size(1);
  at::Tensor y = at::empty_like(x, at::MemoryFormat::ChannelsLast);
  at::Tensor saved = at::empty({4, channels}, x.options().dtype(at::kFloat));
  br::ForwardArgs args;
  args.type = TypeOf(x);
  args.x = x.data_ptr();
  args.residual = residual.defined() ? residual.data_ptr() : nullptr;
  args.y = y.data_ptr();
  args.rows = x.numel() / channels;
  args.channels = static_cast<int>(channels);
  args.weight = weight.data_ptr<float>();
  args.bias = bias.data_ptr<float>();
  args.running_mean = running_mean.data_ptr<float>();
  args.running_var = running_var.data_ptr<float>();
  args.saved = saved.data_ptr<float>();
  args.eps = static_cast<float>(eps);
  args.momentum = static_cast<float>(momentum);
  const br::GridPlan plan = PlanFor(x);
  Run(x, args, plan, br::ForwardWorkspaceBytes(plan, args.channels), &br::CpuForward,
      &br::LaunchBnReluForward, "forward");
  // With a residual the ReLU's mask is read from y (z needs the residual); without, it is
  // recomputed from x.
  if (residual.defined()) {
    ctx->save_for_backward({x, weight, saved, y});
  } else {
    ctx->save_for_backward({x, weight, saved});
  }
  return y;
}

// {dx, dweight, dbias, dresidual (undefined without a residual)}.
variable_list BackwardImpl(AutogradContext* ctx, const at::Tensor& grad) {
  const variable_list s = ctx->get_saved_variables();
  const at::Tensor& x = s[0];
  const at::Tensor& weight = s[1];
  const at::Tensor& saved = s[2];
  const bool with_residual = s.size() > 3;
  at::Tensor dy = grad.to(x.scalar_type()).contiguous(at::MemoryFormat::ChannelsLast);
  if (!Aligned(dy)) dy = dy.clone(at::MemoryFormat::ChannelsLast);
  at::Tensor dx = at::empty_like(x, at::MemoryFormat::ChannelsLast);
  at::Tensor dresidual =
      with_residual ? at::empty_like(x, at::MemoryFormat::ChannelsLast) : at::Tensor();
  at::Tensor dweight = at::empty_like(weight);
  at::Tensor dbias = at::empty_like(weight);
  br::BackwardArgs args;
  args.type = TypeOf(x);
  args.dy = dy.data_ptr();
  args.x = x.data_ptr();
  args.y = with_residual ? s[3].data_ptr() : nullptr;
  args.dx = dx.data_ptr();
  args.dresidual = with_residual ? dresidual.data_ptr() : nullptr;
  args.rows = x.numel() / x.size(1);
  args.channels = static_cast<int>(x.size(1));
  args.weight = weight.data_ptr<float>();
  args.saved = saved.data_ptr<float>();
  args.dweight = dweight.data_ptr<float>();
  args.dbias = dbias.data_ptr<float>();
  const br::GridPlan plan = PlanFor(x);
  Run(x, args, plan, br::BackwardWorkspaceBytes(plan, args.channels), &br::CpuBackward,
      &br::LaunchBnReluBackward, "backward");
  return {dx, dweight, dbias, dresidual};
}

// relu(bn(x)). (Autograd functions take no undefined tensor inputs, hence two.)
class BnReluFunction : public torch::autograd::Function<BnReluFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, const at::Tensor& running_mean,
                            const at::Tensor& running_var, double momentum, double eps) {
    return ForwardImpl(ctx, x, weight, bias, at::Tensor(), running_mean, running_var, momentum,
                       eps);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list g = BackwardImpl(ctx, grads[0]);
    return {g[0], g[1], g[2], at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// relu(bn(x) + residual).
class BnAddReluFunction : public torch::autograd::Function<BnAddReluFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, const at::Tensor& residual,
                            const at::Tensor& running_mean, const at::Tensor& running_var,
                            double momentum, double eps) {
    return ForwardImpl(ctx, x, weight, bias, residual, running_mean, running_var, momentum, eps);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list g = BackwardImpl(ctx, grads[0]);
    return {g[0], g[1], g[2], g[3], at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

bool FloatVectorOn(const at::Tensor& t, const at::Tensor& x) {
  return t.defined() && t.scalar_type() == at::kFloat && t.dim() == 1 && t.size(0) == x.size(1) &&
         t.is_contiguous() && t.device() == x.device();
}

}  // namespace

bool FusedBatchNormReluHasCudaKernels() {
#ifdef DDP_WITH_MODEL_KERNELS
  return true;
#else
  return false;
#endif
}

std::string FusedBatchNormReluUnsupported(const at::Tensor& x, const at::Tensor& residual,
                                          const torch::nn::BatchNorm2dImpl& bn) {
  if (!bn.is_training()) return "eval mode";
  if (!bn.options.affine() || !bn.options.track_running_stats() ||
      !bn.options.momentum().has_value()) {
    return "BatchNorm without affine, running statistics or momentum";
  }
  if (!x.defined() || x.dim() != 4) return "input not 4-D";
  if (x.scalar_type() != at::kFloat && x.scalar_type() != at::kHalf &&
      x.scalar_type() != at::kBFloat16) {
    return "input type not float, half or bfloat16";
  }
  if (x.is_cuda() ? !FusedBatchNormReluHasCudaKernels() : !x.is_cpu()) {
    return "no kernels for this device";
  }
  if (!x.is_contiguous(at::MemoryFormat::ChannelsLast)) return "input not channels-last";
  if (!Aligned(x)) return "input not 16-byte aligned";
  const int64_t vec = 16 / static_cast<int64_t>(x.element_size());
  if (x.size(1) % vec != 0) return "channels not a multiple of the vector width";
  if (x.numel() == 0 || x.numel() / x.size(1) >= bn_relu::kMaxRows) return "input size";
  if (!FloatVectorOn(bn.weight, x) || !FloatVectorOn(bn.bias, x) ||
      !FloatVectorOn(bn.running_mean, x) || !FloatVectorOn(bn.running_var, x)) {
    return "parameters or statistics not float vectors on the input's device";
  }
  if (residual.defined() &&
      (residual.sizes() != x.sizes() || residual.scalar_type() != x.scalar_type() ||
       residual.device() != x.device() || !residual.is_contiguous(at::MemoryFormat::ChannelsLast) ||
       !Aligned(residual))) {
    return "residual not of the input's shape, type and layout";
  }
  return "";
}

at::Tensor FusedBatchNormRelu(const at::Tensor& x, torch::nn::BatchNorm2dImpl& bn,
                              const at::Tensor& residual) {
  if (bn.num_batches_tracked.defined()) bn.num_batches_tracked.add_(1);
  const double momentum = *bn.options.momentum();
  if (residual.defined()) {
    return BnAddReluFunction::apply(x, bn.weight, bn.bias, residual, bn.running_mean,
                                    bn.running_var, momentum, bn.options.eps());
  }
  return BnReluFunction::apply(x, bn.weight, bn.bias, bn.running_mean, bn.running_var, momentum,
                               bn.options.eps());
}

at::Tensor BatchNormRelu(const at::Tensor& x, torch::nn::BatchNorm2dImpl& bn,
                         const at::Tensor& residual, bool fused) {
  if (fused && FusedBatchNormReluUnsupported(x, residual, bn).empty()) {
    return FusedBatchNormRelu(x, bn, residual);
  }
  at::Tensor out = bn.forward(x);
  if (residual.defined()) out += residual;
  return out.relu_();
}

}  // namespace ddp::models
