// Fuzzes the JPEG reader (trainer/data/jpeg_codec.h: header, size checks, libjpeg's error
// handling through longjmp). Invariants: a refusal is one DATA_LOSS line naming the file; a
// decoded image has a positive size and exactly width x height x 3 bytes; and a file that claims
// a huge image must not make the reader allocate for it (libFuzzer's -malloc_limit_mb catches
// that, as would the OOM killer on a data loader). The harness decodes with a 4-megapixel limit
// instead of the default 179: the same checks, at a cost per run that keeps the fuzzer fast (a
// legitimate progressive image at the default limit needs over a gigabyte).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "fuzz/fuzz_check.h"
#include "trainer/data/jpeg_codec.h"

namespace {
constexpr int64_t kMaxPixels = int64_t{1} << 22;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<ddp::data::RgbImage> image =
      ddp::data::DecodeJpeg(bytes, "fuzz.jpg", kMaxPixels);
  if (!image.ok()) {
    const std::string message(image.status().message());
    FUZZ_CHECK(absl::IsDataLoss(image.status()), image.status().ToString());
    FUZZ_CHECK(message.rfind("fuzz.jpg: ", 0) == 0, message);
    FUZZ_CHECK(message.find('\n') == std::string::npos, message);
    return 0;
  }
  FUZZ_CHECK(image->width > 0 && image->height > 0, "empty image accepted");
  FUZZ_CHECK(int64_t{image->width} * image->height <= kMaxPixels, "image above the limit");
  FUZZ_CHECK(image->pixels.size() ==
                 static_cast<size_t>(image->width) * static_cast<size_t>(image->height) * 3,
             "pixel bytes do not match the size");
  return 0;
}
