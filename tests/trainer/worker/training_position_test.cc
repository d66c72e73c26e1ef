// The position record: round trips, and every kind of damage is refused with a reason.
#include "trainer/worker/training_position.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ddp {
namespace {

const TrainingPosition kMid{3, 1234, 38400, 4};

TEST(TrainingPosition, RoundTrips) {
  for (const TrainingPosition& p :
       {TrainingPosition{}, kMid, TrainingPosition{1, 16, 0, 2},
        TrainingPosition{int64_t{1} << 40, int64_t{1} << 50, int64_t{1} << 45, 65536}}) {
    const std::vector<uint8_t> record = EncodePosition(p);
    ASSERT_EQ(record.size(), kPositionRecordSize);
    auto back = DecodePosition(record);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, p) << DescribePosition(p);
  }
}

TEST(TrainingPosition, LayoutIsLittleEndianWithMagicAndVersion) {
  const std::vector<uint8_t> r = EncodePosition(kMid);
  EXPECT_EQ(std::string(r.begin(), r.begin() + 4), "DDPP");
  EXPECT_EQ(r[4], 1);  // version
  EXPECT_EQ(r[5], 0);
  EXPECT_EQ(r[6], 4);  // fields
  EXPECT_EQ(r[8], 3);  // epoch, low byte first
  EXPECT_EQ(r[16], 1234 & 0xff);
  EXPECT_EQ(r[17], 1234 >> 8);
}

struct Damage {
  const char* name;
  void (*apply)(std::vector<uint8_t>&);
  const char* says;
};

// Recomputes the checksum so that a damaged field is refused for what it is.
void Reseal(std::vector<uint8_t>& r) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < 40; ++i) {
    h ^= r[i];
    h *= 16777619u;
  }
  for (int i = 0; i < 4; ++i) r[40 + i] = static_cast<uint8_t>(h >> (8 * i));
}

TEST(TrainingPosition, RefusesDamage) {
  const std::vector<Damage> cases = {
      {"truncated", [](std::vector<uint8_t>& r) { r.pop_back(); }, "43 bytes"},
      {"longer", [](std::vector<uint8_t>& r) { r.push_back(0); }, "45 bytes"},
      {"magic", [](std::vector<uint8_t>& r) { r[0] = 'X'; }, "magic"},
      {"newer version",
       [](std::vector<uint8_t>& r) {
         r[4] = 2;
         Reseal(r);
       },
       "version 2"},
      {"field count",
       [](std::vector<uint8_t>& r) {
         r[6] = 5;
         Reseal(r);
       },
       "5 fields"},
      {"flipped bit", [](std::vector<uint8_t>& r) { r[20] ^= 0x10; }, "checksum"},
      {"flipped checksum", [](std::vector<uint8_t>& r) { r[42] ^= 1; }, "checksum"},
      {"negative step",
       [](std::vector<uint8_t>& r) {
         r[23] = 0x80;
         Reseal(r);
       },
       "out of range"},
      {"consumed without a world",
       [](std::vector<uint8_t>& r) {
         for (int i = 32; i < 40; ++i) r[i] = 0;
         Reseal(r);
       },
       "out of range"},
  };
  for (const Damage& d : cases) {
    std::vector<uint8_t> r = EncodePosition(kMid);
    d.apply(r);
    auto decoded = DecodePosition(r);
    ASSERT_FALSE(decoded.ok()) << d.name;
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss) << d.name;
    EXPECT_NE(decoded.status().message().find(d.says), std::string::npos)
        << d.name << ": " << decoded.status();
  }
}

}  // namespace
}  // namespace ddp
