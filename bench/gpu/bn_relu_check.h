// The GPU check of the fused BatchNorm+ReLU kernels (bn_relu_check.cc), run by
// `ddp_gpu_bench --variants check`.
#ifndef SLURM_DDP_BENCH_GPU_BN_RELU_CHECK_H_
#define SLURM_DDP_BENCH_GPU_BN_RELU_CHECK_H_

namespace ddp::bench {

// Prints CHECK lines; returns the number of failed cases (0 when the kernels are not compiled
// in: it says SKIP).
int RunBnReluCheck();

}  // namespace ddp::bench

#endif  // SLURM_DDP_BENCH_GPU_BN_RELU_CHECK_H_
