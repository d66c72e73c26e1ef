// DDP_HOST_DEVICE marks a function that nvcc compiles for both the host and the device, so that a
// CPU unit test checks the exact arithmetic a CUDA kernel runs (trainer/data/crop_resize.h,
// trainer/models/bn_relu_math.h). Without nvcc it expands to nothing.
#ifndef SLURM_DDP_COMMON_HOST_DEVICE_H_
#define SLURM_DDP_COMMON_HOST_DEVICE_H_

#ifdef __CUDACC__
#define DDP_HOST_DEVICE __host__ __device__
#else
#define DDP_HOST_DEVICE
#endif

#endif  // SLURM_DDP_COMMON_HOST_DEVICE_H_
