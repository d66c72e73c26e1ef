// The datasets, transforms and --data/--normalize parsing.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <string>

#include "gtest/gtest.h"
#include "tests/trainer/data/test_files.h"
#include "trainer/data/data_spec.h"
#include "trainer/data/image_folder_dataset.h"
#include "trainer/data/image_transforms.h"
#include "trainer/data/in_memory_dataset.h"
#include "trainer/data/synthetic_dataset.h"

namespace ddp::data {
namespace {

using testing::Gzip;
using testing::IdxImages;
using testing::IdxLabels;
using testing::TempDir;
using testing::TestJpeg;
using testing::WriteFile;

std::vector<int64_t> Range(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

TEST(DataSpecTest, ParsesEveryForm) {
  struct Case {
    const char* text;
    DataSpec::Kind kind;
    std::string dir;
    int64_t n, c, h, w, k;
  };
  const Case cases[] = {
      {"fashion-mnist", DataSpec::Kind::kFashionMnist, kDefaultFashionMnistDir, 1024, 3, 32, 32,
       10},
      {"fashion-mnist:/d", DataSpec::Kind::kFashionMnist, "/d", 1024, 3, 32, 32, 10},
      {"mnist:/m", DataSpec::Kind::kMnist, "/m", 1024, 3, 32, 32, 10},
      {"cifar10:rel/c", DataSpec::Kind::kCifar10, "rel/c", 1024, 3, 32, 32, 10},
      {"imagefolder:/in", DataSpec::Kind::kImageFolder, "/in", 1024, 3, 32, 32, 10},
      {"synthetic", DataSpec::Kind::kSynthetic, "", 1024, 3, 32, 32, 10},
      {"synthetic:500", DataSpec::Kind::kSynthetic, "", 500, 3, 32, 32, 10},
      {"synthetic:64x1x28", DataSpec::Kind::kSynthetic, "", 64, 1, 28, 28, 10},
      {"synthetic:8x3x224x200:1000", DataSpec::Kind::kSynthetic, "", 8, 3, 224, 200, 1000},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<DataSpec> spec = ParseDataSpec(c.text);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(spec->kind, c.kind);
    EXPECT_EQ(spec->dir, c.dir);
    EXPECT_EQ(spec->synthetic_size, c.n);
    EXPECT_EQ(spec->channels, c.c);
    EXPECT_EQ(spec->height, c.h);
    EXPECT_EQ(spec->width, c.w);
    EXPECT_EQ(spec->num_classes, c.k);
  }
  for (const char* bad : {"", "imagenet", "mnist", "cifar10:", "synthetic:0", "synthetic:1x2x3x4x5",
                          "synthetic:10:0", "synthetic:ax3", "synthetic:1:2:3"}) {
    SCOPED_TRACE(bad);
    absl::StatusOr<DataSpec> spec = ParseDataSpec(bad);
    ASSERT_FALSE(spec.ok());
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(spec.status().message().find("expected fashion-mnist[:DIR]"), std::string::npos);
  }
}

TEST(DataSpecTest, ParsesNormalization) {
  absl::StatusOr<Normalization> n = ParseNormalization("0.2860,0.3530");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->mean, std::vector<float>{0.2860f});
  EXPECT_EQ(n->std, std::vector<float>{0.3530f});
  n = ParseNormalization("0.485,0.456,0.406/0.229,0.224,0.225");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->mean, (std::vector<float>{0.485f, 0.456f, 0.406f}));
  EXPECT_EQ(n->std, (std::vector<float>{0.229f, 0.224f, 0.225f}));
  n = ParseNormalization("0.5/0.1,0.2,0.3");
  ASSERT_TRUE(n.ok());
  n = ParseNormalization("none");
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(n->empty());
  for (const char* bad : {"", "0.5", "1,2,3", "a,b", "0.5,0", "0.5,-1", "1,2/3,4,5"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(ParseNormalization(bad).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(FashionMnistTest, LoadsTheDebianDataset) {
  if (!testing::Exists(std::string(kDefaultFashionMnistDir) + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << kDefaultFashionMnistDir << " absent (Debian package dataset-fashion-mnist)";
  }
  absl::StatusOr<DatasetPair> data = OpenDatasets(*ParseDataSpec("fashion-mnist"), DataOptions{});
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train->size(), 60000);
  EXPECT_EQ(data->test->size(), 10000);
  EXPECT_EQ(data->train->sample_shape(), (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(data->train->num_classes(), 10);
  for (Dataset* dataset : {data->train.get(), data->test.get()}) {
    absl::StatusOr<Batch> all = dataset->GetBatch(Range(dataset->size()), 0);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(all->labels.min().item<int64_t>(), 0);
    EXPECT_EQ(all->labels.max().item<int64_t>(), 9);
    // Balanced classes.
    EXPECT_EQ(all->labels.bincount().min().item<int64_t>(), dataset->size() / 10);
    if (dataset == data->train.get()) {
      // The default normalization makes the training set zero-mean, unit-variance.
      EXPECT_NEAR(all->images.mean().item<float>(), 0.0f, 0.01f);
      EXPECT_NEAR(all->images.std().item<float>(), 1.0f, 0.01f);
    }
  }
}

TEST(InMemoryDatasetTest, IdxFolderGetBatchMatchesGetAndNormalizes) {
  TempDir dir;
  WriteFile(dir / "train-images-idx3-ubyte.gz", Gzip(IdxImages(20, 4, 3)));
  WriteFile(dir / "train-labels-idx1-ubyte.gz", Gzip(IdxLabels(20)));
  WriteFile(dir / "t10k-images-idx3-ubyte", IdxImages(6, 4, 3));
  WriteFile(dir / "t10k-labels-idx1-ubyte", IdxLabels(6));
  DataOptions options;
  options.normalization = Normalization{{0.5f}, {0.25f}};
  absl::StatusOr<DatasetPair> data = OpenDatasets(*ParseDataSpec("mnist:" + dir.path()), options);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train->size(), 20);
  EXPECT_EQ(data->test->size(), 6);
  const std::vector<int64_t> indices = {7, 0, 19, 7};
  absl::StatusOr<Batch> batch = data->train->GetBatch(indices, 0);
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->images.sizes(), (std::vector<int64_t>{4, 1, 4, 3}));
  for (size_t i = 0; i < indices.size(); ++i) {
    absl::StatusOr<Example> example = data->train->Get(indices[i], 0);
    ASSERT_TRUE(example.ok());
    EXPECT_TRUE(at::allclose(batch->images[static_cast<int64_t>(i)], example->image));
    EXPECT_EQ(batch->labels[static_cast<int64_t>(i)].item<int64_t>(), example->label);
    EXPECT_EQ(example->label, indices[i] % 10);
  }
  // Pixel (7, r=1, c=2) = (7*7 + 5) % 256 = 54 -> (54/255 - 0.5) / 0.25.
  EXPECT_NEAR(batch->images[0][0][1][2].item<float>(), (54 / 255.0 - 0.5) / 0.25, 1e-5);
  // Bit for bit the Python recipe's transform, (x.float() / 255.0 - mean) / std, for every pixel
  // value (an odd mean and std, where x * (1 / (255 std)) - mean / std differs in the last bit).
  options.normalization = Normalization{{0.2860f}, {0.3530f}};
  absl::StatusOr<DatasetPair> odd = OpenDatasets(*ParseDataSpec("mnist:" + dir.path()), options);
  ASSERT_TRUE(odd.ok()) << odd.status();
  auto* in_memory = dynamic_cast<InMemoryDataset*>(odd->train.get());
  ASSERT_NE(in_memory, nullptr);
  absl::StatusOr<Batch> every = odd->train->GetBatch(Range(odd->train->size()), 0);
  ASSERT_TRUE(every.ok());
  const at::Tensor recipe = in_memory->images().to(at::kFloat).div(255.0).sub(0.2860).div(0.3530);
  EXPECT_TRUE(at::equal(every->images, recipe));
  EXPECT_EQ(data->train->Get(20, 0).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(data->train->GetBatch({1, -1}, 0).status().code(), absl::StatusCode::kOutOfRange);

  // Per-channel normalization with the wrong channel count, and a missing split.
  options.normalization = Normalization{{0.1f, 0.2f, 0.3f}, {1.0f}};
  EXPECT_EQ(OpenDatasets(*ParseDataSpec("mnist:" + dir.path()), options).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::remove((dir / "t10k-labels-idx1-ubyte").c_str());
  absl::Status missing = OpenDatasets(*ParseDataSpec("mnist:" + dir.path()), {}).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("t10k-labels-idx1-ubyte"), std::string::npos) << missing;
}

TEST(InMemoryDatasetTest, Cifar10Folder) {
  TempDir dir;
  auto batch_file = [](int records, int label) {
    std::string s;
    for (int r = 0; r < records; ++r) {
      s.push_back(static_cast<char>(label));
      s.append(3072, static_cast<char>(r));
    }
    return s;
  };
  for (int b = 1; b <= 5; ++b) {
    WriteFile(dir / ("cifar-10-batches-bin/data_batch_" + std::to_string(b) + ".bin"),
              batch_file(3, b));
  }
  WriteFile(dir / "cifar-10-batches-bin/test_batch.bin", batch_file(2, 9));
  absl::StatusOr<DatasetPair> data = OpenDatasets(*ParseDataSpec("cifar10:" + dir.path()), {});
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train->size(), 15);
  EXPECT_EQ(data->test->size(), 2);
  EXPECT_EQ(data->train->sample_shape(), (std::vector<int64_t>{3, 32, 32}));
  absl::StatusOr<Example> e = data->train->Get(4, 0);  // batch 2, record 1
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->label, 2);
  // Default CIFAR normalization, green channel: (1/255 - 0.4822) / 0.2435.
  EXPECT_NEAR(e->image[1][5][5].item<float>(), (1 / 255.0 - 0.4822) / 0.2435, 1e-5);
}

TEST(SyntheticDatasetTest, DeterministicPerIndexAndLearnable) {
  absl::StatusOr<DatasetPair> data =
      OpenDatasets(*ParseDataSpec("synthetic:200x2x8x6:4"), DataOptions{{}, 42, true});
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(data->train->size(), 200);
  EXPECT_EQ(data->test->size(), 40);
  EXPECT_EQ(data->train->sample_shape(), (std::vector<int64_t>{2, 8, 6}));
  absl::StatusOr<Example> a = data->train->Get(17, 0);
  absl::StatusOr<Example> b = data->train->Get(17, 3);
  absl::StatusOr<Example> c = data->train->Get(18, 0);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_TRUE(at::equal(a->image, b->image));
  EXPECT_FALSE(at::equal(a->image, c->image));
  EXPECT_GE(a->image.min().item<float>(), 0.0f);
  EXPECT_LT(a->image.max().item<float>(), 1.0f);
  absl::StatusOr<Batch> batch = data->train->GetBatch({18, 17}, 0);
  ASSERT_TRUE(batch.ok());
  EXPECT_TRUE(at::equal(batch->images[1], a->image));
  EXPECT_EQ(batch->labels[0].item<int64_t>(), c->label);
  // Another dataset object with the same seed regenerates the same data.
  absl::StatusOr<DatasetPair> again =
      OpenDatasets(*ParseDataSpec("synthetic:200x2x8x6:4"), DataOptions{{}, 42, true});
  EXPECT_TRUE(at::equal(again->train->Get(17, 0)->image, a->image));
  // Class means differ clearly (the class pattern), so models can learn the data.
  absl::StatusOr<Batch> all = data->train->GetBatch(Range(200), 0);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->labels.max().item<int64_t>(), 3);
  at::Tensor mean0 = all->images.index({all->labels == 0}).mean(0);
  at::Tensor mean1 = all->images.index({all->labels == 1}).mean(0);
  EXPECT_GT((mean0 - mean1).abs().mean().item<float>(), 0.15f);
}

TEST(ImageTransformsTest, RandomResizedCropBoxStaysInsideAndIsDeterministic) {
  for (int64_t index = 0; index < 500; ++index) {
    SampleRng rng(7, 1, index);
    const CropBox box = RandomResizedCropBox(350, 400, rng);
    ASSERT_GT(box.height, 0);
    ASSERT_GT(box.width, 0);
    ASSERT_GE(box.top, 0);
    ASSERT_GE(box.left, 0);
    ASSERT_LE(box.top + box.height, 350);
    ASSERT_LE(box.left + box.width, 400);
    const double area = static_cast<double>(box.height) * box.width / (350.0 * 400.0);
    EXPECT_GE(area, 0.07);
    SampleRng again(7, 1, index);
    const CropBox box2 = RandomResizedCropBox(350, 400, again);
    EXPECT_EQ(box.top, box2.top);
    EXPECT_EQ(box.width, box2.width);
  }
  int h = 0, w = 0;
  ShorterSideResize(350, 400, 256, &h, &w);
  EXPECT_EQ(h, 256);
  EXPECT_EQ(w, 292);  // int(256 * 400 / 350)
  ShorterSideResize(500, 375, 256, &h, &w);
  EXPECT_EQ(w, 256);
  EXPECT_EQ(h, 341);
}

TEST(ImageTransformsTest, ConstantImageNormalizesToConstant) {
  RgbImage image;
  image.width = 300;
  image.height = 260;
  image.pixels.assign(300 * 260 * 3, 0);
  for (size_t i = 0; i < image.pixels.size(); i += 3) {
    image.pixels[i] = 255;
    image.pixels[i + 1] = 128;
    image.pixels[i + 2] = 0;
  }
  const Normalization imagenet = DefaultNormalization(DataSpec::Kind::kImageFolder);
  at::Tensor eval = EvalTransform(image, 256, 224, imagenet);
  ASSERT_EQ(eval.sizes(), (std::vector<int64_t>{3, 224, 224}));
  // One uint8 level is about 0.017 after normalization.
  EXPECT_NEAR(eval[0].mean().item<float>(), (1.0 - 0.485) / 0.229, 0.02);
  EXPECT_NEAR(eval[1].mean().item<float>(), (128 / 255.0 - 0.456) / 0.224, 0.02);
  EXPECT_NEAR(eval[2].max().item<float>(), -0.406 / 0.225, 0.02);
  SampleRng rng(1, 2, 3);
  at::Tensor train = TrainTransform(image, 224, rng, imagenet);
  ASSERT_EQ(train.sizes(), (std::vector<int64_t>{3, 224, 224}));
  EXPECT_NEAR(train[1].mean().item<float>(), (128 / 255.0 - 0.456) / 0.224, 0.02);
}

// ROOT/{train,val}/{cat,dog}/... with a nested folder and a non-image file.
void MakeImageFolder(const TempDir& dir) {
  WriteFile(dir / "train/dog/b.jpg", TestJpeg(64, 48, 10));
  WriteFile(dir / "train/dog/a.JPEG", TestJpeg(50, 70, 20));
  WriteFile(dir / "train/dog/sub/c.jpg", TestJpeg(40, 40, 30));
  WriteFile(dir / "train/dog/notes.txt", "not an image");
  WriteFile(dir / "train/cat/z.jpg", TestJpeg(300, 250, 40));
  WriteFile(dir / "val/cat/v.jpg", TestJpeg(100, 80, 50));
  WriteFile(dir / "val/dog/w.jpg", TestJpeg(80, 100, 60));
}

TEST(ImageFolderDatasetTest, OrdersClassesAndFilesLikeTorchvision) {
  TempDir dir;
  MakeImageFolder(dir);
  absl::StatusOr<DatasetPair> data =
      OpenDatasets(*ParseDataSpec("imagefolder:" + dir.path()), DataOptions{std::nullopt, 5, true});
  ASSERT_TRUE(data.ok()) << data.status();
  auto* train = dynamic_cast<ImageFolderDataset*>(data->train.get());
  ASSERT_NE(train, nullptr);
  EXPECT_EQ(train->classes(), (std::vector<std::string>{"cat", "dog"}));
  ASSERT_EQ(train->size(), 4);
  const std::vector<std::string> expected = {"train/cat/z.jpg", "train/dog/a.JPEG",
                                             "train/dog/b.jpg", "train/dog/sub/c.jpg"};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(train->samples()[i].path, dir / expected[i]);
    EXPECT_EQ(train->samples()[i].label, i == 0 ? 0 : 1);
  }
  EXPECT_EQ(data->test->size(), 2);
  EXPECT_EQ(data->test->num_classes(), 2);

  // Train transform: deterministic per (seed, epoch, index), varies with the epoch.
  absl::StatusOr<Example> e0 = train->Get(0, 0);
  absl::StatusOr<Example> e0_again = train->Get(0, 0);
  absl::StatusOr<Example> e1 = train->Get(0, 1);
  ASSERT_TRUE(e0.ok()) << e0.status();
  EXPECT_EQ(e0->image.sizes(), (std::vector<int64_t>{3, 224, 224}));
  EXPECT_EQ(e0->label, 0);
  EXPECT_TRUE(at::equal(e0->image, e0_again->image));
  EXPECT_FALSE(at::equal(e0->image, e1->image));
  // The red channel carries the tag (40), whatever the crop.
  EXPECT_NEAR(e0->image[0].mean().item<float>(), (40 / 255.0 - 0.485) / 0.229, 0.2);

  // Eval transform on the val split.
  absl::StatusOr<Batch> val = data->test->GetBatch({1, 0}, 0);
  ASSERT_TRUE(val.ok()) << val.status();
  EXPECT_EQ(val->images.sizes(), (std::vector<int64_t>{2, 3, 224, 224}));
  EXPECT_EQ(val->labels[0].item<int64_t>(), 1);
  EXPECT_TRUE(at::equal(data->test->Get(1, 0)->image, data->test->Get(1, 7)->image));
}

TEST(ImageFolderDatasetTest, ReportsBadFoldersAndFiles) {
  TempDir dir;
  MakeImageFolder(dir);
  WriteFile(dir / "train/dog/broken.jpg", "garbage, not a jpeg");
  ImageFolderDataset::Options options;
  absl::StatusOr<std::unique_ptr<ImageFolderDataset>> train =
      ImageFolderDataset::Open(dir / "train", options);
  ASSERT_TRUE(train.ok());
  ASSERT_EQ((*train)->samples()[3].path, dir / "train/dog/broken.jpg");
  absl::Status bad = (*train)->Get(3, 0).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(bad.message().rfind(dir / "train/dog/broken.jpg: cannot decode JPEG", 0), 0u) << bad;
  EXPECT_EQ((*train)->GetBatch({0, 3}, 0).status(), bad);

  EXPECT_EQ(ImageFolderDataset::Open(dir / "nope", options).status().code(),
            absl::StatusCode::kNotFound);
  WriteFile(dir / "train/fish/x.png", "png");
  absl::Status png = ImageFolderDataset::Open(dir / "train", options).status();
  EXPECT_NE(png.message().find("x.png: only JPEG images are supported"), std::string::npos) << png;
  std::remove((dir / "train/fish/x.png").c_str());
  absl::Status empty = ImageFolderDataset::Open(dir / "train", options).status();
  EXPECT_NE(empty.message().find("fish: no JPEG files"), std::string::npos) << empty;
  // A val class the train split does not have.
  options.classes = {"cat"};
  absl::Status extra = ImageFolderDataset::Open(dir / "val", options).status();
  EXPECT_NE(extra.message().find("not present in the training set"), std::string::npos) << extra;
}

// A directory walk that follows symlinks must end: two loop links (each leading back to the
// root) hung a job for more than 90 s. A folder reached a second time is refused, naming it.
TEST(ImageFolderDatasetTest, RefusesSymlinkLoopsPromptly) {
  TempDir dir;
  MakeImageFolder(dir);
  ASSERT_EQ(::symlink("..", (dir / "train/dog/sub/up").c_str()), 0);
  ASSERT_EQ(::symlink("..", (dir / "train/cat/back").c_str()), 0);
  auto open = std::async(std::launch::async, [&] {
    return ImageFolderDataset::Open(dir / "train", ImageFolderDataset::Options()).status();
  });
  if (open.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "the walk did not end within 20 s";
    std::_Exit(1);  // the walk cannot be cancelled
  }
  const absl::Status st = open.get();
  ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_EQ(st.message(), dir / "train/cat/back: leads back to " + dir / "train" +
                              " (a symlink loop, or a second link to the same folder); refusing "
                              "to walk it again");
  ::unlink((dir / "train/cat/back").c_str());
  const absl::Status one = ImageFolderDataset::Open(dir / "train", {}).status();
  EXPECT_EQ(one.message(), dir / "train/dog/sub/up: leads back to " + dir / "train/dog" +
                               " (a symlink loop, or a second link to the same folder); refusing "
                               "to walk it again");
}

// A link to /dev/zero named zero.jpg was read for 66 s until std::bad_alloc: it is refused when
// the folder is opened, naming it; an image over the size bound too.
TEST(ImageFolderDatasetTest, RefusesDevicesAndHugeFilesAtOpen) {
  TempDir dir;
  MakeImageFolder(dir);
  ASSERT_EQ(::symlink("/dev/zero", (dir / "train/cat/zero.jpg").c_str()), 0);
  const auto start = std::chrono::steady_clock::now();
  absl::Status st = ImageFolderDataset::Open(dir / "train", {}).status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_EQ(st.message(),
            dir / "train/cat/zero.jpg: is a character device, expected a regular file");
  ::unlink((dir / "train/cat/zero.jpg").c_str());
  // A sparse file: its size costs nothing on disk.
  {
    WriteFile(dir / "train/cat/huge.jpg", "");
    ASSERT_EQ(::truncate((dir / "train/cat/huge.jpg").c_str(),
                         static_cast<off_t>(kMaxImageFileBytes) + 1),
              0);
  }
  st = ImageFolderDataset::Open(dir / "train", {}).status();
  EXPECT_EQ(st.message(), dir /
                              "train/cat/huge.jpg: larger than the limit of 268435456 bytes "
                              "for one file");
}

// torch's resize of the whole image followed by the center crop: what EvalTransform computed.
at::Tensor ResizeThenCrop(const RgbImage& image, int h, int w, const CropBox& box) {
  at::Tensor hwc = at::from_blob(const_cast<uint8_t*>(image.pixels.data()),
                                 {1, image.height, image.width, 3}, at::TensorOptions(at::kByte))
                       .permute({0, 3, 1, 2});
  at::Tensor resized = hwc;
  if (h != image.height || w != image.width) {
    const std::vector<int64_t> size = {h, w};
    resized = at::_upsample_bilinear2d_aa(hwc.contiguous(at::MemoryFormat::ChannelsLast),
                                          at::OptionalIntArrayRef(size), false,
                                          std::optional<at::ArrayRef<double>>());
  }
  return resized.slice(2, box.top, box.top + box.height)
      .slice(3, box.left, box.left + box.width)
      .contiguous();
}

RgbImage NoiseImage(int width, int height, uint32_t seed) {
  RgbImage image;
  image.width = width;
  image.height = height;
  image.pixels.resize(static_cast<size_t>(width) * height * 3);
  uint32_t x = seed * 2654435761u + 1;
  for (uint8_t& p : image.pixels) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p = static_cast<uint8_t>(x >> 24);
  }
  return image;
}

// Crop before resize: only the window is computed, bit for bit what torch's resize of the whole
// image gives there (upscaling, downscaling, one side kept, windows at the edges).
TEST(ImageTransformsTest, ResizeWindowEqualsTorchsWholeResizeBitForBit) {
  struct Case {
    int w, h, out_w, out_h;
    CropBox box;
  };
  const std::vector<Case> cases = {
      {300, 260, 295, 256, {16, 36, 224, 224}},
      {500, 375, 341, 256, {16, 58, 224, 224}},
      {64, 48, 341, 256, {16, 58, 224, 224}},
      {40, 40, 256, 256, {0, 0, 256, 256}},
      {1, 300, 256, 76800, {38288, 16, 224, 224}},
      {257, 256, 257, 223, {0, 0, 223, 257}},
      {900, 31, 7432, 256, {0, 7200, 256, 232}},
      {33, 1000, 64, 1939, {1900, 0, 39, 64}},
      {1000, 1000, 3, 5, {1, 1, 4, 2}},
      {7, 9, 7, 1200, {500, 0, 700, 7}},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    const RgbImage image = NoiseImage(c.w, c.h, seed++);
    const at::Tensor want = ResizeThenCrop(image, c.out_h, c.out_w, c.box);
    const at::Tensor got = ResizeWindow(image, c.out_h, c.out_w, c.box);
    ASSERT_EQ(got.sizes(), want.sizes()) << c.w << "x" << c.h;
    EXPECT_TRUE(at::equal(got, want))
        << c.w << "x" << c.h << " -> " << c.out_w << "x" << c.out_h << ": "
        << (got.to(at::kInt) - want.to(at::kInt)).abs().max().item<int>() << " levels apart";
  }
  // EvalTransform is the window of the resize, normalized.
  const RgbImage photo = NoiseImage(500, 375, 99);
  const Normalization imagenet = DefaultNormalization(DataSpec::Kind::kImageFolder);
  at::Tensor expected =
      ResizeThenCrop(photo, 256, 341, CropBox{16, 58, 224, 224})[0].to(at::kFloat);
  const float mean[3] = {0.485f, 0.456f, 0.406f};
  const float stddev[3] = {0.229f, 0.224f, 0.225f};
  for (int ch = 0; ch < 3; ++ch) {
    expected[ch].mul_(1.0f / (255.0f * stddev[ch])).add_(-mean[ch] / stddev[ch]);
  }
  EXPECT_TRUE(at::equal(EvalTransform(photo, 256, 224, imagenet), expected));
}

// A 1 x 8000 image resized to a shorter side of 256 is 256 x 2,048,000 pixels (1.5 GB; a 1 x 65500
// JPEG asked for 13 GB): the center crop is computed without it.
TEST(ImageTransformsTest, EvalTransformOfAThinImageCostsTheCropOnly) {
  const RgbImage thin = NoiseImage(8000, 1, 5);
  struct rusage before;
  ::getrusage(RUSAGE_SELF, &before);
  const at::Tensor eval =
      EvalTransform(thin, 256, 224, DefaultNormalization(DataSpec::Kind::kImageFolder));
  struct rusage after;
  ::getrusage(RUSAGE_SELF, &after);
  ASSERT_EQ(eval.sizes(), (std::vector<int64_t>{3, 224, 224}));
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 200 << 10) << "KiB of peak memory";
}

}  // namespace
}  // namespace ddp::data
