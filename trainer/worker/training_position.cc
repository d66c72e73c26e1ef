#include "trainer/worker/training_position.h"

#include <array>

#include "absl/strings/str_cat.h"

namespace ddp {
namespace {

constexpr std::array<uint8_t, 4> kMagic = {'D', 'D', 'P', 'P'};
constexpr uint16_t kFieldCount = 4;
constexpr size_t kFieldsAt = 8;
constexpr size_t kChecksumAt = kFieldsAt + 8 * kFieldCount;
static_assert(kChecksumAt + 4 == kPositionRecordSize);

uint32_t Fnv1a(absl::Span<const uint8_t> bytes) {
  uint32_t h = 2166136261u;
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 16777619u;
  }
  return h;
}

void PutLe(std::vector<uint8_t>& out, size_t at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t GetLe(absl::Span<const uint8_t> in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(in[at + i]) << (8 * i);
  return v;
}

}  // namespace

std::string DescribePosition(const TrainingPosition& p) {
  return absl::StrCat("epoch ", p.epoch, ", step ", p.step, ", ", p.consumed,
                      " samples of the epoch done",
                      p.consumed > 0 ? absl::StrCat(" (world ", p.consumed_world_size, ")") : "");
}

std::vector<uint8_t> EncodePosition(const TrainingPosition& p) {
  std::vector<uint8_t> out(kPositionRecordSize, 0);
  for (size_t i = 0; i < kMagic.size(); ++i) out[i] = kMagic[i];
  PutLe(out, 4, kPositionRecordVersion, 2);
  PutLe(out, 6, kFieldCount, 2);
  const int64_t fields[kFieldCount] = {p.epoch, p.step, p.consumed, p.consumed_world_size};
  for (size_t i = 0; i < kFieldCount; ++i) {
    PutLe(out, kFieldsAt + 8 * i, static_cast<uint64_t>(fields[i]), 8);
  }
  PutLe(out, kChecksumAt, Fnv1a(absl::MakeConstSpan(out).subspan(0, kChecksumAt)), 4);
  return out;
}

absl::StatusOr<TrainingPosition> DecodePosition(absl::Span<const uint8_t> record) {
  if (record.size() != kPositionRecordSize) {
    return absl::DataLossError(absl::StrCat("training position record has ", record.size(),
                                            " bytes, expected ", kPositionRecordSize));
  }
  for (size_t i = 0; i < kMagic.size(); ++i) {
    if (record[i] != kMagic[i]) {
      return absl::DataLossError("training position record: bad magic (not a position record)");
    }
  }
  const uint64_t version = GetLe(record, 4, 2);
  if (version != kPositionRecordVersion) {
    return absl::DataLossError(absl::StrCat("training position record of version ", version,
                                            "; this build reads version ", kPositionRecordVersion));
  }
  const uint64_t fields = GetLe(record, 6, 2);
  if (fields != kFieldCount) {
    return absl::DataLossError(absl::StrCat("training position record with ", fields,
                                            " fields; version 1 has ", kFieldCount));
  }
  const uint32_t sum = static_cast<uint32_t>(GetLe(record, kChecksumAt, 4));
  if (sum != Fnv1a(record.subspan(0, kChecksumAt))) {
    return absl::DataLossError("training position record: checksum mismatch (corrupted)");
  }
  auto field = [&](size_t i) { return static_cast<int64_t>(GetLe(record, kFieldsAt + 8 * i, 8)); };
  TrainingPosition p{field(0), field(1), field(2), field(3)};
  if (p.epoch < 0 || p.step < 0 || p.consumed < 0 || p.consumed_world_size < 0 ||
      (p.consumed > 0 && p.consumed_world_size == 0)) {
    return absl::DataLossError(
        absl::StrCat("training position record out of range: ", DescribePosition(p)));
  }
  return p;
}

}  // namespace ddp
