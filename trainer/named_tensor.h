// A tensor with its dotted name in a module ("layer1.0.conv1.weight"): the unit in which models
// expose parameters and buffers (models/model.h), the DDP engine takes them (dist/ddp.h), and the
// optimizer and checkpoints keep state. Header-only, shared by every data-plane library.
#ifndef SLURM_DDP_TRAINER_NAMED_TENSOR_H_
#define SLURM_DDP_TRAINER_NAMED_TENSOR_H_

#include <ATen/ATen.h>

#include <string>

namespace ddp {

struct NamedTensor {
  std::string name;
  at::Tensor tensor;
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_NAMED_TENSOR_H_
