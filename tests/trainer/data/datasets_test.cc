// The datasets, transforms and --data/--normalize parsing.
#include <cstdio>
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

}  // namespace
}  // namespace ddp::data
