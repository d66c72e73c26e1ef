// A worker's model stage: the model on its device and the SGD optimizer over its parameters.
// This is the state that stays in place while the process group and the DDP engine around it
// are torn down and rebuilt (communication_stage.h); a checkpoint or a peer (state_sync.h) can
// overwrite it.
//
// Thread safety: owned by the training thread.
#ifndef SLURM_DDP_TRAINER_WORKER_MODEL_STAGE_H_
#define SLURM_DDP_TRAINER_WORKER_MODEL_STAGE_H_

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/data/dataset.h"
#include "trainer/ddp/ddp.h"
#include "trainer/models/model.h"
#include "trainer/models/optimizer.h"

namespace ddp {

class ModelStage {
 public:
  // --model PATH, or --arch sized for `train`'s samples and classes; moved to `device` (and to
  // channels-last with --channels-last); SGD with the config's momentum, weight decay and
  // Nesterov flag. INVALID_ARGUMENT-style errors name the flag's value.
  // What the stage is built with (the flags of the same names).
  struct Options {
    std::string model_path;      // --model: a TorchScript module, instead of `arch`
    std::string arch = "cnn";    // --arch
    bool fused_bn_relu = false;  // --fused-bn-relu (CUDA devices only)
    bool channels_last = false;  // --channels-last
    SgdOptions sgd;              // --momentum, --weight-decay, --nesterov
  };

  static absl::StatusOr<ModelStage> Create(const Options& options, const data::Dataset& train,
                                           at::Device device);
  // A model built elsewhere; moved to `device`, and its 4-D weights to channels-last when asked
  // (as model.to(memory_format=torch.channels_last)).
  ModelStage(std::unique_ptr<models::Model> model, at::Device device, SgdOptions sgd,
             bool channels_last = false);

  ModelStage(ModelStage&&) = default;
  ModelStage& operator=(ModelStage&&) = default;

  models::Model& model() { return *model_; }
  const models::Model& model() const { return *model_; }
  Sgd& optimizer() { return sgd_; }
  const Sgd& optimizer() const { return sgd_; }
  at::Device device() const { return device_; }
  bool channels_last() const { return channels_last_; }
  // Parameters and buffers, as the DDP engine and state sync take them.
  ModuleTensors tensors() const;

  // Copies a saved state_dict into the model (every model entry must be present, same shape) and
  // the saved momentum buffers into the optimizer (when it uses momentum). DATA_LOSS names the
  // missing or mis-shaped entry.
  absl::Status Load(const std::vector<NamedTensor>& state_dict,
                    const std::vector<NamedTensor>& momentum);

 private:
  std::unique_ptr<models::Model> model_;
  at::Device device_;
  bool channels_last_;
  Sgd sgd_;
};

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_WORKER_MODEL_STAGE_H_
