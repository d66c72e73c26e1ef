#include "coordinator/ops/status_render.h"

#include <cstdint>
#include <cstring>

#include "google/protobuf/wire_format_lite.h"
#include "proto/convert.h"
#include "proto/coordinator.pb.h"

namespace ddp {
namespace {

namespace pb = ::slurm_ddp::v1;
using google::protobuf::internal::WireFormatLite;

// Everything the pieces are made of but last_seen_seconds and the rank's verdict (compared apart).
bool SameRow(const RankStatus& a, const RankStatus& b) {
  return a.rank == b.rank && a.node_rank == b.node_rank && a.local_rank == b.local_rank &&
         a.pid == b.pid && a.state == b.state && a.phase == b.phase &&
         a.phase_seconds == b.phase_seconds && a.epoch == b.epoch && a.step == b.step &&
         a.loss == b.loss && a.samples_per_second == b.samples_per_second && a.host == b.host &&
         a.score == b.score;
}

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// One `ranks` entry of the JobStatus message: the kept piece, then last_seen_seconds (proto3
// writes a double whose bits are not all zero: a one-byte tag and 8 little-endian bytes).
void AppendRankProto(const std::string& piece, double last_seen, std::string* out) {
  uint64_t bits = 0;
  std::memcpy(&bits, &last_seen, sizeof(bits));
  constexpr uint32_t kSeenTag = WireFormatLite::MakeTag(pb::RankStatus::kLastSeenSecondsFieldNumber,
                                                        WireFormatLite::WIRETYPE_FIXED64);
  static_assert(kSeenTag < 0x80, "a one-byte tag");
  AppendVarint(WireFormatLite::MakeTag(pb::JobStatus::kRanksFieldNumber,
                                       WireFormatLite::WIRETYPE_LENGTH_DELIMITED),
               out);
  AppendVarint(piece.size() + (bits != 0 ? 9 : 0), out);
  out->append(piece);
  if (bits == 0) return;
  out->push_back(static_cast<char>(kSeenTag));
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

}  // namespace

void StatusRender::Render(const JobStatus& s, Output* out) {
  const size_t n = s.ranks.size();
  pieces_.resize(n);
  rendered_last_ = 0;
  const int64_t median = MedianStep(s);
  for (size_t i = 0; i < n; ++i) {
    const RankStatus& r = s.ranks[i];
    Piece& p = pieces_[i];
    const RankVerdict verdict = JudgeRank(r, median);
    if (p.valid && SameRow(p.row, r) && p.verdict == verdict) continue;
    p.valid = true;
    p.row = r;
    p.verdict = verdict;
    RankJsonParts(r, verdict, &p.json_head, &p.json_tail);
    RankStatus unseen = r;
    unseen.last_seen_seconds = 0;
    pb::RankStatus msg;
    ToProto(unseen, &msg);
    p.proto = msg.SerializeAsString();
    p.prom = RankMetricsOf(r);
    ++rendered_last_;
  }

  // Each form is about as long as last time: reserved once, not grown by copies.
  std::string& ranks_json = ranks_json_;
  ranks_json.clear();
  ranks_json.reserve(json_bytes_ + 64);
  ranks_json.push_back('[');
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) ranks_json.push_back(',');
    ranks_json.append(pieces_[i].json_head);
    AppendJsonNumber(s.ranks[i].last_seen_seconds, &ranks_json);
    ranks_json.append(pieces_[i].json_tail);
  }
  ranks_json.push_back(']');
  ToJson(s, ranks_json, &out->json);

  pb::JobStatus head;
  ToProtoWithoutRanks(s, &head);
  out->proto_bytes.clear();
  out->proto_bytes.reserve(proto_bytes_ + 64);
  head.AppendToString(&out->proto_bytes);
  for (size_t i = 0; i < n; ++i) {
    AppendRankProto(pieces_[i].proto, s.ranks[i].last_seen_seconds, &out->proto_bytes);
  }

  out->metrics.clear();
  out->metrics.reserve(metrics_bytes_ + 64);
  RenderJobGauges(s, &out->metrics);
  RenderRankMetrics(
      n, [this](size_t i) -> const RankMetricLines& { return pieces_[i].prom; },
      [&s](size_t i) { return s.ranks[i].last_seen_seconds; }, &out->metrics);
  json_bytes_ = ranks_json.size();
  proto_bytes_ = out->proto_bytes.size();
  metrics_bytes_ = out->metrics.size();
}

}  // namespace ddp
