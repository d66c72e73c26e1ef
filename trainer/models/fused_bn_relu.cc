#include "trainer/models/fused_bn_relu.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

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

// ---- the CPU implementation: the kernels' arithmetic in the kernels' order ----

template <typename T>
float At(const void* base, int64_t i) {
  return static_cast<float>(static_cast<const T*>(base)[i]);
}

template <typename T>
void Put(void* base, int64_t i, float v) {
  static_cast<T*>(base)[i] = static_cast<T>(v);
}

// Rows [begin, end) of a slab as the kernels' lanes see them: lane l takes begin + l, + ty, ...
struct Slab {
  int64_t begin;
  int64_t end;
};

Slab SlabOf(const br::GridPlan& p, int64_t rows, int s) {
  const int64_t begin = s * p.slab_rows;
  return {begin, std::min(rows, begin + p.slab_rows)};
}

template <typename T>
void CpuForwardAs(const br::ForwardArgs& a, const br::GridPlan& p) {
  const int C = a.channels;
  std::vector<br::Welford> part(static_cast<size_t>(p.slabs) * C);
  for (int s = 0; s < p.slabs; ++s) {
    const Slab slab = SlabOf(p, a.rows, s);
    for (int c = 0; c < C; ++c) {
      br::Welford acc;
      for (int lane = 0; lane < p.ty; ++lane) {
        br::Welford w;
        for (int64_t r = slab.begin + lane; r < slab.end; r += p.ty) {
          w.count += 1.0f;
          br::WelfordAdd(w.mean, w.m2, At<T>(a.x, r * C + c), 1.0f / w.count);
        }
        acc = lane == 0 ? w : br::WelfordMerge(acc, w);
      }
      part[static_cast<size_t>(s) * C + c] = acc;
    }
  }
  for (int c = 0; c < C; ++c) {
    br::Welford acc;
    for (int lane = 0; lane < p.ty; ++lane) {
      br::Welford w;
      for (int s = lane; s < p.slabs; s += p.ty) {
        w = br::WelfordMerge(w, part[static_cast<size_t>(s) * C + c]);
      }
      acc = lane == 0 ? w : br::WelfordMerge(acc, w);
    }
    br::StoreChannel(a.saved, C, c, br::FinalizeForward(acc, a.weight[c], a.bias[c], a.eps));
    if (a.running_mean != nullptr) {
      br::UpdateRunning(acc, a.momentum, a.running_mean[c], a.running_var[c]);
    }
  }
  for (int64_t r = 0; r < a.rows; ++r) {
    for (int c = 0; c < C; ++c) {
      const int64_t i = r * C + c;
      const float res = a.residual != nullptr ? At<T>(a.residual, i) : 0.0f;
      Put<T>(a.y, i,
             br::Relu(br::PreActivation(At<T>(a.x, i), br::LoadChannel(a.saved, C, c), res)));
    }
  }
}

template <typename T>
float CpuMaskedGrad(const br::BackwardArgs& a, int64_t i, int c) {
  const int C = a.channels;
  const float mask = a.dresidual != nullptr
                         ? At<T>(a.y, i)
                         : br::PreActivation(At<T>(a.x, i), br::LoadChannel(a.saved, C, c), 0.0f);
  return br::MaskedGrad(At<T>(a.dy, i), mask);
}

