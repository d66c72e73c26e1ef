// What the fuzz harnesses share: FUZZ_CHECK (an invariant that must hold for every input; on
// failure it prints what broke and aborts, which libFuzzer and the standalone driver report as a
// crash with the input saved), a reader that turns fuzz bytes into structured values, and an
// independent UTF-8 check (the oracle is deliberately not the code under test).
//
// Thread safety: single-threaded harnesses.
#ifndef SLURM_DDP_FUZZ_FUZZ_CHECK_H_
#define SLURM_DDP_FUZZ_FUZZ_CHECK_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#define FUZZ_CHECK(cond, what)                                                                \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s: %s\n", __FILE__, __LINE__, #cond, \
                   std::string(what).c_str());                                                \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

// libFuzzer's entry point, defined by each harness.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace ddp::fuzz {

// Consumes fuzz bytes front to back; past the end everything reads as zero / empty.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  bool Bool() { return (Byte() & 1) != 0; }
  uint64_t U64(int bytes = 8) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | Byte();
    return v;
  }
  int64_t I64() { return static_cast<int64_t>(U64()); }
  // Mostly small numbers, sometimes the extremes.
  int64_t Int() {
    switch (Byte() % 4) {
      case 0:
        return static_cast<int8_t>(Byte());
      case 1:
        return static_cast<int16_t>(U64(2));
      case 2:
        return static_cast<int32_t>(U64(4));
      default:
        return I64();
    }
  }
  double Double() {
    switch (Byte() % 4) {
      case 0:
        return static_cast<int8_t>(Byte()) / 4.0;
      case 1:
        return static_cast<double>(static_cast<int32_t>(U64(4))) / 16.0;
      default: {
        const uint64_t bits = U64();
        double d;
        std::memcpy(&d, &bits, sizeof(d));  // NaN, Inf, denormals and all
        return d;
      }
    }
  }
  // A string of up to `max` bytes: a length byte, then raw bytes.
  std::string Str(size_t max = 64) {
    const size_t want = Byte() % (max + 1);
    const size_t n = want < size_ - pos_ ? want : size_ - pos_;
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  std::string_view Rest() {
    std::string_view r(reinterpret_cast<const char*>(data_ + pos_), size_ - pos_);
    pos_ = size_;
    return r;
  }
  size_t remaining() const { return size_ - pos_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF.
inline bool IsStrictUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    for (int k = 1; k <= n; ++k) {
      if (i + static_cast<size_t>(k) >= s.size()) return false;
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += static_cast<size_t>(n) + 1;
  }
  return true;
}

}  // namespace ddp::fuzz

#endif  // SLURM_DDP_FUZZ_FUZZ_CHECK_H_
