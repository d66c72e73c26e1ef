// The GPU JPEG pipeline's CPU-testable parts: the JPEG header reader, the tensor transforms (run
// here on the CPU against the CPU pipeline's transforms), the run-time nvJPEG loader's errors, and
// the decoder's refusal without a device. The decode itself runs in bench/gpu/run.sh on a GPU.
#include <ATen/ATen.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/data/crop_resize.h"
#include "trainer/data/gpu_jpeg_decoder.h"
#include "trainer/data/image_transforms.h"
#include "trainer/data/jpeg_codec.h"
#include "trainer/data/nvjpeg_library.h"
#include "trainer/data/sample_rng.h"
#include "trainer/data/tensor_transforms.h"

namespace ddp::data {
namespace {

// A smooth, non-constant test image (resizing and cropping bugs show up as large differences).
RgbImage Pattern(int width, int height, int seed) {
  RgbImage image;
  image.width = width;
  image.height = height;
  image.pixels.resize(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &image.pixels[(static_cast<size_t>(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>((x * 255) / std::max(1, width - 1));
      p[1] = static_cast<uint8_t>((y * 255) / std::max(1, height - 1));
      p[2] = static_cast<uint8_t>((x * 7 + y * 13 + seed * 31) % 256);
    }
  }
  return image;
}

at::Tensor Hwc(const RgbImage& image) {
  return at::from_blob(const_cast<uint8_t*>(image.pixels.data()), {image.height, image.width, 3},
                       at::TensorOptions(at::kByte))
      .clone();
}

const Normalization kImagenet{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};

// Largest difference in grey levels between two normalized images.
double GreyLevels(const at::Tensor& a, const at::Tensor& b) {
  const double min_std = 0.224;
  return (a - b).abs().max().item<double>() * 255.0 * min_std;
}

TEST(JpegInfoTest, ReadsSizeAndComponentsOfEncodedImages) {
  for (auto [w, h] : std::vector<std::pair<int, int>>{{1, 1}, {500, 375}, {333, 517}, {64, 8}}) {
    auto bytes = EncodeJpeg(Pattern(w, h, 1), 90);
    ASSERT_TRUE(bytes.ok());
    auto info = ReadJpegInfo(*bytes, "x.jpg");
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->width, w);
    EXPECT_EQ(info->height, h);
    EXPECT_EQ(info->components, 3);
    EXPECT_FALSE(info->progressive);
  }
}

TEST(JpegInfoTest, RefusesWhatIsNotAJpegFrame) {
  auto bytes = EncodeJpeg(Pattern(40, 30, 2), 90);
  ASSERT_TRUE(bytes.ok());
  const std::string good = *bytes;
  std::vector<std::pair<std::string, std::string>> cases = {
      {"empty", ""},
      {"png", std::string("\x89PNG\r\n\x1a\n", 8) + good.substr(8)},
      {"soi only", good.substr(0, 2)},
      {"cut in a segment", good.substr(0, 30)},
      {"no marker after soi", std::string("\xFF\xD8\x00\x00\x00\x00", 6)},
      {"image data first", std::string("\xFF\xD8\xFF\xDA\x00\x02", 6)},
      {"zero length segment", std::string("\xFF\xD8\xFF\xE0\x00\x00", 6)},
  };
  // A frame header that claims a zero width.
  std::string zero = good;
  const size_t sof = zero.find("\xFF\xC0");
  ASSERT_NE(sof, std::string::npos);
  zero[sof + 7] = 0;
  zero[sof + 8] = 0;
  cases.push_back({"zero width", zero});
  for (const auto& [what, data] : cases) {
    auto info = ReadJpegInfo(data, "bad.jpg");
    EXPECT_FALSE(info.ok()) << what;
    if (!info.ok()) {
      EXPECT_EQ(info.status().code(), absl::StatusCode::kDataLoss) << what;
      EXPECT_NE(info.status().message().find("bad.jpg"), absl::string_view::npos) << what;
    }
  }
}

// The GPU pipeline's transform code, run on the CPU, against the CPU pipeline: the same crop and
// flip from the same random stream, and pixels within one grey level.
TEST(TensorTransformsTest, TrainPlanMatchesTheCpuPipeline) {
  int flips = 0;
  for (int index = 0; index < 24; ++index) {
    const RgbImage image = Pattern(180 + index * 7, 140 + index * 3, index);
    SampleRng cpu_rng(7, 3, index);
    const at::Tensor cpu = TrainTransform(image, 64, cpu_rng, kImagenet);
    SampleRng plan_rng(7, 3, index);
    const TransformPlan plan = PlanTrain(image.height, image.width, 64, plan_rng);
    flips += plan.flip ? 1 : 0;
    at::Tensor batch = at::full({1, 3, 64, 64}, -1000.0f);
    ApplyPlan(Hwc(image), plan, batch[0]);
    NormalizeBatch(batch, kImagenet);
    ASSERT_EQ(cpu.sizes(), batch[0].sizes());
    EXPECT_LE(GreyLevels(cpu, batch[0]), 1.01) << "index " << index;
  }
  EXPECT_GT(flips, 0);
  EXPECT_LT(flips, 24);
}

TEST(TensorTransformsTest, EvalPlanMatchesTheCpuPipeline) {
  for (auto [w, h] : std::vector<std::pair<int, int>>{{300, 200}, {200, 300}, {256, 256}}) {
    const RgbImage image = Pattern(w, h, 5);
    const at::Tensor cpu = EvalTransform(image, 72, 64, kImagenet);
    const TransformPlan plan = PlanEval(h, w, 72, 64);
    at::Tensor batch = at::zeros({1, 3, 64, 64});
    ApplyPlan(Hwc(image), plan, batch[0]);
    NormalizeBatch(batch, kImagenet);
    EXPECT_LE(GreyLevels(cpu, batch[0]), 1.01) << w << "x" << h;
  }
}

TEST(TensorTransformsTest, UnresizedCropIsExactAndNormalizationIsTheCpuArithmetic) {
  // A crop that needs no resize is copied exactly; normalization then matches bit for bit.
  const RgbImage image = Pattern(64, 64, 9);
  TransformPlan plan;
  plan.source = CropBox{0, 0, 64, 64};
  plan.resize_h = plan.resize_w = 64;
  plan.output = CropBox{0, 0, 64, 64};
  at::Tensor batch = at::zeros({1, 3, 64, 64});
  ApplyPlan(Hwc(image), plan, batch[0]);
  NormalizeBatch(batch, kImagenet);
  const at::Tensor cpu = EvalTransform(image, 64, 64, kImagenet);
  EXPECT_TRUE(at::equal(cpu, batch[0]));
}

// The fused kernel's per-pixel function, run on the host over whole images, against the ATen
// reference path: the arithmetic the GPU runs, checked here without a GPU.
at::Tensor FusedOnHost(const RgbImage& image, const TransformPlan& plan, int size) {
  const CropResizeJob job = JobOf(plan, image.pixels.data(), image.height, image.width);
  const ChannelAffine affine = AffineOf(kImagenet);
  at::Tensor out = at::empty({3, size, size});
  float* p = out.data_ptr<float>();
  for (int y = 0; y < size; ++y) {
    for (int x = 0; x < size; ++x) {
      float v[3];
      CropResizePixel(job, size, y, x, affine, v);
      for (int c = 0; c < 3; ++c) p[(c * size + y) * size + x] = v[c];
    }
  }
  return out;
}

at::Tensor Reference(const RgbImage& image, const TransformPlan& plan, int size) {
  at::Tensor batch = at::zeros({1, 3, size, size});
  ApplyPlan(Hwc(image), plan, batch[0]);
  NormalizeBatch(batch, kImagenet);
  return batch[0];
}

TEST(CropResizeTest, FusedPixelMatchesTheReferenceForTrainAndEvalPlans) {
  double worst = 0;
  int64_t exact = 0;
  int64_t pixels = 0;
  for (int index = 0; index < 16; ++index) {
    const RgbImage image = Pattern(150 + index * 13, 120 + index * 5, index);
    SampleRng rng(11, 0, index);
    for (const TransformPlan& plan : {PlanTrain(image.height, image.width, 48, rng),
                                      PlanEval(image.height, image.width, 56, 48)}) {
      const at::Tensor fused = FusedOnHost(image, plan, 48);
      const at::Tensor ref = Reference(image, plan, 48);
      worst = std::max(worst, GreyLevels(fused, ref));
      exact += at::eq(fused, ref).sum().item<int64_t>();
      pixels += fused.numel();
    }
  }
  EXPECT_LE(worst, 1.01);
  // Rounding to the 0..255 grid makes nearly every value identical, not just close.
  EXPECT_GT(static_cast<double>(exact) / static_cast<double>(pixels), 0.99);
}

TEST(CropResizeTest, UpscaledCropsAndFlipsMatchToo) {
  // A small crop blown up (scale < 1: plain bilinear) and flipped.
  const RgbImage image = Pattern(40, 30, 3);
  TransformPlan plan;
  plan.source = CropBox{5, 7, 12, 20};
  plan.resize_h = plan.resize_w = 64;
  plan.output = CropBox{0, 0, 64, 64};
  plan.flip = true;
  EXPECT_LE(GreyLevels(FusedOnHost(image, plan, 64), Reference(image, plan, 64)), 1.01);
}

TEST(NvjpegLibraryTest, NamesStatusCodes) {
  EXPECT_EQ(nvjpeg::StatusName(0), "NVJPEG_STATUS_SUCCESS (0)");
  EXPECT_EQ(nvjpeg::StatusName(3), "NVJPEG_STATUS_BAD_JPEG (3)");
  EXPECT_EQ(nvjpeg::StatusName(99), "NVJPEG_STATUS_UNKNOWN (99)");
}

TEST(GpuJpegDecoderTest, RefusesClearlyWithoutADevice) {
  if (at::hasCUDA()) GTEST_SKIP() << "a CUDA device is present: bench/gpu/run.sh covers it";
  auto decoder = GpuJpegDecoder::Create(0);
  ASSERT_FALSE(decoder.ok());
  EXPECT_EQ(decoder.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(decoder.status().message().empty());
}

}  // namespace
}  // namespace ddp::data
