#include "trainer/data/data_spec.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "trainer/data/image_files.h"
#include "trainer/data/image_folder_dataset.h"
#include "trainer/data/in_memory_dataset.h"
#include "trainer/data/synthetic_dataset.h"

namespace ddp::data {
namespace {

constexpr char kDataForms[] =
    "expected fashion-mnist[:DIR], mnist:DIR, cifar10:DIR, imagefolder:DIR or "
    "synthetic[:N[xC[xH[xW]]][:K]]";

absl::Status BadSpec(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("--data '", text, "': ", why, "; ", kDataForms));
}

absl::StatusOr<std::vector<float>> ParseFloats(absl::string_view text, absl::string_view whole) {
  std::vector<float> values;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    float v = 0;
    if (!absl::SimpleAtof(part, &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--normalize '", whole, "': '", part,
                       "' is not a number; expected MEAN,STD or M1,M2,.../S1,S2,... or none"));
    }
    values.push_back(v);
  }
  return values;
}

// Picks DIR/name or DIR/name.gz, whichever exists (the plain name when neither does, so the
// error names a file).
std::string FindIdxFile(const std::string& dir, const std::string& name) {
  const std::string plain = dir + "/" + name;
  if (PathExists(plain)) return plain;
  const std::string gz = plain + ".gz";
  if (PathExists(gz)) return gz;
  return gz;
}

absl::StatusOr<std::unique_ptr<Dataset>> OpenIdx(const std::string& dir, const std::string& split,
                                                 const std::string& label,
                                                 const Normalization& normalization) {
  ASSIGN_OR_RETURN(RawImageSet set,
                   ReadIdxPair(FindIdxFile(dir, split + "-images-idx3-ubyte"),
                               FindIdxFile(dir, split + "-labels-idx1-ubyte"), 10));
  std::string description = absl::StrCat(label, split == "train" ? " train" : " test", " (",
                                         set.count, " images, ", dir, ")");
  ASSIGN_OR_RETURN(
      std::unique_ptr<InMemoryDataset> dataset,
      InMemoryDataset::Create(std::move(set), 10, normalization, std::move(description)));
  return std::unique_ptr<Dataset>(std::move(dataset));
}

absl::StatusOr<std::unique_ptr<Dataset>> OpenCifar(const std::string& dir,
                                                   const std::vector<std::string>& names,
                                                   const std::string& split,
                                                   const Normalization& normalization) {
  std::string base = dir;
  if (!PathExists(base + "/" + names[0]) &&
      PathExists(base + "/cifar-10-batches-bin/" + names[0])) {
    base += "/cifar-10-batches-bin";
  }
  std::vector<std::string> paths;
  for (const std::string& name : names) paths.push_back(base + "/" + name);
  ASSIGN_OR_RETURN(RawImageSet set, ReadCifar10Batches(paths));
  std::string description =
      absl::StrCat("cifar10 ", split, " (", set.count, " images, ", base, ")");
  ASSIGN_OR_RETURN(
      std::unique_ptr<InMemoryDataset> dataset,
      InMemoryDataset::Create(std::move(set), 10, normalization, std::move(description)));
  return std::unique_ptr<Dataset>(std::move(dataset));
}

}  // namespace

absl::StatusOr<DataSpec> ParseDataSpec(absl::string_view text) {
  const size_t colon = text.find(':');
  const absl::string_view name = text.substr(0, colon);
  const absl::string_view arg =
      colon == absl::string_view::npos ? absl::string_view() : text.substr(colon + 1);
  const bool has_arg = colon != absl::string_view::npos;
  DataSpec spec;
  if (name == "fashion-mnist") {
    spec.kind = DataSpec::Kind::kFashionMnist;
    spec.dir = has_arg ? std::string(arg) : kDefaultFashionMnistDir;
  } else if (name == "mnist") {
    spec.kind = DataSpec::Kind::kMnist;
  } else if (name == "cifar10") {
    spec.kind = DataSpec::Kind::kCifar10;
  } else if (name == "imagefolder") {
    spec.kind = DataSpec::Kind::kImageFolder;
  } else if (name == "synthetic") {
    spec.kind = DataSpec::Kind::kSynthetic;
    if (!has_arg) return spec;
    std::vector<absl::string_view> parts = absl::StrSplit(arg, ':');
    if (parts.size() > 2) return BadSpec(text, "too many ':'");
    std::vector<absl::string_view> dims = absl::StrSplit(parts[0], 'x');
    if (dims.size() > 4) return BadSpec(text, "at most N x C x H x W");
    std::vector<int64_t> values;
    for (absl::string_view dim : dims) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(dim, &v) || v <= 0) {
        return BadSpec(text, absl::StrCat("'", dim, "' is not a positive integer"));
      }
      values.push_back(v);
    }
    spec.synthetic_size = values[0];
    if (values.size() > 1) spec.channels = values[1];
    if (values.size() > 2) spec.height = spec.width = values[2];
    if (values.size() > 3) spec.width = values[3];
    if (parts.size() == 2) {
      if (!absl::SimpleAtoi(parts[1], &spec.num_classes) || spec.num_classes <= 0) {
        return BadSpec(text, absl::StrCat("'", parts[1], "' is not a positive class count"));
      }
    }
    return spec;
  } else {
    return BadSpec(text, absl::StrCat("unknown dataset '", name, "'"));
  }
  if (spec.kind != DataSpec::Kind::kFashionMnist) {
    if (!has_arg || arg.empty()) return BadSpec(text, absl::StrCat(name, " needs a folder"));
    spec.dir = std::string(arg);
  }
  if (spec.dir.empty()) return BadSpec(text, "empty folder");
  return spec;
}

