// JPEG decoding (and encoding, for tests and benchmarks) with libjpeg-turbo. Torch-free.
//
// Decoding always yields 8-bit RGB (grayscale is expanded, like PIL's convert("RGB")). A file that
// libjpeg cannot decode, or that ends early ("Premature end of JPEG file", which PIL also refuses),
// is a DataLoss error naming the file. Other libjpeg warnings are ignored, as PIL does.
//
// Thread safety: free functions; each call uses its own libjpeg state.
#ifndef SLURM_DDP_TRAINER_DATA_JPEG_CODEC_H_
#define SLURM_DDP_TRAINER_DATA_JPEG_CODEC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ddp::data {

// An 8-bit RGB image, rows top to bottom, pixels interleaved (HWC).
struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // height * width * 3
};

// The most pixels a JPEG may claim: PIL's decompression-bomb limit (2 x 89,478,485), far above
// any photograph in ImageNet. A file claiming more is refused before anything is allocated for
// it, and libjpeg's own buffers (a progressive image keeps all its coefficients) are capped to
// what an image of that size needs.
inline constexpr int64_t kMaxJpegPixels = 178956970;

// OK when a width x height image is within `max_pixels`; otherwise DataLoss naming `name`. Every
// decode path checks the header's claim with it before allocating anything for the image: the
// CPU decoder (DecodeJpeg) and the GPU decoder (through ReadJpegInfo, which the GPU loader reads
// each file's size with).
absl::Status CheckJpegPixels(int64_t width, int64_t height, const std::string& name,
                             int64_t max_pixels = kMaxJpegPixels);

// Decodes `bytes`; `name` (usually the path) appears in error messages. A file that claims more
// than `max_pixels` pixels is a DataLoss error.
absl::StatusOr<RgbImage> DecodeJpeg(std::string_view bytes, const std::string& name,
                                    int64_t max_pixels = kMaxJpegPixels);

// What a JPEG's frame header (SOFn marker) says, read without decoding.
struct JpegInfo {
  int width = 0;
  int height = 0;
  int components = 0;        // 1 grey, 3 YCbCr, 4 CMYK/YCCK
  bool progressive = false;  // SOF2/SOF6/SOF10/SOF14
  bool arithmetic = false;   // SOF9..SOF15 (arithmetic coding)
};

// Walks the markers up to the first frame header. DataLoss naming `name` if `bytes` is not a
// JPEG, is truncated before the frame header, has a zero-sized or malformed frame, or claims more
// than `max_pixels` pixels (CheckJpegPixels).
absl::StatusOr<JpegInfo> ReadJpegInfo(std::string_view bytes, const std::string& name,
                                      int64_t max_pixels = kMaxJpegPixels);

// Encodes an RGB image (quality 1..100).
absl::StatusOr<std::string> EncodeJpeg(const RgbImage& image, int quality);

}  // namespace ddp::data

#endif  // SLURM_DDP_TRAINER_DATA_JPEG_CODEC_H_
