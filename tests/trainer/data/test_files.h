// Helpers for the data tests: a temporary folder and small file writers (raw, gzip, JPEG).
#ifndef SLURM_DDP_TESTS_TRAINER_DATA_TEST_FILES_H_
#define SLURM_DDP_TESTS_TRAINER_DATA_TEST_FILES_H_

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/data/jpeg_codec.h"

namespace ddp::data::testing {

// POSIX file-system calls only: libtorch.so interposes broken std::filesystem symbols (see
// trainer/data/image_files.h).

// A fresh folder under $TMPDIR (or /tmp), removed with its contents at destruction.
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/ddp-test-XXXXXX";
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    ::nftw(
        path_.c_str(),
        [](const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }, 16,
        FTW_DEPTH | FTW_PHYS);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// mkdir -p of the folder that holds `path`.
inline void MakeParents(const std::string& path) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    ::mkdir(path.substr(0, slash).c_str(), 0755);
  }
}

inline bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  MakeParents(path);
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::string Gzip(const std::string& data) {
  std::string out;
  z_stream zs{};
  deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  out.resize(deflateBound(&zs, data.size()) + 32);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

inline std::string BigEndian32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

// IDX image file bytes: n images of rows x cols, pixel (i, r, c) = (i * 7 + r * cols + c) % 256.
inline std::string IdxImages(uint32_t n, uint32_t rows, uint32_t cols) {
  std::string s = BigEndian32(0x803) + BigEndian32(n) + BigEndian32(rows) + BigEndian32(cols);
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t p = 0; p < rows * cols; ++p) s.push_back(static_cast<char>((i * 7 + p) % 256));
  }
  return s;
}

// IDX label file bytes: label i = i % 10.
inline std::string IdxLabels(uint32_t n) {
  std::string s = BigEndian32(0x801) + BigEndian32(n);
  for (uint32_t i = 0; i < n; ++i) s.push_back(static_cast<char>(i % 10));
  return s;
}

// A JPEG of a horizontal gradient whose red channel encodes `tag`.
inline std::string TestJpeg(int width, int height, int tag) {
  RgbImage image;
  image.width = width;
  image.height = height;
  image.pixels.resize(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &image.pixels[(static_cast<size_t>(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(tag);
      p[1] = static_cast<uint8_t>(x * 255 / width);
      p[2] = static_cast<uint8_t>(y * 255 / height);
    }
  }
  absl::StatusOr<std::string> jpeg = EncodeJpeg(image, 90);
  EXPECT_TRUE(jpeg.ok()) << jpeg.status();
  return jpeg.ok() ? *jpeg : std::string();
}

}  // namespace ddp::data::testing

#endif  // SLURM_DDP_TESTS_TRAINER_DATA_TEST_FILES_H_
