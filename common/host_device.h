// DDP_HOST_DEVICE marks a function that nvcc compiles for both the host and the device, so that a
// CPU unit test checks the exact arithmetic a CUDA kernel runs (trainer/data/crop_resize.h,
// trainer/models/bn_relu_math.h). Without nvcc it expands to nothing. DDP_UNROLL is nvcc's
// `#pragma unroll`, which other compilers would warn about (kernel code compiled as C++ in tests).
#ifndef SLURM_DDP_COMMON_HOST_DEVICE_H_
#define SLURM_DDP_COMMON_HOST_DEVICE_H_

#ifdef __CUDACC__
#define DDP_HOST_DEVICE __host__ __device__
#define DDP_UNROLL _Pragma("unroll")
#else
#define DDP_HOST_DEVICE
#define DDP_UNROLL
#endif

#endif  // SLURM_DDP_COMMON_HOST_DEVICE_H_
