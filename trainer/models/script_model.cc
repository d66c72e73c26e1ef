#include "trainer/models/script_model.h"

#include <sys/stat.h>
#include <torch/csrc/jit/serialization/import.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ddp::models {
namespace {

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

absl::StatusOr<std::unique_ptr<ScriptModel>> ScriptModel::Load(const std::string& path) {
  // POSIX stat rather than std::filesystem (see trainer/data/image_files.h for why).
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  torch::jit::Module module;
  try {
    module = torch::jit::load(path, c10::Device(c10::kCPU));
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a TorchScript module (save one with torch.jit.save): ",
                     FirstLine(e.what_without_backtrace())));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a TorchScript module (save one with torch.jit.save): ", FirstLine(e.what())));
  }
  if (!module.find_method("forward").has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": TorchScript module has no forward"));
  }
  return std::unique_ptr<ScriptModel>(new ScriptModel(std::move(module), path));
}

ScriptModel::ScriptModel(torch::jit::Module module, std::string path)
    : module_(std::move(module)), path_(std::move(path)) {}

at::Tensor ScriptModel::forward(const at::Tensor& input) {
  return module_.forward({input}).toTensor();
}

std::vector<at::Tensor> ScriptModel::parameters() const {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : module_.parameters(/*recurse=*/true)) out.push_back(p);
  return out;
}

std::vector<NamedTensor> ScriptModel::named_parameters() const {
  std::vector<NamedTensor> out;
  for (const auto& p : module_.named_parameters(/*recurse=*/true)) out.push_back({p.name, p.value});
  return out;
}

std::vector<NamedTensor> ScriptModel::named_buffers() const {
  std::vector<NamedTensor> out;
  for (const auto& b : module_.named_buffers(/*recurse=*/true)) out.push_back({b.name, b.value});
  return out;
}

std::vector<NamedTensor> ScriptModel::state_dict() const {
  std::vector<NamedTensor> out;
  for (const auto& m : module_.named_modules()) {
    const std::string prefix = m.name.empty() ? "" : m.name + ".";
    for (const auto& p : m.value.named_parameters(/*recurse=*/false)) {
      out.push_back({prefix + p.name, p.value});
    }
    for (const auto& b : m.value.named_buffers(/*recurse=*/false)) {
      out.push_back({prefix + b.name, b.value});
    }
  }
  return out;
}

void ScriptModel::train(bool on) { module_.train(on); }

bool ScriptModel::is_training() const { return module_.is_training(); }

void ScriptModel::to(const c10::Device& device) { module_.to(device); }

}  // namespace ddp::models
