#include "trainer/data/image_folder_dataset.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "trainer/data/image_files.h"
#include "trainer/data/image_transforms.h"
#include "trainer/data/in_memory_dataset.h"
#include "trainer/data/jpeg_codec.h"
#include "trainer/data/sample_rng.h"

namespace ddp::data {
namespace {

enum class FileKind { kJpeg, kOtherImage, kNotImage };

FileKind ClassifyFile(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto ends_with = [&lower](const std::string& suffix) {
    return lower.size() >= suffix.size() &&
           lower.compare(lower.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".jpg") || ends_with(".jpeg")) return FileKind::kJpeg;
  // The rest of torchvision's IMG_EXTENSIONS.
  for (const char* ext : {".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"}) {
    if (ends_with(ext)) return FileKind::kOtherImage;
  }
  return FileKind::kNotImage;
}

// Appends the JPEG files under `class_dir`, in the order of Python's
// `for root, _, files in sorted(os.walk(class_dir, followlinks=True)): for f in sorted(files)`.
absl::Status CollectFiles(const std::string& class_dir, int64_t label,
                          std::vector<ImageFolderDataset::Sample>* samples) {
  std::vector<std::string> dirs = {class_dir};
  std::vector<std::string> subs;
  std::vector<std::string> files;
  for (size_t i = 0; i < dirs.size(); ++i) {
    RETURN_IF_ERROR(ListDirectory(dirs[i], &subs, &files));
    for (const std::string& sub : subs) dirs.push_back(dirs[i] + "/" + sub);
  }
  std::sort(dirs.begin(), dirs.end());
  const size_t before = samples->size();
  for (const std::string& dir : dirs) {
    RETURN_IF_ERROR(ListDirectory(dir, &subs, &files));
    for (const std::string& file : files) {
      switch (ClassifyFile(file)) {
        case FileKind::kJpeg:
          samples->push_back({dir + "/" + file, label});
          break;
        case FileKind::kOtherImage:
          return absl::InvalidArgumentError(
              absl::StrCat(dir, "/", file, ": only JPEG images are supported"));
        case FileKind::kNotImage:
          break;
      }
    }
  }
  if (samples->size() == before) {
    return absl::NotFoundError(absl::StrCat(class_dir, ": no JPEG files in this class folder"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ImageFolderDataset>> ImageFolderDataset::Open(
    const std::string& root, Options options) {
  if (!IsDirectory(root)) {
    return absl::NotFoundError(absl::StrCat(root, ": no such folder"));
  }
  RETURN_IF_ERROR(ValidateNormalization(options.normalization, 3));
  if (options.image_size <= 0 || options.image_size > options.resize) {
    return absl::InvalidArgumentError(absl::StrCat("image folder: crop size ", options.image_size,
                                                   " must be in (0, resize=", options.resize, "]"));
  }
  std::vector<std::string> folders;
  std::vector<std::string> files;
  RETURN_IF_ERROR(ListDirectory(root, &folders, &files));
  if (folders.empty()) {
    return absl::NotFoundError(absl::StrCat(root, ": no class subfolders"));
  }
  std::vector<std::string> classes = options.classes.empty() ? folders : options.classes;
  std::vector<Sample> samples;
  for (const std::string& folder : folders) {
    auto it = std::find(classes.begin(), classes.end(), folder);
    if (it == classes.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(root, "/", folder, ": class folder not present in the training set"));
    }
    RETURN_IF_ERROR(CollectFiles(root + "/" + folder, it - classes.begin(), &samples));
  }
  return std::unique_ptr<ImageFolderDataset>(
      new ImageFolderDataset(root, std::move(options), std::move(classes), std::move(samples)));
}

ImageFolderDataset::ImageFolderDataset(std::string root, Options options,
                                       std::vector<std::string> classes,
                                       std::vector<Sample> samples)
    : root_(std::move(root)),
      options_(std::move(options)),
      classes_(std::move(classes)),
      samples_(std::move(samples)) {}

std::string ImageFolderDataset::description() const {
  return absl::StrCat("imagefolder ", root_, " (", samples_.size(), " images, ", classes_.size(),
                      " classes, ", options_.transform == Transform::kTrain ? "train" : "eval",
                      " transform)");
}

absl::StatusOr<Example> ImageFolderDataset::Get(int64_t index, int64_t epoch) const {
  if (index < 0 || index >= size()) {
    return absl::OutOfRangeError(
        absl::StrCat(root_, ": index ", index, " out of range [0, ", size(), ")"));
  }
  const Sample& sample = samples_[static_cast<size_t>(index)];
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(sample.path));
  ASSIGN_OR_RETURN(RgbImage image, DecodeJpeg(bytes, sample.path));
  if (options_.transform == Transform::kTrain) {
    SampleRng rng(options_.seed, epoch, index);
    return Example{TrainTransform(image, options_.image_size, rng, options_.normalization),
                   sample.label};
  }
  return Example{EvalTransform(image, options_.resize, options_.image_size, options_.normalization),
                 sample.label};
}

}  // namespace ddp::data
