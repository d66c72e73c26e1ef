#include "trainer/worker/model_stage.h"

#include <c10/core/GradMode.h>

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "trainer/models/model_factory.h"

namespace ddp {
namespace {

absl::StatusOr<std::unique_ptr<models::Model>> BuildModel(const ModelStage::Options& o,
                                                          const data::Dataset& train,
                                                          at::Device device) {
  if (!o.model_path.empty()) return models::LoadScriptModel(o.model_path);
  const std::vector<int64_t> shape = train.sample_shape();
  models::InputShape input;
  if (shape.size() == 3) input = {shape[0], shape[1], shape[2]};
  if (o.fused_bn_relu && !device.is_cuda()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--fused-bn-relu runs on CUDA tensors; this worker's device is ", device.str()));
  }
  models::ModelOptions options;
  options.fused_bn_relu = o.fused_bn_relu;
  return models::CreateModel(o.arch, train.num_classes(), input, options);
}

// Before anything fetches the parameters: the device, then the memory format.
std::unique_ptr<models::Model> Placed(std::unique_ptr<models::Model> model, at::Device device,
                                      bool channels_last) {
  model->to(device);
  if (!channels_last) return model;
  c10::NoGradGuard no_grad;
  for (const auto& list : {model->named_parameters(), model->named_buffers()}) {
    for (const auto& t : list) {
      if (t.tensor.dim() == 4) {
        at::Tensor handle = t.tensor;
        handle.set_data(handle.data().contiguous(at::MemoryFormat::ChannelsLast));
      }
    }
  }
  return model;
}

}  // namespace

absl::StatusOr<ModelStage> ModelStage::Create(const Options& o, const data::Dataset& train,
                                              at::Device device) {
  ASSIGN_OR_RETURN(std::unique_ptr<models::Model> model, BuildModel(o, train, device));
  return ModelStage(std::move(model), device, o.sgd, o.channels_last);
}

ModelStage::ModelStage(std::unique_ptr<models::Model> model, at::Device device, SgdOptions sgd,
                       bool channels_last)
    : model_(Placed(std::move(model), device, channels_last)),
      device_(device),
      channels_last_(channels_last),
      sgd_(model_->named_parameters(), sgd) {}

ModuleTensors ModelStage::tensors() const {
  return {model_->named_parameters(), model_->named_buffers()};
}

absl::Status ModelStage::Load(const std::vector<NamedTensor>& state_dict,
                              const std::vector<NamedTensor>& momentum) {
  std::map<std::string, at::Tensor> saved;
  for (const auto& t : state_dict) saved[t.name] = t.tensor;
  c10::NoGradGuard no_grad;
  for (const auto& t : model_->state_dict()) {
    auto it = saved.find(t.name);
    if (it == saved.end()) {
      return absl::DataLossError(absl::StrCat("checkpoint lacks model entry ", t.name));
    }
    if (!it->second.sizes().equals(t.tensor.sizes())) {
      return absl::DataLossError(absl::StrCat("checkpoint entry ", t.name, " has shape ",
                                              c10::str(it->second.sizes()), ", model has ",
                                              c10::str(t.tensor.sizes())));
    }
    t.tensor.copy_(it->second);
  }
  if (sgd_.options().momentum == 0) return absl::OkStatus();
  const std::string err = sgd_.LoadMomentumBuffers(momentum);
  if (!err.empty()) return absl::DataLossError(err);
  return absl::OkStatus();
}

}  // namespace ddp
