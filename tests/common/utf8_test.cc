// UTF-8 helpers, table-driven: validity (overlong forms, surrogates, out-of-range, truncation),
// replacement of invalid bytes, and truncation at a code point boundary.
#include "common/utf8.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ddp {
namespace {

TEST(Utf8Test, Validity) {
  struct Case {
    std::string s;
    bool valid;
  };
  const std::vector<Case> cases = {
      {"", true},
      {"plain ascii", true},
      {"caf\xc3\xa9", true},           // é
      {"\xe2\x82\xac", true},          // €
      {"\xf0\x9f\x98\x80", true},      // U+1F600
      {"\xf4\x8f\xbf\xbf", true},      // U+10FFFF
      {std::string("a\0b", 3), true},  // NUL is a code point
      {"\xc3", false},                 // truncated
      {"\xe2\x82", false},             // truncated
      {"\xc0\xaf", false},             // overlong '/'
      {"\xe0\x80\xaf", false},         // overlong
      {"\xed\xa0\x80", false},         // surrogate U+D800
      {"\xf4\x90\x80\x80", false},     // above U+10FFFF
      {"\xff", false},                 // never valid
      {"\x80", false},                 // lone continuation
      {"ok\xc3\xa9\xc3", false},       // valid, then truncated
  };
  for (const Case& c : cases) EXPECT_EQ(IsValidUtf8(c.s), c.valid) << c.s;
}

TEST(Utf8Test, ToValidUtf8ReplacesEachBadByte) {
  EXPECT_EQ(ToValidUtf8("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(ToValidUtf8("a\xff"
                        "b"),
            "a\xef\xbf\xbd"
            "b");
  EXPECT_EQ(ToValidUtf8("\xc0\xaf"), "\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(ToValidUtf8("x\xe2\x82"), "x\xef\xbf\xbd\xef\xbf\xbd");
  for (const std::string s : {"\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80\x80\x80"}) {
    EXPECT_TRUE(IsValidUtf8(ToValidUtf8(s))) << s;
  }
}

TEST(Utf8Test, TruncateNeverCutsACodePoint) {
  const std::string s = "ab\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";  // a b é € 😀
  const std::vector<std::pair<size_t, std::string>> cases = {{0, ""},
                                                             {1, "a"},
                                                             {2, "ab"},
                                                             {3, "ab"},
                                                             {4, "ab\xc3\xa9"},
                                                             {5, "ab\xc3\xa9"},
                                                             {6, "ab\xc3\xa9"},
                                                             {7, "ab\xc3\xa9\xe2\x82\xac"},
                                                             {10, "ab\xc3\xa9\xe2\x82\xac"},
                                                             {11, s},
                                                             {100, s}};
  for (const auto& [max, want] : cases) {
    EXPECT_EQ(TruncateUtf8(s, max), want) << max;
    EXPECT_TRUE(IsValidUtf8(TruncateUtf8(s, max))) << max;
  }
}

}  // namespace
}  // namespace ddp
