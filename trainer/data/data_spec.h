// The --data and --normalize flags, and opening the train and test datasets they name.
//
// --data syntax:
//   fashion-mnist[:DIR]  IDX files {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] in DIR
//                        (default /usr/share/datasets/fashion-mnist, Debian's
//                        dataset-fashion-mnist)
//   mnist:DIR            the same file names, MNIST
//   cifar10:DIR          data_batch_{1..5}.bin + test_batch.bin in DIR or DIR/cifar-10-batches-bin
//   imagefolder:DIR      JPEG ImageFolder trees DIR/train and DIR/val (ImageNet layout)
//   synthetic[:N[xC[xH[xW]]][:K]]
//                        N train samples (default 1024) of C x H x W (default 3x32x32; W
//                        defaults to H) with K classes (default 10); the test split has
//                        ceil(N/5) samples. E.g. synthetic, synthetic:50000, synthetic:2048x1x28,
//                        synthetic:4096x3x224x224:1000.
//
// --normalize syntax (applied to pixel values scaled to [0,1]: (x - mean) / std):
//   MEAN,STD                      one mean and std for every channel, e.g. 0.2860,0.3530
//   M1,M2,.../S1,S2,...           per-channel lists, e.g. 0.485,0.456,0.406/0.229,0.224,0.225
//                                 (either side may be a single value)
//   none                          no normalization
// Defaults: fashion-mnist 0.2860,0.3530; mnist 0.1307,0.3081; cifar10
// 0.4914,0.4822,0.4465/0.2470,0.2435,0.2616; imagefolder (ImageNet)
// 0.485,0.456,0.406/0.229,0.224,0.225; synthetic none.
//
// Thread safety: free functions.
#ifndef SLURM_DDP_TRAINER_DATA_DATA_SPEC_H_
#define SLURM_DDP_TRAINER_DATA_DATA_SPEC_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trainer/data/dataset.h"

namespace ddp::data {

struct DataSpec {
  enum class Kind { kFashionMnist, kMnist, kCifar10, kImageFolder, kSynthetic };
  Kind kind = Kind::kFashionMnist;
  std::string dir;  // empty for synthetic
  // Synthetic only.
  int64_t synthetic_size = 1024;
  int64_t channels = 3;
  int64_t height = 32;
  int64_t width = 32;
  int64_t num_classes = 10;
};

inline constexpr char kDefaultFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// Parses --data. Errors (InvalidArgument) name the bad part and list the valid forms.
absl::StatusOr<DataSpec> ParseDataSpec(absl::string_view text);

// Parses --normalize ("none" gives an empty Normalization).
absl::StatusOr<Normalization> ParseNormalization(absl::string_view text);

// The default normalization of a kind of dataset (empty for synthetic).
Normalization DefaultNormalization(DataSpec::Kind kind);

struct DataOptions {
  std::optional<Normalization> normalization;  // --normalize; nullopt: the dataset's default
  uint64_t seed = 0;                           // augmentation / synthetic data seed
  bool augment = true;  // imagefolder train split: random crop + flip (false: eval transform)
};

struct DatasetPair {
  std::unique_ptr<Dataset> train;
  std::unique_ptr<Dataset> test;  // the test or validation split
};

// Opens both splits. Errors name the missing or corrupt file.
absl::StatusOr<DatasetPair> OpenDatasets(const DataSpec& spec, const DataOptions& options);

}  // namespace ddp::data

#endif  // SLURM_DDP_TRAINER_DATA_DATA_SPEC_H_
