// The pickle pre-flight check, table-driven: well-formed programs pass; a length or memo index
// that the program cannot hold, an unknown opcode, a missing STOP or data after it are refused.
#include "trainer/checkpoint/pickle_check.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

std::string P(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s.push_back(static_cast<char>(b));
  return s;
}

TEST(CheckPickleTest, Table) {
  struct Case {
    const char* name;
    std::string pickle;
    const char* error;  // nullptr: accepted
  };
  const std::vector<Case> cases = {
      {"string", P({0x80, 2, 'X', 3, 0, 0, 0, 'a', 'b', 'c', 'q', 0, '.'}), nullptr},
      {"dict of ints", P({0x80, 2,   '}', 'q', 0, '(', 'X', 1,   0, 0, 0,   'k', 'K',
                          7,    'X', 1,   0,   0, 0,   'm', 'M', 1, 2, 'u', '.'}),
       nullptr},
      {"global and reduce",
       std::string("\x80\x02"
                   "ctorch._utils\n_rebuild_tensor_v2\n)R.",
                   38),
       nullptr},
      {"float, long1, bools",
       P({'(', 'G', 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x8a, 1, 5, 0x88, 0x89, 't', '.'}), nullptr},
      {"string longer than the program", P({0x80, 2, 'X', 3, 0, 0, 0x20, 'a', 'b', 'c', '.'}),
       "length 536870915 but 4 bytes left"},
      {"bytes8 of 2^63", P({0x8e, 0, 0, 0, 0, 0, 0, 0, 0x80, '.'}), "length"},
      {"memo index far beyond", P({'N', 'r', 0xff, 0xff, 0xff, 0x7f, '.'}), "memo index"},
      {"unknown opcode", P({0x80, 2, 0xff, '.'}), "unknown opcode"},
      {"no STOP", P({0x80, 2, 'N'}), "without STOP"},
      {"data after STOP", P({'N', '.', 'N'}), "data after STOP"},
      {"truncated argument", P({'J', 1, 2}), "truncated"},
      {"global without newline", std::string("ctorch\nno_newline"), "unterminated"},
      {"frame longer than the rest", P({0x95, 100, 0, 0, 0, 0, 0, 0, 0, 'N', '.'}), "frame"},
      {"empty", "", "without STOP"},
  };
  for (const Case& c : cases) {
    const absl::Status st = CheckPickle(c.pickle);
    if (c.error == nullptr) {
      EXPECT_TRUE(st.ok()) << c.name << ": " << st;
    } else {
      EXPECT_TRUE(absl::IsDataLoss(st)) << c.name << ": " << st;
      EXPECT_TRUE(absl::StrContains(st.message(), c.error)) << c.name << ": " << st;
    }
  }
}

}  // namespace
}  // namespace ddp
