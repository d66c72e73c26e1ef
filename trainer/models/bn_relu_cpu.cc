// The fused BatchNorm+ReLU op on the CPU (bn_relu_math.h's CpuForward/CpuBackward): the
// kernels' arithmetic in the kernels' order for a grid plan, so that the emulated kernels must
// equal it bitwise and the CPU tests check every formula the GPU runs. Single-threaded; for
// tests (CPU training keeps ATen's ops).
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "trainer/models/bn_relu_math.h"

namespace ddp::models::bn_relu {
namespace {

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

Slab SlabOf(const GridPlan& p, int64_t rows, int s) {
  const int64_t begin = s * p.slab_rows;
  return {begin, std::min(rows, begin + p.slab_rows)};
}

template <typename T>
void CpuForwardAs(const ForwardArgs& a, const GridPlan& p) {
  const int C = a.channels;
  std::vector<Welford> part(static_cast<size_t>(p.slabs) * C);
  for (int s = 0; s < p.slabs; ++s) {
    const Slab slab = SlabOf(p, a.rows, s);
    for (int c = 0; c < C; ++c) {
      Welford acc;
      for (int lane = 0; lane < p.ty; ++lane) {
        Welford w;
        for (int64_t r = slab.begin + lane; r < slab.end; r += p.ty) {
          w.count += 1.0f;
          WelfordAdd(w.mean, w.m2, At<T>(a.x, r * C + c), 1.0f / w.count);
        }
        acc = lane == 0 ? w : WelfordMerge(acc, w);
      }
      part[static_cast<size_t>(s) * C + c] = acc;
    }
  }
  for (int c = 0; c < C; ++c) {
    Welford acc;
    for (int lane = 0; lane < p.ty; ++lane) {
      Welford w;
      for (int s = lane; s < p.slabs; s += p.ty) {
        w = WelfordMerge(w, part[static_cast<size_t>(s) * C + c]);
      }
      acc = lane == 0 ? w : WelfordMerge(acc, w);
    }
    StoreChannel(a.saved, C, c, FinalizeForward(acc, a.weight[c], a.bias[c], a.eps));
    if (a.running_mean != nullptr) {
      UpdateRunning(acc, a.momentum, a.running_mean[c], a.running_var[c]);
    }
  }
  for (int64_t r = 0; r < a.rows; ++r) {
    for (int c = 0; c < C; ++c) {
      const int64_t i = r * C + c;
      const float res = a.residual != nullptr ? At<T>(a.residual, i) : 0.0f;
      Put<T>(a.y, i, Relu(PreActivation(At<T>(a.x, i), LoadChannel(a.saved, C, c), res)));
    }
  }
}

template <typename T>
float CpuMaskedGrad(const BackwardArgs& a, int64_t i, int c) {
  const int C = a.channels;
  const float mask = a.dresidual != nullptr
                         ? At<T>(a.y, i)
                         : PreActivation(At<T>(a.x, i), LoadChannel(a.saved, C, c), 0.0f);
  return MaskedGrad(At<T>(a.dy, i), mask);
}

template <typename T>
void CpuBackwardAs(const BackwardArgs& a, const GridPlan& p) {
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
  std::vector<ChannelBackward> k(static_cast<size_t>(C));
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
    k[static_cast<size_t>(c)] =
        FinalizeBackward(acc_g, acc_gc, static_cast<float>(a.rows), a.saved[C + c], a.weight[c]);
    a.dweight[c] = k[static_cast<size_t>(c)].dweight;
    a.dbias[c] = k[static_cast<size_t>(c)].dbias;
  }
  for (int64_t r = 0; r < a.rows; ++r) {
    for (int c = 0; c < C; ++c) {
      const int64_t i = r * C + c;
      const float g = CpuMaskedGrad<T>(a, i, c);
      Put<T>(a.dx, i, InputGrad(g, At<T>(a.x, i), a.saved[c], k[static_cast<size_t>(c)]));
      if (a.dresidual != nullptr) Put<T>(a.dresidual, i, g);
    }
  }
}

}  // namespace

void CpuForward(const ForwardArgs& args, const GridPlan& plan) {
  switch (args.type) {
    case ElementType::kFloat:
      return CpuForwardAs<float>(args, plan);
    case ElementType::kHalf:
      return CpuForwardAs<c10::Half>(args, plan);
    case ElementType::kBFloat16:
      return CpuForwardAs<c10::BFloat16>(args, plan);
  }
}

void CpuBackward(const BackwardArgs& args, const GridPlan& plan) {
  switch (args.type) {
    case ElementType::kFloat:
      return CpuBackwardAs<float>(args, plan);
    case ElementType::kHalf:
      return CpuBackwardAs<c10::Half>(args, plan);
    case ElementType::kBFloat16:
      return CpuBackwardAs<c10::BFloat16>(args, plan);
  }
}

}  // namespace ddp::models::bn_relu
