// The status snapshot's three published forms, rendered incrementally: the `ddpctl status
// --json` JSON (ToJson), the GetStatus reply (the JobStatus protobuf, serialized) and the job's
// Prometheus text (RenderJobMetrics). At 16,384 ranks a snapshot is ~1 MB in each form and is
// rebuilt up to five times a second while every rank's heartbeat moves its progress; but a rank
// heartbeats once per interval (1 s and more), so most ranks are unchanged from one build to the
// next but for their last_seen_seconds. Render keeps each rank's rendered pieces and redoes only
// the ranks whose row changed; for the others it writes the new last_seen_seconds between the
// kept pieces. A rank's verdict (JudgeRank: its flag, behind_by, final) is part of its row: it
// can change with the other ranks' steps or its own silence, and then the rank is redone.
//
// The output is the same text as ToJson and RenderJobMetrics, byte for byte, and protobuf bytes
// that parse to the same message as ToProto (a rank's last_seen_seconds is written after its
// other fields, which protobuf allows).
//
// Thread safety: not thread-safe; StatusCache renders under its build lock.
#ifndef SLURM_DDP_COORDINATOR_OPS_STATUS_RENDER_H_
#define SLURM_DDP_COORDINATOR_OPS_STATUS_RENDER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "common/job_status.h"
#include "coordinator/ops/job_metrics.h"

namespace ddp {

class StatusRender {
 public:
  struct Output {
    std::string json;         // ToJson(status)
    std::string proto_bytes;  // ToProto(status), serialized
    std::string metrics;      // RenderJobMetrics(status)
  };

  // Writes the three forms over `*out`, keeping its strings' capacity: an earlier Output's
  // buffers passed back in are filled again without new pages.
  void Render(const JobStatus& status, Output* out);
  // Ranks whose pieces the last Render made afresh (the others were reused).
  size_t rendered_last() const { return rendered_last_; }

 private:
  struct Piece {
    bool valid = false;
    RankStatus row;       // as rendered; its last_seen_seconds is not used
    RankVerdict verdict;  // JudgeRank's, as rendered (a silent or behind rank is redone)
    std::string json_head;
    std::string json_tail;
    std::string proto;  // the RankStatus message without last_seen_seconds
    RankMetricLines prom;
  };

  std::vector<Piece> pieces_;
  size_t rendered_last_ = 0;
  std::string ranks_json_;  // the `ranks` array, kept between builds for its capacity
  // The sizes of the last build's forms (the ranks' JSON, the protobuf, the metrics).
  size_t json_bytes_ = 0;
  size_t proto_bytes_ = 0;
  size_t metrics_bytes_ = 0;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_OPS_STATUS_RENDER_H_
