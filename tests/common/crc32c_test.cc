#include "common/crc32c.h"

#include <string>

#include "gtest/gtest.h"

namespace ddp {
namespace {

// Known vectors: RFC 3720 (iSCSI), appendix B.4, and the CRC catalogue's check value.
TEST(Crc32cTest, KnownVectors) {
  struct Case {
    std::string data;
    uint32_t crc;
  };
  std::string ascending(32, '\0');
  std::string descending(32, '\0');
  for (int i = 0; i < 32; ++i) {
    ascending[static_cast<size_t>(i)] = static_cast<char>(i);
    descending[static_cast<size_t>(i)] = static_cast<char>(31 - i);
  }
  const Case cases[] = {
      {"", 0x00000000u},
      {"123456789", 0xE3069283u},
      {std::string(32, '\0'), 0x8A9136AAu},
      {std::string(32, '\xff'), 0x62A8AB43u},
      {ascending, 0x46DD794Eu},
      {descending, 0x113FDB5Cu},
  };
  for (const Case& c : cases) EXPECT_EQ(Crc32c(c.data), c.crc) << c.data.size() << " bytes";
}

TEST(Crc32cTest, ExtendEqualsWhole) {
  const std::string data = "hello, journal";
  for (size_t cut = 0; cut <= data.size(); ++cut) {
    EXPECT_EQ(Crc32cExtend(Crc32c(data.substr(0, cut)), data.substr(cut)), Crc32c(data));
  }
}

TEST(Crc32cTest, DetectsAFlippedBit) {
  std::string data = "a record";
  const uint32_t before = Crc32c(data);
  data[3] ^= 0x10;
  EXPECT_NE(Crc32c(data), before);
}

}  // namespace
}  // namespace ddp
