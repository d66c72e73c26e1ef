#include <torch/torch.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/trainer/data/test_files.h"
#include "trainer/models/model_factory.h"

namespace ddp::models {
namespace {

int64_t CountParameters(const Model& model) {
  int64_t n = 0;
  for (const at::Tensor& p : model.parameters()) n += p.numel();
  return n;
}

std::unique_ptr<Model> Create(const std::string& arch, int64_t classes, InputShape input) {
  absl::StatusOr<std::unique_ptr<Model>> model = CreateModel(arch, classes, input);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

TEST(CreateModelTest, EveryArchForwardsToLogits) {
  torch::manual_seed(0);
  const InputShape shapes[] = {{1, 28, 28}, {3, 32, 32}};
  for (const std::string& arch : ModelArchs()) {
    for (const InputShape& shape : shapes) {
      SCOPED_TRACE(absl::StrCat(arch, " ", shape.channels, "x", shape.height));
      std::unique_ptr<Model> model = Create(arch, 10, shape);
      ASSERT_NE(model, nullptr);
      model->train(true);
      at::Tensor out = model->forward(torch::randn({4, shape.channels, shape.height, shape.width}));
      EXPECT_EQ(out.sizes(), (std::vector<int64_t>{4, 10}));
      out.sum().backward();
      for (const at::Tensor& p : model->parameters()) ASSERT_TRUE(p.grad().defined());
      model->eval();
      EXPECT_FALSE(model->is_training());
      torch::NoGradGuard no_grad;
      EXPECT_EQ(
          model->forward(torch::randn({1, shape.channels, shape.height, shape.width})).sizes(),
          (std::vector<int64_t>{1, 10}));
    }
  }
}

TEST(CreateModelTest, ResNet224ForwardShape) {
  std::unique_ptr<Model> model = Create("resnet18", 1000, {3, 224, 224});
  ASSERT_NE(model, nullptr);
  model->eval();
  torch::NoGradGuard no_grad;
  EXPECT_EQ(model->forward(torch::randn({2, 3, 224, 224})).sizes(),
            (std::vector<int64_t>{2, 1000}));
}

// tests/trainer/models/testdata/<arch>_state_dict.txt: torchvision's state_dict keys and shapes.
std::vector<std::pair<std::string, std::string>> Golden(const std::string& arch) {
  const char* source = std::getenv("DDP_SOURCE_DIR");
  const std::string path = std::string(source != nullptr ? source : ".") +
                           "/tests/trainer/models/testdata/" + arch + "_state_dict.txt";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<std::pair<std::string, std::string>> keys;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    keys.emplace_back(parts[0], parts[1]);
  }
  return keys;
}

std::string ShapeString(const at::Tensor& t) {
  if (t.dim() == 0) return "scalar";
  std::string s;
  for (int64_t d : t.sizes()) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

TEST(ResNetTest, MatchesTorchvisionStateDictAndParameterCount) {
  const std::pair<const char*, int64_t> expected[] = {
      {"resnet18", 11689512}, {"resnet34", 21797672}, {"resnet50", 25557032}};
  for (const auto& [arch, count] : expected) {
    SCOPED_TRACE(arch);
    std::unique_ptr<Model> model = Create(arch, 1000, {3, 224, 224});
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(CountParameters(*model), count);
    const std::vector<NamedTensor> state = model->state_dict();
    EXPECT_EQ(state.size(), model->named_parameters().size() + model->named_buffers().size());
    if (std::string(arch) == "resnet34") {
      EXPECT_EQ(state.size(), 218u);
      continue;
    }
    const auto golden = Golden(arch);
    ASSERT_EQ(state.size(), golden.size());
    for (size_t i = 0; i < golden.size(); ++i) {
      EXPECT_EQ(state[i].name, golden[i].first) << i;
      EXPECT_EQ(ShapeString(state[i].tensor), golden[i].second) << state[i].name;
    }
  }
  std::unique_ptr<Model> r18 = Create("resnet18", 1000, {3, 224, 224});
  const std::vector<NamedTensor> params = r18->named_parameters();
  ASSERT_EQ(params.size(), 62u);
  EXPECT_EQ(params[0].name, "conv1.weight");
  EXPECT_EQ(params[3].name, "layer1.0.conv1.weight");
  EXPECT_EQ(params.back().name, "fc.bias");
  EXPECT_EQ(r18->named_buffers().size(), 60u);
  EXPECT_EQ(r18->named_buffers()[0].name, "bn1.running_mean");
}

TEST(ResNetTest, InitializesLikeTorchvision) {
  torch::manual_seed(1);
  std::unique_ptr<Model> model = Create("resnet50", 1000, {3, 224, 224});
  for (const NamedTensor& p : model->named_parameters()) {
    if (p.name == "layer1.0.conv2.weight") {
      // kaiming_normal_(fan_out, relu): std = sqrt(2 / (64 * 3 * 3)).
      EXPECT_NEAR(p.tensor.std().item<float>(), std::sqrt(2.0 / (64 * 9)), 0.005);
    }
    if (p.name == "layer1.0.bn3.weight") {
      EXPECT_TRUE(at::all(p.tensor == 1).item<bool>());
    }
    if (p.name == "bn1.bias") {
      EXPECT_TRUE(at::all(p.tensor == 0).item<bool>());
    }
  }
}

TEST(CreateModelTest, SmallInputsAndChannelsAndErrors) {
  std::unique_ptr<Model> model = Create("resnet18", 10, {1, 28, 28});
  EXPECT_EQ(model->named_parameters()[0].tensor.sizes(), (std::vector<int64_t>{64, 1, 7, 7}));
  absl::StatusOr<std::unique_ptr<Model>> unknown = CreateModel("vgg16", 10, {3, 32, 32});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "unknown --arch 'vgg16'; valid: mlp, cnn, resnet18, resnet34, resnet50 (or --model "
            "PATH for TorchScript)");
  EXPECT_EQ(CreateModel("cnn", 0, {1, 28, 28}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateModel("cnn", 10, {1, 2, 2}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CreateModelTest, StateDictSharesStorageAndMovesWithTo) {
  std::unique_ptr<Model> model = Create("cnn", 10, {1, 28, 28});
  const std::vector<NamedTensor> state = model->state_dict();
  EXPECT_EQ(state[0].name, "conv1.weight");
  EXPECT_EQ(state[1].name, "bn1.weight");
  EXPECT_EQ(state[3].name, "bn1.running_mean");
  EXPECT_EQ(state[5].name, "bn1.num_batches_tracked");
  {
    torch::NoGradGuard no_grad;
    state[0].tensor.fill_(0.25);
  }
  EXPECT_EQ(model->parameters()[0].mean().item<float>(), 0.25f);
  model->to(c10::Device(c10::kCPU));
  EXPECT_EQ(model->parameters()[0].device(), c10::Device(c10::kCPU));
}

using ::ddp::data::testing::Exists;
using ::ddp::data::testing::TempDir;

TEST(ScriptModelTest, LoadsModuleSavedByPythonTorch) {
  const char* python = std::getenv("DDP_TORCH_PYTHON");
  if (python == nullptr || *python == '\0' || !Exists(python)) {
    GTEST_SKIP() << "DDP_TORCH_PYTHON unset or missing: cannot save a TorchScript module";
  }
  TempDir dir;
  const std::string script = dir / "save.py";
  std::ofstream(script) << R"(import sys, torch
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4, 10)
    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(x.mean((2, 3)))
torch.manual_seed(0)
net = Net()
torch.jit.script(net).save(sys.argv[1])
x = torch.arange(2 * 28 * 28, dtype=torch.float32).reshape(2, 1, 28, 28) / 1000
net.eval()
print(' '.join('%.6f' % v for v in net(x).flatten().tolist()))
)";
  const std::string command =
      absl::StrCat(python, " ", script, " ", dir / "net.pt", " > ", dir / "out.txt");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  absl::StatusOr<std::unique_ptr<Model>> model = LoadScriptModel(dir / "net.pt");
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<std::string> names;
  for (const NamedTensor& p : (*model)->named_parameters()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv.weight", "conv.bias", "bn.weight", "bn.bias",
                                             "fc.weight", "fc.bias"}));
  EXPECT_EQ((*model)->named_buffers().size(), 3u);
  EXPECT_EQ((*model)->state_dict().size(), 9u);
  EXPECT_EQ((*model)->state_dict()[4].name, "bn.running_mean");
  (*model)->eval();
  EXPECT_FALSE((*model)->is_training());
  torch::NoGradGuard no_grad;
  at::Tensor out = (*model)->forward(
      torch::arange(2 * 28 * 28, torch::kFloat32).reshape({2, 1, 28, 28}).div(1000));
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{2, 10}));
  std::ifstream expected_in(dir / "out.txt");
  for (int64_t i = 0; i < 20; ++i) {
    float expected = 0;
    expected_in >> expected;
    EXPECT_NEAR(out.flatten()[i].item<float>(), expected, 1e-4) << i;
  }
  (*model)->train(true);
  EXPECT_TRUE((*model)->is_training());
}

TEST(ScriptModelTest, NonModuleFileIsAClearError) {
  TempDir dir;
  std::ofstream(dir / "junk.pt") << "definitely not a zip archive";
  absl::StatusOr<std::unique_ptr<Model>> model = LoadScriptModel(dir / "junk.pt");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(model.status().message());
  EXPECT_EQ(message.rfind(dir / "junk.pt: not a TorchScript module", 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(LoadScriptModel(dir / "missing.pt").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ddp::models
