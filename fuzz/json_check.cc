#include "fuzz/json_check.h"

#include <cstdint>

#include "fuzz/fuzz_check.h"

namespace ddp::fuzz {
namespace {

class Checker {
 public:
  Checker(std::string_view text, std::vector<std::string>* strings)
      : text_(text), strings_(strings) {}

  bool Run(std::string* error) {
    SkipSpace();
    bool ok = Value(0);
    if (ok) {
      SkipSpace();
      if (pos_ != text_.size()) ok = Fail("text after the value");
    }
    if (!ok) *error = error_ + " at byte " + std::to_string(pos_);
    return ok;
  }

 private:
  static constexpr int kMaxDepth = 64;

  bool Fail(const char* why) {
    if (error_.empty()) error_ = why;
    return false;
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  void SkipSpace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r')) {
      ++pos_;
    }
  }
  bool Literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return Fail("bad literal");
    pos_ += word.size();
    return true;
  }

  bool Value(int depth) {
    if (depth > kMaxDepth) return Fail("nested too deeply");
    switch (Peek()) {
      case '{':
        return Object(depth);
      case '[':
        return Array(depth);
      case '"':
        return String();
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        return Number();
    }
  }

  bool Object(int depth) {
    ++pos_;
    SkipSpace();
    if (Peek() == '}') {
      ++pos_;
      return true;
    }
    for (;;) {
      SkipSpace();
      if (Peek() != '"') return Fail("object key is not a string");
      if (!String()) return false;
      SkipSpace();
      if (Peek() != ':') return Fail("no ':' after a key");
      ++pos_;
      SkipSpace();
      if (!Value(depth + 1)) return false;
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == '}') {
        ++pos_;
        return true;
      }
      return Fail("no ',' or '}' in an object");
    }
  }

  bool Array(int depth) {
    ++pos_;
    SkipSpace();
    if (Peek() == ']') {
      ++pos_;
      return true;
    }
    for (;;) {
      SkipSpace();
      if (!Value(depth + 1)) return false;
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == ']') {
        ++pos_;
        return true;
      }
      return Fail("no ',' or ']' in an array");
    }
  }

  bool Hex4(uint32_t* v) {
    *v = 0;
    for (int i = 0; i < 4; ++i) {
      if (AtEnd()) return Fail("short \\u escape");
      const char c = text_[pos_++];
      *v <<= 4;
      if (c >= '0' && c <= '9') {
        *v |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        *v |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        *v |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return Fail("bad hex digit in \\u escape");
      }
    }
    return true;
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  bool String() {
    ++pos_;  // the opening quote
    std::string decoded;
    const size_t start = pos_;
    for (;;) {
      if (AtEnd()) return Fail("unterminated string");
      const char c = text_[pos_];
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) return Fail("raw control character in a string");
      if (c != '\\') {
        decoded.push_back(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (AtEnd()) return Fail("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          decoded.push_back(e);
          break;
        case 'b':
          decoded.push_back('\b');
          break;
        case 'f':
          decoded.push_back('\f');
          break;
        case 'n':
          decoded.push_back('\n');
          break;
        case 'r':
          decoded.push_back('\r');
          break;
        case 't':
          decoded.push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xdc00 && cp <= 0xdfff) return Fail("lone low surrogate");
          if (cp >= 0xd800 && cp <= 0xdbff) {
            uint32_t low = 0;
            if (text_.substr(pos_, 2) != "\\u") return Fail("lone high surrogate");
            pos_ += 2;
            if (!Hex4(&low)) return false;
            if (low < 0xdc00 || low > 0xdfff) return Fail("bad low surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          }
          AppendUtf8(cp, &decoded);
          break;
        }
        default:
          return Fail("bad escape");
      }
    }
    if (!IsStrictUtf8(text_.substr(start, pos_ - start))) return Fail("string is not UTF-8");
    ++pos_;  // the closing quote
    if (strings_ != nullptr) strings_->push_back(std::move(decoded));
    return true;
  }

  bool Digits() {
    const size_t start = pos_;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') ++pos_;
    return pos_ > start;
  }

  bool Number() {
    if (Peek() == '-') ++pos_;
    if (Peek() == '0') {
      ++pos_;
    } else if (!Digits()) {
      return Fail("not a value");
    }
    if (Peek() == '.') {
      ++pos_;
      if (!Digits()) return Fail("no digits after '.'");
    }
    if (Peek() == 'e' || Peek() == 'E') {
      ++pos_;
      if (Peek() == '+' || Peek() == '-') ++pos_;
      if (!Digits()) return Fail("no digits in the exponent");
    }
    return true;
  }

  std::string_view text_;
  std::vector<std::string>* strings_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace

bool CheckJson(std::string_view text, std::vector<std::string>* strings, std::string* error) {
  return Checker(text, strings).Run(error);
}

}  // namespace ddp::fuzz
