// Fuzzes the IDX reader (MNIST / Fashion-MNIST files, raw or gzip; trainer/data/image_files.h).
// The input is split into an image file and a label file. Invariants: a refusal is one DATA_LOSS
// line naming the file; an accepted pair has as many labels as images, every label below the
// class count, and exactly count x height x width pixel bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "fuzz/fuzz_check.h"
#include "trainer/data/image_files.h"

namespace {

void CheckRefusal(const absl::Status& st, const std::string& name) {
  const std::string message(st.message());
  FUZZ_CHECK(absl::IsDataLoss(st), st.ToString());
  FUZZ_CHECK(message.rfind(name + ": ", 0) == 0, message);
  FUZZ_CHECK(message.find('\n') == std::string::npos, message);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddp::fuzz::ByteReader in(data, size);
  const int num_classes = 1 + in.Byte() % 16;
  const size_t split = static_cast<size_t>(in.U64(2));
  const std::string rest(in.Rest());
  const size_t cut = split % (rest.size() + 1);
  std::string images = rest.substr(0, cut);
  if (const absl::Status st = ddp::data::MaybeGunzip("images", &images); !st.ok()) {
    CheckRefusal(st, "images");
    return 0;
  }
  std::string labels = rest.substr(cut);
  if (const absl::Status st = ddp::data::MaybeGunzip("labels", &labels); !st.ok()) {
    CheckRefusal(st, "labels");
    return 0;
  }
  absl::StatusOr<ddp::data::RawImageSet> set =
      ddp::data::ParseIdxPair("images", images, "labels", labels, num_classes);
  if (!set.ok()) {
    const std::string message(set.status().message());
    CheckRefusal(set.status(), message.rfind("labels", 0) == 0 ? "labels" : "images");
    return 0;
  }
  FUZZ_CHECK(set->count >= 0 && set->channels == 1 && set->height >= 0 && set->width >= 0, "shape");
  FUZZ_CHECK(set->labels.size() == static_cast<size_t>(set->count), "label count");
  uint64_t pixels = 0;
  FUZZ_CHECK(!__builtin_mul_overflow(static_cast<uint64_t>(set->count),
                                     static_cast<uint64_t>(set->height), &pixels) &&
                 !__builtin_mul_overflow(pixels, static_cast<uint64_t>(set->width), &pixels),
             "an accepted header overflows");
  FUZZ_CHECK(pixels == set->pixels.size(), "pixel bytes do not match the header");
  for (int64_t label : set->labels) FUZZ_CHECK(label >= 0 && label < num_classes, "label range");
  return 0;
}
