#include "trainer/app/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"

namespace ddp {
namespace {

constexpr char kFormat[] = "slurm-ddp-checkpoint-v1";
constexpr char kPrefix[] = "ckpt-";
constexpr char kSuffix[] = ".pt";

c10::impl::GenericDict NewDict() {
  return c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get());
}

c10::Dict<std::string, at::Tensor> ToDict(const std::vector<models::NamedTensor>& tensors) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& t : tensors) dict.insert(t.name, t.tensor.detach().cpu());
  return dict;
}

std::vector<models::NamedTensor> FromDict(const c10::IValue& value) {
  std::vector<models::NamedTensor> out;
  for (const auto& entry : value.toGenericDict()) {
    out.push_back({entry.key().toStringRef(), entry.value().toTensor()});
  }
  return out;
}

// Step number of a periodic checkpoint file name, or -1.
int64_t StepOf(const std::string& name) {
  const std::string prefix = kPrefix, suffix = kSuffix;
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return -1;
  }
  int64_t step = -1;
  if (!absl::SimpleAtoi(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()),
                        &step)) {
    return -1;
  }
  return step;
}

// Periodic checkpoints in `dir`, newest first.
// POSIX, not std::filesystem: libtorch.so exports its own, partly broken, std::filesystem.
std::vector<std::pair<int64_t, std::string>> ListCheckpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const int64_t step = StepOf(e->d_name);
      if (step >= 0) found.emplace_back(step, dir + "/" + e->d_name);
    }
    closedir(d);
  }
  std::sort(found.rbegin(), found.rend());
  return found;
}

// mkdir -p.
bool MakeDirs(const std::string& dir, std::string* error) {
  std::string path;
  for (size_t pos = 0; pos != std::string::npos;) {
    pos = dir.find('/', pos + 1);
    path = dir.substr(0, pos);
    if (path.empty()) continue;
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      *error = std::strerror(errno);
      return false;
    }
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *error = "not a directory";
    return false;
  }
  return true;
}

}  // namespace

absl::Status CheckCheckpointDirWritable(const std::string& dir) {
  std::string error;
  if (!MakeDirs(dir, &error)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--checkpoint-dir ", dir, " cannot be created: ", error));
  }
  const std::string probe = absl::StrCat(dir, "/.write-test-", getpid());
  const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--checkpoint-dir ", dir, " is not writable: ", std::strerror(errno)));
  }
  close(fd);
  unlink(probe.c_str());
  return absl::OkStatus();
}

std::string CheckpointPath(const std::string& dir, int64_t step) {
  return absl::StrFormat("%s/%s%010d%s", dir, kPrefix, step, kSuffix);
}

absl::Status WriteCheckpoint(const std::string& path, const CheckpointState& s) {
  c10::impl::GenericDict optimizer = NewDict();
  optimizer.insert("momentum_buffer", ToDict(s.momentum));
  optimizer.insert("lr", s.lr);
  optimizer.insert("momentum", s.momentum_factor);
  optimizer.insert("weight_decay", s.weight_decay);
  optimizer.insert("nesterov", s.nesterov);
  c10::impl::GenericDict schedule = NewDict();
  schedule.insert("name", s.schedule);
  schedule.insert("base_lr", s.base_lr);
  c10::impl::GenericDict sampler = NewDict();
  sampler.insert("epoch", s.epoch);
  sampler.insert("consumed", s.consumed);
  sampler.insert("world_size", s.consumed_world_size);
  sampler.insert("seed", s.seed);
  c10::impl::GenericDict root = NewDict();
  root.insert("format", std::string(kFormat));
  root.insert("model", ToDict(s.model));
  root.insert("optimizer", optimizer);
  root.insert("schedule", schedule);
  root.insert("epoch", s.epoch);
  root.insert("step", s.step);
  root.insert("sampler", sampler);
  root.insert("rng", s.rng.defined() ? s.rng : at::empty({0}, at::kByte));

  std::vector<char> bytes;
  try {
    bytes = torch::pickle_save(c10::IValue(root));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("serializing checkpoint: ", e.what()));
  }
  return WriteFileAtomically(path, absl::string_view(bytes.data(), bytes.size()), 0644);
}

absl::StatusOr<CheckpointState> ReadCheckpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("checkpoint ", path, " cannot be opened"));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CheckpointState s;
  try {
    const c10::IValue value = torch::pickle_load(bytes);
    const auto root = value.toGenericDict();
    if (!root.contains("format") || root.at("format").toStringRef() != kFormat) {
      return absl::DataLossError(absl::StrCat("checkpoint ", path, " is not a ", kFormat, " file"));
    }
    s.model = FromDict(root.at("model"));
    const auto optimizer = root.at("optimizer").toGenericDict();
    s.momentum = FromDict(optimizer.at("momentum_buffer"));
    s.lr = optimizer.at("lr").toDouble();
    s.momentum_factor = optimizer.at("momentum").toDouble();
    s.weight_decay = optimizer.at("weight_decay").toDouble();
    s.nesterov = optimizer.at("nesterov").toBool();
    const auto schedule = root.at("schedule").toGenericDict();
    s.schedule = schedule.at("name").toStringRef();
    s.base_lr = schedule.at("base_lr").toDouble();
    s.epoch = root.at("epoch").toInt();
    s.step = root.at("step").toInt();
    const auto sampler = root.at("sampler").toGenericDict();
    s.consumed = sampler.at("consumed").toInt();
    s.consumed_world_size = sampler.at("world_size").toInt();
    s.seed = sampler.at("seed").toInt();
    s.rng = root.at("rng").toTensor();
  } catch (const std::exception& e) {
    std::string what = e.what();
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, " is corrupt: ", what.substr(0, what.find('\n'))));
  }
  if (s.model.empty() || s.epoch < 0 || s.step < 0 || s.consumed < 0 || s.consumed_world_size < 1) {
    return absl::DataLossError(absl::StrCat("checkpoint ", path, " has inconsistent fields"));
  }
  return s;
}

absl::StatusOr<std::string> FindResumableCheckpoint(const std::string& dir,
                                                    std::vector<std::string>* warnings) {
  for (const auto& [step, path] : ListCheckpoints(dir)) {
    auto loaded = ReadCheckpoint(path);
    if (loaded.ok()) return path;
    warnings->push_back(absl::StrCat("skipping checkpoint: ", loaded.status().message()));
  }
  return absl::NotFoundError(absl::StrCat("no valid checkpoint in ", dir));
}

void PruneCheckpoints(const std::string& dir, int keep) {
  const auto found = ListCheckpoints(dir);
  for (size_t i = static_cast<size_t>(std::max(keep, 0)); i < found.size(); ++i) {
    std::remove(found[i].second.c_str());
  }
}

}  // namespace ddp
