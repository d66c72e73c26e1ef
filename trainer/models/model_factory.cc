#include "trainer/models/model_factory.h"

#include <exception>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "trainer/models/module_model.h"
#include "trainer/models/resnet.h"
#include "trainer/models/script_model.h"
#include "trainer/models/simple_nets.h"

namespace ddp::models {

const std::vector<std::string>& ModelArchs() {
  static const auto* const kArchs =
      new std::vector<std::string>{"mlp", "cnn", "resnet18", "resnet34", "resnet50"};
  return *kArchs;
}

absl::StatusOr<std::unique_ptr<Model>> CreateModel(const std::string& arch, int64_t num_classes,
                                                   const InputShape& input,
                                                   const ModelOptions& model_options) {
  if (num_classes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--arch ", arch, ": number of classes must be >= 1, got ", num_classes));
  }
  if (input.channels < 1 || input.height < 1 || input.width < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--arch ", arch, ": bad input shape ",
                                                   input.channels, "x", input.height, "x",
                                                   input.width));
  }
  const bool fused = model_options.fused_bn_relu && arch.rfind("resnet", 0) == 0;
  const std::string description =
      absl::StrCat(arch, " (", num_classes, " classes, input ", input.channels, "x", input.height,
                   "x", input.width, fused ? ", fused BatchNorm+ReLU" : "", ")");
  std::shared_ptr<ForwardModule> module;
  try {
    if (arch == "mlp") {
      module = MakeMlp(input.channels, input.height, input.width, num_classes);
    } else if (arch == "cnn") {
      if (input.height < 4 || input.width < 4) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--arch cnn needs images of at least 4x4, got ", input.height, "x", input.width));
      }
      module = MakeCnn(input.channels, input.height, input.width, num_classes);
    } else if (arch == "resnet18" || arch == "resnet34" || arch == "resnet50") {
      ResNetOptions options = arch == "resnet18"   ? ResNet18Options()
                              : arch == "resnet34" ? ResNet34Options()
                                                   : ResNet50Options();
      options.num_classes = num_classes;
      options.in_channels = input.channels;
      options.fused_bn_relu = model_options.fused_bn_relu;
      module = MakeResNet(options);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown --arch '", arch, "'; valid: ", absl::StrJoin(ModelArchs(), ", "),
                       " (or --model PATH for TorchScript)"));
    }
  } catch (const std::exception& e) {
    const std::string what = e.what();
    return absl::InternalError(
        absl::StrCat("building ", arch, ": ", what.substr(0, what.find('\n'))));
  }
  return std::unique_ptr<Model>(std::make_unique<ModuleModel>(std::move(module), description));
}

absl::StatusOr<std::unique_ptr<Model>> LoadScriptModel(const std::string& path) {
  absl::StatusOr<std::unique_ptr<ScriptModel>> model = ScriptModel::Load(path);
  if (!model.ok()) return model.status();
  return std::unique_ptr<Model>(*std::move(model));
}

}  // namespace ddp::models