absl::StatusOr<Normalization> ParseNormalization(absl::string_view text) {
  Normalization n;
  if (text == "none") return n;
  const size_t slash = text.find('/');
  if (slash == absl::string_view::npos) {
    ASSIGN_OR_RETURN(std::vector<float> values, ParseFloats(text, text));
    if (values.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("--normalize '", text,
                       "': expected MEAN,STD (two numbers) or M1,M2,.../S1,S2,... or none"));
    }
    n.mean = {values[0]};
    n.std = {values[1]};
  } else {
    ASSIGN_OR_RETURN(n.mean, ParseFloats(text.substr(0, slash), text));
    ASSIGN_OR_RETURN(n.std, ParseFloats(text.substr(slash + 1), text));
    if (n.mean.size() != n.std.size() && n.mean.size() != 1 && n.std.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("--normalize '", text, "': ", n.mean.size(),
                                                     " means but ", n.std.size(), " stds"));
    }
  }
  for (float s : n.std) {
    if (!(s > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--normalize '", text, "': std must be positive"));
    }
  }
  return n;
}

Normalization DefaultNormalization(DataSpec::Kind kind) {
  switch (kind) {
    case DataSpec::Kind::kFashionMnist:
      return {{0.2860f}, {0.3530f}};
    case DataSpec::Kind::kMnist:
      return {{0.1307f}, {0.3081f}};
    case DataSpec::Kind::kCifar10:
      return {{0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}};
    case DataSpec::Kind::kImageFolder:
      return {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
    case DataSpec::Kind::kSynthetic:
      return {};
  }
  return {};
}

absl::StatusOr<DatasetPair> OpenDatasets(const DataSpec& spec, const DataOptions& options) {
  const Normalization normalization =
      options.normalization.value_or(DefaultNormalization(spec.kind));
  DatasetPair pair;
  switch (spec.kind) {
    case DataSpec::Kind::kFashionMnist:
    case DataSpec::Kind::kMnist: {
      const std::string label = spec.kind == DataSpec::Kind::kMnist ? "mnist" : "fashion-mnist";
      ASSIGN_OR_RETURN(pair.train, OpenIdx(spec.dir, "train", label, normalization));
      ASSIGN_OR_RETURN(pair.test, OpenIdx(spec.dir, "t10k", label, normalization));
      break;
    }
    case DataSpec::Kind::kCifar10: {
      ASSIGN_OR_RETURN(pair.train,
                       OpenCifar(spec.dir,
                                 {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                  "data_batch_4.bin", "data_batch_5.bin"},
                                 "train", normalization));
      ASSIGN_OR_RETURN(pair.test, OpenCifar(spec.dir, {"test_batch.bin"}, "test", normalization));
      break;
    }
    case DataSpec::Kind::kImageFolder: {
      ImageFolderDataset::Options train_options;
      train_options.transform = options.augment ? ImageFolderDataset::Transform::kTrain
                                                : ImageFolderDataset::Transform::kEval;
      train_options.normalization = normalization;
      train_options.seed = options.seed;
      ASSIGN_OR_RETURN(std::unique_ptr<ImageFolderDataset> train,
                       ImageFolderDataset::Open(spec.dir + "/train", train_options));
      ImageFolderDataset::Options val_options;
      val_options.transform = ImageFolderDataset::Transform::kEval;
      val_options.normalization = normalization;
      val_options.classes = train->classes();
      ASSIGN_OR_RETURN(std::unique_ptr<ImageFolderDataset> val,
                       ImageFolderDataset::Open(spec.dir + "/val", val_options));
      pair.train = std::move(train);
      pair.test = std::move(val);
      break;
    }
    case DataSpec::Kind::kSynthetic: {
      SyntheticDataset::Options synthetic;
      synthetic.size = spec.synthetic_size;
      synthetic.channels = spec.channels;
      synthetic.height = spec.height;
      synthetic.width = spec.width;
      synthetic.num_classes = spec.num_classes;
      synthetic.seed = options.seed;
      synthetic.normalization = normalization;
      ASSIGN_OR_RETURN(pair.train, SyntheticDataset::Create(synthetic));
      synthetic.split = 1;
      synthetic.size = (spec.synthetic_size + 4) / 5;
      ASSIGN_OR_RETURN(pair.test, SyntheticDataset::Create(synthetic));
      break;
    }
  }
  return pair;
}

}  // namespace ddp::data
