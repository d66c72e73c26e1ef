#include "trainer/data/image_folder_dataset.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <map>
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

// The folders one walk has entered, by (device, inode): a folder reached a second time (a
// symlink loop such as `a -> ..`, or two links to one folder) is refused, where Python's
// os.walk(followlinks=True) would walk a loop until the path grows too long.
class VisitedFolders {
 public:
  absl::Status Enter(const std::string& path, const DirEntry& entry) {
    const auto [it, fresh] = first_path_.emplace(std::make_pair(entry.dev, entry.ino), path);
    if (fresh) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": leads back to ", it->second,
        " (a symlink loop, or a second link to the same folder); refusing to walk it again"));
  }

 private:
  std::map<std::pair<dev_t, ino_t>, std::string> first_path_;
};

// Appends the JPEG files under `class_dir`, in the order of Python's
// `for root, _, files in sorted(os.walk(class_dir, followlinks=True)): for f in sorted(files)`.
// Each JPEG must be a regular file (or a FIFO) of at most kMaxImageFileBytes.
absl::Status CollectFiles(const std::string& class_dir, const DirEntry& class_entry, int64_t label,
                          VisitedFolders& visited,
                          std::vector<ImageFolderDataset::Sample>* samples) {
  RETURN_IF_ERROR(visited.Enter(class_dir, class_entry));
  std::vector<std::pair<std::string, std::vector<DirEntry>>> dirs;  // path, files
  dirs.emplace_back(class_dir, std::vector<DirEntry>());
  std::vector<DirEntry> subs;
  for (size_t i = 0; i < dirs.size(); ++i) {
    std::vector<DirEntry> files;
    RETURN_IF_ERROR(ListDirectoryEntries(dirs[i].first, &subs, &files));
    dirs[i].second = std::move(files);
    const std::string parent = dirs[i].first;
    for (const DirEntry& sub : subs) {
      const std::string path = parent + "/" + sub.name;
      RETURN_IF_ERROR(visited.Enter(path, sub));
      dirs.emplace_back(path, std::vector<DirEntry>());
    }
  }
  std::sort(dirs.begin(), dirs.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  const size_t before = samples->size();
  for (const auto& [dir, files] : dirs) {
    for (const DirEntry& file : files) {
      const std::string path = dir + "/" + file.name;
      switch (ClassifyFile(file.name)) {
        case FileKind::kJpeg:
          RETURN_IF_ERROR(CheckReadableFile(path, file, kMaxImageFileBytes));
          samples->push_back({path, label});
          break;
        case FileKind::kOtherImage:
          return absl::InvalidArgumentError(absl::StrCat(path, ": only JPEG images are supported"));
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
  std::vector<DirEntry> folders;
  std::vector<DirEntry> files;
  RETURN_IF_ERROR(ListDirectoryEntries(root, &folders, &files));
  if (folders.empty()) {
    return absl::NotFoundError(absl::StrCat(root, ": no class subfolders"));
  }
  std::vector<std::string> classes = options.classes;
  if (classes.empty()) {
    for (const DirEntry& folder : folders) classes.push_back(folder.name);
  }
  VisitedFolders visited;
  struct stat root_st;
  if (::stat(root.c_str(), &root_st) == 0) {
    DirEntry self;
    self.dev = root_st.st_dev;
    self.ino = root_st.st_ino;
    RETURN_IF_ERROR(visited.Enter(root, self));
  }
  std::vector<Sample> samples;
  for (const DirEntry& folder : folders) {
    auto it = std::find(classes.begin(), classes.end(), folder.name);
    if (it == classes.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(root, "/", folder.name, ": class folder not present in the training set"));
    }
    RETURN_IF_ERROR(
        CollectFiles(root + "/" + folder.name, folder, it - classes.begin(), visited, &samples));
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
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(sample.path, kMaxImageFileBytes));
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
