#include "trainer/models/module_model.h"

#include <utility>

namespace ddp::models {
namespace {

std::vector<NamedTensor> ToNamed(const torch::OrderedDict<std::string, at::Tensor>& dict) {
  std::vector<NamedTensor> out;
  out.reserve(dict.size());
  for (const auto& item : dict) out.push_back({item.key(), item.value()});
  return out;
}

}  // namespace

ModuleModel::ModuleModel(std::shared_ptr<ForwardModule> module, std::string description)
    : module_(std::move(module)), description_(std::move(description)) {}

at::Tensor ModuleModel::forward(const at::Tensor& input) { return module_->forward(input); }

std::vector<at::Tensor> ModuleModel::parameters() const { return module_->parameters(); }

std::vector<NamedTensor> ModuleModel::named_parameters() const {
  return ToNamed(module_->named_parameters());
}

std::vector<NamedTensor> ModuleModel::named_buffers() const {
  return ToNamed(module_->named_buffers());
}

std::vector<NamedTensor> ModuleModel::state_dict() const {
  std::vector<NamedTensor> out;
  // named_modules() is pre-order with the root first under the empty name, like Python's.
  for (const auto& item : module_->named_modules()) {
    const std::string prefix = item.key().empty() ? "" : item.key() + ".";
    for (const auto& p : item.value()->named_parameters(/*recurse=*/false)) {
      out.push_back({prefix + p.key(), p.value()});
    }
    for (const auto& b : item.value()->named_buffers(/*recurse=*/false)) {
      out.push_back({prefix + b.key(), b.value()});
    }
  }
  return out;
}

void ModuleModel::train(bool on) { module_->train(on); }

bool ModuleModel::is_training() const { return module_->is_training(); }

void ModuleModel::to(const c10::Device& device) { module_->to(device); }

}  // namespace ddp::models
