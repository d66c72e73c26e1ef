// torchvision-style ImageFolder over JPEG files: ROOT/<class>/**/<image>.jpg. Classes are the
// subfolders of ROOT sorted by name (label = position), samples are ordered like torchvision's
// make_dataset (folders in sorted os.walk order, files sorted by name), so index i names the same
// file as torchvision.datasets.ImageFolder(ROOT)[i].
//
// Files with torchvision's image extensions other than .jpg/.jpeg (png, bmp, ...) are refused at
// Open (only JPEG is decoded), rather than silently skipped, which would shift every index.
// The walk refuses a folder it reaches twice (a symlink loop: compared by device and inode) and an
// image that is not a regular file (a link to /dev/zero) or is larger than kMaxImageFileBytes,
// each naming the path; Get reads at most that many bytes of a file.
// Images are decoded on every Get (nothing is cached) and transformed with the ImageNet recipe
// (image_transforms.h): the train transform draws its crop and flip from (seed, epoch, index).
//
// Thread safety: immutable after Open; all methods may be called concurrently.
#ifndef SLURM_DDP_TRAINER_DATA_IMAGE_FOLDER_DATASET_H_
#define SLURM_DDP_TRAINER_DATA_IMAGE_FOLDER_DATASET_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/data/dataset.h"

namespace ddp::data {

// The most bytes read from one image file: far above any photograph (an ImageNet JPEG is a few
// hundred KB; one at the decoder's pixel limit, kMaxJpegPixels, rarely reaches 100 MB).
inline constexpr size_t kMaxImageFileBytes = size_t{256} << 20;

class ImageFolderDataset : public Dataset {
 public:
  enum class Transform { kTrain, kEval };
  struct Options {
    Transform transform = Transform::kEval;
    int image_size = 224;  // output side (RandomResizedCrop / CenterCrop size)
    int resize = 256;      // eval: shorter side before the center crop
    Normalization normalization;
    uint64_t seed = 0;  // augmentation seed (train transform)
    // If non-empty, the class list to use (e.g. the train split's, for the val split); every
    // subfolder of ROOT must be one of them. Otherwise the sorted subfolders of ROOT.
    std::vector<std::string> classes;
  };
  struct Sample {
    std::string path;
    int64_t label = 0;
  };

  // Scans ROOT. Errors: ROOT missing or not a folder, no class folders, a class folder without
  // JPEG files, a non-JPEG image file, a subfolder not in Options::classes, a folder reached
  // twice (a symlink loop), an image that is not a regular file or is too large.
  static absl::StatusOr<std::unique_ptr<ImageFolderDataset>> Open(const std::string& root,
                                                                  Options options);

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  std::vector<int64_t> sample_shape() const override {
    return {3, options_.image_size, options_.image_size};
  }
  int64_t num_classes() const override { return static_cast<int64_t>(classes_.size()); }
  std::string description() const override;
  // Errors: OutOfRange; NotFound / DataLoss naming the file (missing, undecodable, truncated).
  absl::StatusOr<Example> Get(int64_t index, int64_t epoch) const override;

  const std::vector<std::string>& classes() const { return classes_; }
  const Options& options() const { return options_; }
  const std::vector<Sample>& samples() const { return samples_; }

 private:
  ImageFolderDataset(std::string root, Options options, std::vector<std::string> classes,
                     std::vector<Sample> samples);

  std::string root_;
  Options options_;
  std::vector<std::string> classes_;
  std::vector<Sample> samples_;
};

}  // namespace ddp::data

#endif  // SLURM_DDP_TRAINER_DATA_IMAGE_FOLDER_DATASET_H_