template <typename T>
void CpuBackwardAs(const br::BackwardArgs& a, const br::GridPlan& p) {
  const int C = a.channels;
  std::vector<float> part_g(static_cast<size_t>(p.slabs) * C);
  std::vector<float> part_gc(part_g.size());
  for (int s = 0; s < p.slabs; ++s) {
    const Slab slab = SlabOf(p, a.rows, s);
    for (int c = 0; c < C; ++c) {
      const float mean = a.saved[c];
      float acc_g = 0;
      float acc_gc = 0;
      for (int lane = 0; lane < p.ty; ++lane) {
        float sg = 0;
        float sgc = 0;
        for (int64_t r = slab.begin + lane; r < slab.end; r += p.ty) {
          const int64_t i = r * C + c;
          const float g = CpuMaskedGrad<T>(a, i, c);
          sg += g;
          sgc += g * (At<T>(a.x, i) - mean);
        }
        acc_g = lane == 0 ? sg : acc_g + sg;
        acc_gc = lane == 0 ? sgc : acc_gc + sgc;
      }
      part_g[static_cast<size_t>(s) * C + c] = acc_g;
      part_gc[static_cast<size_t>(s) * C + c] = acc_gc;
    }
  }
  std::vector<br::ChannelBackward> k(static_cast<size_t>(C));
  for (int c = 0; c < C; ++c) {
    double acc_g = 0;
    double acc_gc = 0;
    for (int lane = 0; lane < p.ty; ++lane) {
      double dg = 0;
      double dgc = 0;
      for (int s = lane; s < p.slabs; s += p.ty) {
        dg += part_g[static_cast<size_t>(s) * C + c];
        dgc += part_gc[static_cast<size_t>(s) * C + c];
      }
      acc_g = lane == 0 ? dg : acc_g + dg;
      acc_gc = lane == 0 ? dgc : acc_gc + dgc;
    }
    k[static_cast<size_t>(c)] = br::FinalizeBackward(acc_g, acc_gc, static_cast<float>(a.rows),
                                                     a.saved[C + c], a.weight[c]);
    a.dweight[c] = k[static_cast<size_t>(c)].dweight;
    a.dbias[c] = k[static_cast<size_t>(c)].dbias;
  }
  for (int64_t r = 0; r < a.rows; ++r) {
    for (int c = 0; c < C; ++c) {
      const int64_t i = r * C + c;
      const float g = CpuMaskedGrad<T>(a, i, c);
      Put<T>(a.dx, i, br::InputGrad(g, At<T>(a.x, i), a.saved[c], k[static_cast<size_t>(c)]));
      if (a.dresidual != nullptr) Put<T>(a.dresidual, i, g);
    }
  }
}

template <typename Args, typename Run>
void OnCpu(const Args& args, const br::GridPlan& plan, Run run) {
  switch (args.type) {
    case br::ElementType::kFloat:
      run(static_cast<float*>(nullptr), args, plan);
      break;
    case br::ElementType::kHalf:
      run(static_cast<c10::Half*>(nullptr), args, plan);
      break;
    case br::ElementType::kBFloat16:
      run(static_cast<c10::BFloat16*>(nullptr), args, plan);
      break;
  }
}

void RunForward(const at::Tensor& x, br::ForwardArgs& args, const br::GridPlan& plan) {
  if (x.is_cpu()) {
    br::CpuForward(args, plan);
    return;
  }
#ifdef DDP_WITH_MODEL_KERNELS
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor workspace = at::empty({br::ForwardWorkspaceBytes(plan, args.channels) / 4},
                                         x.options().dtype(at::kFloat));
  args.workspace = workspace.data_ptr();
  const int err = br::LaunchBnReluForward(args, plan, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == 0, "fused BatchNorm+ReLU forward: CUDA error ", err);
#else
  TORCH_CHECK(false, "fused BatchNorm+ReLU: this build has no CUDA kernels");
#endif
}

void RunBackward(const at::Tensor& x, br::BackwardArgs& args, const br::GridPlan& plan) {
  if (x.is_cpu()) {
    br::CpuBackward(args, plan);
    return;
  }
#ifdef DDP_WITH_MODEL_KERNELS
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor workspace = at::empty({br::BackwardWorkspaceBytes(plan, args.channels) / 4},
                                         x.options().dtype(at::kFloat));
  args.workspace = workspace.data_ptr();
  const int err = br::LaunchBnReluBackward(args, plan, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == 0, "fused BatchNorm+ReLU backward: CUDA error ", err);
#else
  TORCH_CHECK(false, "fused BatchNorm+ReLU: this build has no CUDA kernels");
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
  RunForward(x, args, PlanFor(x));
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
  RunBackward(x, args, PlanFor(x));
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

void bn_relu::CpuForward(const ForwardArgs& args, const GridPlan& plan) {
  OnCpu(args, plan, [](auto* tag, const ForwardArgs& a, const GridPlan& p) {
    CpuForwardAs<std::remove_pointer_t<decltype(tag)>>(a, p);
  });
}

void bn_relu::CpuBackward(const BackwardArgs& args, const GridPlan& plan) {
  OnCpu(args, plan, [](auto* tag, const BackwardArgs& a, const GridPlan& p) {
    CpuBackwardAs<std::remove_pointer_t<decltype(tag)>>(a, p);
  });
}

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
