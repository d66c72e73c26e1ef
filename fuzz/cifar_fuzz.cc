// Fuzzes the CIFAR-10 batch reader (trainer/data/image_files.h): the input is split into two
// batch files appended to one set. Invariants: a refusal is one DATA_LOSS line naming the batch;
// an accepted set holds 3x32x32 pixel bytes and one label below 10 per image.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "fuzz/fuzz_check.h"
#include "trainer/data/image_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ddp::fuzz::ByteReader in(data, size);
  const size_t split = static_cast<size_t>(in.U64(2));
  const std::string rest(in.Rest());
  const size_t cut = split % (rest.size() + 1);
  ddp::data::RawImageSet set;
  int batch = 0;
  for (const std::string& bytes : {rest.substr(0, cut), rest.substr(cut)}) {
    const std::string name = "batch" + std::to_string(batch++);
    const int64_t before = set.count;
    const absl::Status st = ddp::data::AppendCifar10Batch(name, bytes, &set);
    if (!st.ok()) {
      const std::string message(st.message());
      FUZZ_CHECK(absl::IsDataLoss(st), st.ToString());
      FUZZ_CHECK(message.rfind(name + ": ", 0) == 0, message);
      FUZZ_CHECK(message.find('\n') == std::string::npos, message);
      return 0;
    }
    FUZZ_CHECK(set.count > before, "an accepted batch added no image");
    FUZZ_CHECK(set.channels == 3 && set.height == 32 && set.width == 32, "shape");
    FUZZ_CHECK(set.labels.size() == static_cast<size_t>(set.count), "label count");
    FUZZ_CHECK(set.pixels.size() == static_cast<size_t>(set.count) * 3 * 32 * 32, "pixel count");
    for (int64_t label : set.labels) FUZZ_CHECK(label >= 0 && label < 10, "label range");
  }
  return 0;
}
