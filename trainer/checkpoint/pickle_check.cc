#include "trainer/checkpoint/pickle_check.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ddp {
namespace {

enum class Arg {
  kNone,
  kFixed,     // `size` bytes
  kLength,    // a little-endian unsigned length of `size` bytes, then that many bytes
  kLine,      // text up to a newline
  kTwoLines,  // two newline-terminated lines (GLOBAL, INST)
  kPut,       // a memo index of `size` bytes (must stay below the program's length)
  kFrame,     // a length of `size` bytes that must not exceed what follows
  kInvalid,
};

struct Opcode {
  Arg arg;
  int size;
};

// Argument of each opcode of pickle protocols 0-5 (Python's pickletools).
Opcode Describe(unsigned char op) {
  switch (op) {
    case '(':
    case '.':
    case '0':
    case '1':
    case '2':
    case 'N':
    case 'R':
    case 'a':
    case 'b':
    case 'd':
    case '}':
    case 'e':
    case 'l':
    case ']':
    case 'o':
    case 's':
    case 'u':
    case 't':
    case ')':
    case 'Q':
    case 0x81:
    case 0x85:
    case 0x86:
    case 0x87:
    case 0x88:
    case 0x89:
    case 0x8f:
    case 0x90:
    case 0x91:
    case 0x92:
    case 0x93:
    case 0x94:
    case 0x97:
    case 0x98:
      return {Arg::kNone, 0};
    case 'K':
    case 'h':
    case 0x80:
    case 0x82:  // BININT1 BINGET PROTO EXT1
      return {Arg::kFixed, 1};
    case 'M':
    case 0x83:  // BININT2 EXT2
      return {Arg::kFixed, 2};
    case 'J':
    case 'j':
    case 0x84:  // BININT LONG_BINGET EXT4
      return {Arg::kFixed, 4};
    case 'G':  // BINFLOAT
      return {Arg::kFixed, 8};
    case 0x95:  // FRAME: the size of the opcodes that follow
      return {Arg::kFrame, 8};
    case 'q':  // BINPUT
      return {Arg::kPut, 1};
    case 'r':  // LONG_BINPUT
      return {Arg::kPut, 4};
    case 'U':
    case 'C':
    case 0x8c:
    case 0x8a:  // SHORT_BINSTRING SHORT_BINBYTES ... LONG1
      return {Arg::kLength, 1};
    case 'T':
    case 'B':
    case 'X':
    case 0x8b:  // BINSTRING BINBYTES BINUNICODE LONG4
      return {Arg::kLength, 4};
    case 0x8d:
    case 0x8e:
    case 0x96:  // BINUNICODE8 BINBYTES8 BYTEARRAY8
      return {Arg::kLength, 8};
    case 'I':
    case 'L':
    case 'S':
    case 'V':
    case 'F':
    case 'P':
    case 'g':
    case 'p':
      return {Arg::kLine, 0};
    case 'c':
    case 'i':  // GLOBAL INST
      return {Arg::kTwoLines, 0};
    default:
      return {Arg::kInvalid, 0};
  }
}

uint64_t LittleEndian(const char* p, int size) {
  uint64_t v = 0;
  for (int i = size - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

absl::Status Bad(size_t at, unsigned char op, absl::string_view why) {
  return absl::DataLossError(
      absl::StrCat("pickle opcode 0x", absl::Hex(op, absl::kZeroPad2), " at ", at, ": ", why));
}

}  // namespace

absl::Status CheckPickle(absl::string_view pickle) {
  size_t pos = 0;
  while (pos < pickle.size()) {
    const size_t at = pos;
    const unsigned char op = static_cast<unsigned char>(pickle[pos++]);
    if (op == '.') {  // STOP
      if (pos != pickle.size()) return Bad(at, op, "data after STOP");
      return absl::OkStatus();
    }
    const Opcode d = Describe(op);
    const size_t left = pickle.size() - pos;
    switch (d.arg) {
      case Arg::kNone:
        break;
      case Arg::kFixed:
        if (left < static_cast<size_t>(d.size)) return Bad(at, op, "truncated argument");
        pos += static_cast<size_t>(d.size);
        break;
      case Arg::kPut: {
        if (left < static_cast<size_t>(d.size)) return Bad(at, op, "truncated argument");
        const uint64_t index = LittleEndian(pickle.data() + pos, d.size);
        if (index > pickle.size()) {
          return Bad(at, op,
                     absl::StrCat("memo index ", index, " in a ", pickle.size(), "-byte program"));
        }
        pos += static_cast<size_t>(d.size);
        break;
      }
      case Arg::kFrame: {
        if (left < static_cast<size_t>(d.size)) return Bad(at, op, "truncated argument");
        const uint64_t length = LittleEndian(pickle.data() + pos, d.size);
        pos += static_cast<size_t>(d.size);
        if (length > pickle.size() - pos) return Bad(at, op, "frame longer than the program");
        break;
      }
      case Arg::kLength: {
        if (left < static_cast<size_t>(d.size)) return Bad(at, op, "truncated length");
        const uint64_t length = LittleEndian(pickle.data() + pos, d.size);
        pos += static_cast<size_t>(d.size);
        if (length > pickle.size() - pos) {
          return Bad(at, op,
                     absl::StrCat("length ", length, " but ", pickle.size() - pos, " bytes left"));
        }
        pos += static_cast<size_t>(length);
        break;
      }
      case Arg::kLine:
      case Arg::kTwoLines:
        for (int line = 0; line < (d.arg == Arg::kLine ? 1 : 2); ++line) {
          const size_t nl = pickle.find('\n', pos);
          if (nl == absl::string_view::npos) return Bad(at, op, "unterminated text argument");
          pos = nl + 1;
        }
        break;
      case Arg::kInvalid:
        return Bad(at, op, "unknown opcode");
    }
  }
  return absl::DataLossError("pickle program ends without STOP");
}

}  // namespace ddp
