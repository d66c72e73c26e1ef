#include "trainer/data/image_files.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "tests/trainer/data/test_files.h"
#include "trainer/data/jpeg_codec.h"

namespace ddp::data {
namespace {

using testing::Gzip;
using testing::IdxImages;
using testing::IdxLabels;
using testing::TempDir;
using testing::TestJpeg;
using testing::WriteFile;

TEST(ReadIdxPairTest, ReadsRawAndGzipFiles) {
  TempDir dir;
  WriteFile(dir / "img", IdxImages(5, 3, 4));
  WriteFile(dir / "lab", IdxLabels(5));
  WriteFile(dir / "img.gz", Gzip(IdxImages(5, 3, 4)));
  WriteFile(dir / "lab.gz", Gzip(IdxLabels(5)));
  for (const auto& [images, labels] :
       {std::pair{"img", "lab"}, std::pair{"img.gz", "lab.gz"}, std::pair{"img.gz", "lab"}}) {
    absl::StatusOr<RawImageSet> set = ReadIdxPair(dir / images, dir / labels, 10);
    ASSERT_TRUE(set.ok()) << set.status();
    EXPECT_EQ(set->count, 5);
    EXPECT_EQ(set->channels, 1);
    EXPECT_EQ(set->height, 3);
    EXPECT_EQ(set->width, 4);
    ASSERT_EQ(set->pixels.size(), 5u * 12);
    EXPECT_EQ(set->pixels[2 * 12 + 5], (2 * 7 + 5) % 256);
    EXPECT_EQ(set->labels, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  }
}

struct BadIdxCase {
  const char* name;
  std::string images;
  std::string labels;
  absl::StatusCode code;
  const char* bad_file;  // which file the message must name
  const char* message;
};

TEST(ReadIdxPairTest, RejectsCorruptFilesWithOneLineNamingTheFile) {
  const std::string good_images = IdxImages(4, 2, 2);
  const std::string good_labels = IdxLabels(4);
  std::string bad_magic = good_images;
  bad_magic[3] = 0x01;
  std::string bad_label = good_labels;
  bad_label.back() = 12;
  std::string bad_gzip = Gzip(good_images);
  bad_gzip[12] ^= 0x55;
  bad_gzip[13] ^= 0x55;
  const BadIdxCase cases[] = {
      {"bad magic", bad_magic, good_labels, absl::StatusCode::kDataLoss, "img", "bad IDX magic"},
      {"truncated images", good_images.substr(0, good_images.size() - 1), good_labels,
       absl::StatusCode::kDataLoss, "img", "truncated"},
      {"truncated header", good_images.substr(0, 10), good_labels, absl::StatusCode::kDataLoss,
       "img", "truncated IDX header"},
      {"trailing bytes", good_images + "xx", good_labels, absl::StatusCode::kDataLoss, "img",
       "unexpected bytes"},
      {"count mismatch", good_images, IdxLabels(3), absl::StatusCode::kDataLoss, "img",
       "has 4 images but"},
      {"label out of range", good_images, bad_label, absl::StatusCode::kDataLoss, "lab",
       "is not below 10"},
      {"truncated gzip", Gzip(good_images).substr(0, 20), good_labels, absl::StatusCode::kDataLoss,
       "img", "truncated gzip"},
      {"corrupt gzip", bad_gzip, good_labels, absl::StatusCode::kDataLoss, "img", "gzip"},
      {"empty file", "", good_labels, absl::StatusCode::kDataLoss, "img", "truncated"},
  };
  for (const BadIdxCase& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    WriteFile(dir / "img", c.images);
    WriteFile(dir / "lab", c.labels);
    absl::StatusOr<RawImageSet> set = ReadIdxPair(dir / "img", dir / "lab", 10);
    ASSERT_FALSE(set.ok());
    EXPECT_EQ(set.status().code(), c.code) << set.status();
    const std::string message(set.status().message());
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(message.rfind(dir / c.bad_file, 0), 0u) << message;
    EXPECT_NE(message.find(c.message), std::string::npos) << message;
  }
}

TEST(ReadIdxPairTest, MissingFileIsNotFound) {
  TempDir dir;
  WriteFile(dir / "lab", IdxLabels(4));
  absl::StatusOr<RawImageSet> set = ReadIdxPair(dir / "img", dir / "lab", 10);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(set.status().message(), dir / "img" + ": no such file");
}

std::string CifarRecord(int label, int fill) {
  std::string record(1 + 3072, static_cast<char>(fill));
  record[0] = static_cast<char>(label);
  record[1 + 1024] = 7;  // first green pixel
  return record;
}

TEST(ReadCifar10BatchesTest, ConcatenatesBatchesInOrder) {
  TempDir dir;
  WriteFile(dir / "a.bin", CifarRecord(3, 10) + CifarRecord(9, 11));
  WriteFile(dir / "b.bin", CifarRecord(0, 12));
  absl::StatusOr<RawImageSet> set = ReadCifar10Batches({dir / "a.bin", dir / "b.bin"});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->count, 3);
  EXPECT_EQ(set->channels, 3);
  EXPECT_EQ(set->height, 32);
  EXPECT_EQ(set->width, 32);
  EXPECT_EQ(set->labels, (std::vector<int64_t>{3, 9, 0}));
  ASSERT_EQ(set->pixels.size(), 3u * 3072);
  EXPECT_EQ(set->pixels[3072 * 2], 12);
  EXPECT_EQ(set->pixels[3072 + 1024], 7);
}

TEST(ReadCifar10BatchesTest, RejectsBadFiles) {
  TempDir dir;
  WriteFile(dir / "short.bin", CifarRecord(1, 0).substr(0, 3000));
  WriteFile(dir / "label.bin", CifarRecord(10, 0));
  absl::StatusOr<RawImageSet> set = ReadCifar10Batches({dir / "short.bin"});
  EXPECT_EQ(set.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(set.status().message().find(dir / "short.bin"), std::string::npos);
  set = ReadCifar10Batches({dir / "label.bin"});
  EXPECT_EQ(set.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(set.status().message().find("label 10"), std::string::npos);
  set = ReadCifar10Batches({dir / "missing.bin"});
  EXPECT_EQ(set.status().code(), absl::StatusCode::kNotFound);
}

TEST(JpegCodecTest, RoundTripsAndRejectsGarbageAndTruncation) {
  const std::string jpeg = TestJpeg(40, 30, 200);
  absl::StatusOr<RgbImage> image = DecodeJpeg(jpeg, "x.jpg");
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->width, 40);
  EXPECT_EQ(image->height, 30);
  ASSERT_EQ(image->pixels.size(), 40u * 30 * 3);
  EXPECT_NEAR(image->pixels[(15 * 40 + 20) * 3], 200, 6);

  absl::StatusOr<RgbImage> garbage = DecodeJpeg("this is not a jpeg", "bad.jpg");
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(garbage.status().message().rfind("bad.jpg: cannot decode JPEG", 0), 0u)
      << garbage.status();

  absl::StatusOr<RgbImage> truncated = DecodeJpeg(jpeg.substr(0, jpeg.size() / 2), "half.jpg");
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(std::string(truncated.status().message()).rfind("half.jpg: cannot decode JPEG: ", 0),
            0u)
      << truncated.status();
}

// Fuzz finding (fuzz/regressions/idx/header-size-overflow): the byte count an IDX header
// promises (count x rows x cols) overflowed 64 bits (undefined behaviour; a wrapped product
// could even match the payload).
TEST(ParseIdxPairTest, HeaderSizesThatOverflowAreDataLoss) {
  std::string images = IdxImages(1, 1, 1);
  for (size_t i = 4; i < 16; ++i) images[i] = static_cast<char>(0xff);
  absl::StatusOr<RawImageSet> set = ParseIdxPair("img", images, "lab", IdxLabels(1), 10);
  ASSERT_EQ(set.status().code(), absl::StatusCode::kDataLoss) << set.status();
  EXPECT_EQ(set.status().message(),
            "img: header promises 4294967295 x 4294967295 x 4294967295 bytes of data, more than "
            "any file holds");
  // 4294967295 x 4294967295 x 0 is a product of 0, not an overflow: the count mismatch is what
  // is wrong.
  std::string empty = images;
  for (size_t i = 12; i < 16; ++i) empty[i] = 0;
  set = ParseIdxPair("img", empty.substr(0, 16), "lab", IdxLabels(1), 10);
  ASSERT_EQ(set.status().code(), absl::StatusCode::kDataLoss) << set.status();
  EXPECT_NE(set.status().message().find("has 4294967295 images but lab has 1 labels"),
            std::string::npos)
      << set.status();
}

// Sets the size a JPEG's start-of-frame marker claims.
std::string WithClaimedSize(std::string jpeg, int width, int height) {
  for (size_t i = 0; i + 9 < jpeg.size(); ++i) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(jpeg[k]); };
    if (b(i) == 0xff && (b(i + 1) == 0xc0 || b(i + 1) == 0xc2)) {
      jpeg[i + 5] = static_cast<char>(height >> 8);
      jpeg[i + 6] = static_cast<char>(height & 0xff);
      jpeg[i + 7] = static_cast<char>(width >> 8);
      jpeg[i + 8] = static_cast<char>(width & 0xff);
      return jpeg;
    }
  }
  ADD_FAILURE() << "no start-of-frame marker";
  return jpeg;
}

// Fuzz finding (fuzz/regressions/jpeg/progressive-65496x65496-header): a 180-byte progressive
// JPEG that claims 65496 x 65496 pixels made libjpeg allocate 12.9 GB for its coefficients (and
// a baseline one made us allocate 12.9 GB of pixels) before finding the data missing.
TEST(JpegCodecTest, AHugeClaimedSizeIsRefusedBeforeAllocating) {
  const std::string small = TestJpeg(16, 16, 100);
  absl::StatusOr<RgbImage> image = DecodeJpeg(WithClaimedSize(small, 65496, 65496), "big.jpg");
  ASSERT_EQ(image.status().code(), absl::StatusCode::kDataLoss) << image.status();
  EXPECT_EQ(image.status().message(),
            "big.jpg: cannot decode JPEG: it claims 65496x65496 pixels, more than the limit of "
            "178956970");
  const char* source = std::getenv("DDP_SOURCE_DIR");
  ASSERT_NE(source, nullptr) << "DDP_SOURCE_DIR is unset (ctest sets it)";
  const std::string fuzz_input =
      ReadFile(std::string(source) + "/fuzz/regressions/jpeg/progressive-65496x65496-header")
          .value_or("");
  ASSERT_FALSE(fuzz_input.empty());
  image = DecodeJpeg(fuzz_input, "fuzz.jpg");
  EXPECT_EQ(image.status().code(), absl::StatusCode::kDataLoss) << image.status();
  EXPECT_NE(image.status().message().find("more than the limit"), std::string::npos);
  // Within the limit the claim is decoded as libjpeg does (missing rows filled in).
  image = DecodeJpeg(WithClaimedSize(small, 3000, 2000), "wide.jpg");
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->width, 3000);
  EXPECT_EQ(image->pixels.size(), 3000u * 2000 * 3);
  // The limit is a parameter: the same file at its real size but a lower limit.
  image = DecodeJpeg(small, "small.jpg", 255);
  EXPECT_EQ(image.status().code(), absl::StatusCode::kDataLoss) << image.status();
  EXPECT_TRUE(DecodeJpeg(small, "small.jpg", 256).ok());
}

// Every decode path checks the header's claim: the GPU decoder's images are sized by
// ReadJpegInfo, so it refuses a claim over the limit as DecodeJpeg does, naming the file.
TEST(JpegCodecTest, ReadJpegInfoRefusesAClaimOverThePixelLimit) {
  const std::string small = TestJpeg(16, 16, 100);
  absl::StatusOr<JpegInfo> info = ReadJpegInfo(WithClaimedSize(small, 65496, 65496), "big.jpg");
  ASSERT_EQ(info.status().code(), absl::StatusCode::kDataLoss) << info.status();
  EXPECT_EQ(info.status().message(),
            "big.jpg: cannot decode JPEG: it claims 65496x65496 pixels, more than the limit of "
            "178956970");
  info = ReadJpegInfo(WithClaimedSize(small, 65500, 1), "wide.jpg");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->width, 65500);
  EXPECT_EQ(ReadJpegInfo(small, "small.jpg", 255).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(CheckJpegPixels(16, 16, "small.jpg", 256).ok());
}

// A link to /dev/zero named like a data file was read until std::bad_alloc (66 s), and the error
// did not name the file: a device is refused at once, and every read is bounded.
TEST(ReadFileTest, RefusesDevicesAndBoundsTheSize) {
  TempDir dir;
  ASSERT_EQ(::symlink("/dev/zero", (dir / "zero.jpg").c_str()), 0);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::string> zero = ReadFile(dir / "zero.jpg");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  ASSERT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument) << zero.status();
  EXPECT_EQ(zero.status().message(),
            dir / "zero.jpg: is a character device, expected a regular file");
  EXPECT_EQ(ReadFile(dir.path()).status().code(), absl::StatusCode::kInvalidArgument);

  WriteFile(dir / "big.bin", std::string(3 << 20, 'x'));
  absl::StatusOr<std::string> big = ReadFile(dir / "big.bin", 1 << 20);
  ASSERT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument) << big.status();
  EXPECT_EQ(big.status().message(),
            dir / "big.bin: larger than the limit of 1048576 bytes for one file");
  EXPECT_EQ(ReadFile(dir / "big.bin", 3 << 20).value_or("").size(), size_t{3} << 20);
  // The readers of the data sets use the same bound.
  absl::Status idx = ReadIdxPair(dir / "zero.jpg", dir / "big.bin", 10).status();
  EXPECT_EQ(idx.message(), dir / "zero.jpg: is a character device, expected a regular file");
}

// gunzip had no output bound: a small file of concatenated gzip members inflates past
// kMaxGunzipBytes and is refused, naming the file, instead of filling memory.
TEST(ReadIdxPairTest, AGzipBombIsRefusedAtTheOutputBound) {
  const std::string member = Gzip(std::string(64 << 20, '\0'));
  std::string bomb;
  for (size_t i = 0; i <= kMaxGunzipBytes / (64 << 20); ++i) bomb += member;
  ASSERT_LT(bomb.size(), size_t{4} << 20);
  absl::Status st = MaybeGunzip("bomb.gz", &bomb);
  ASSERT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_EQ(st.message(),
            "bomb.gz: gzip stream inflates to more than the limit of 1073741824 "
            "bytes");
  std::string small = Gzip(std::string(4096, 'a'));
  EXPECT_EQ(MaybeGunzip("small.gz", &small, 4095).code(), absl::StatusCode::kDataLoss);
  small = Gzip(std::string(4096, 'a'));
  ASSERT_TRUE(MaybeGunzip("small.gz", &small, 4096).ok());
  EXPECT_EQ(small, std::string(4096, 'a'));
}

}  // namespace
}  // namespace ddp::data
