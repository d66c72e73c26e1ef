// Builds a JobStatus (common/job_status.h) from fuzz bytes for the status view harnesses: every
// field, including strings of arbitrary bytes (control characters, invalid UTF-8), extreme and
// non-finite numbers, every job and rank state, phase and failure cause (and one value past
// each), and up to 40 ranks and 12 events. ReadDecided then sets the decided fields (flag,
// behind_by, final, exit_code) as DecideStatus would, or, while bytes remain, to anything at all:
// a view shows them as the status says.
#ifndef SLURM_DDP_FUZZ_STATUS_INPUT_H_
#define SLURM_DDP_FUZZ_STATUS_INPUT_H_

#include "common/job_status.h"
#include "fuzz/fuzz_check.h"

namespace ddp::fuzz {

inline JobStatus ReadJobStatus(ByteReader& in) {
  JobStatus s;
  s.job_id = in.Str();
  s.state = static_cast<JobState>(in.Byte() % 8);  // 7 is no state at all
  s.finished = in.Bool();
  s.generation = in.Int();
  s.world_size = static_cast<int>(in.Int());
  s.registered = static_cast<int>(in.Int());
  s.num_nodes = static_cast<int>(in.Int());
  s.epoch = in.Int();
  s.epochs = in.Int();
  s.step = in.Int();
  s.steps_per_epoch = in.Int();
  s.loss = in.Double();
  s.samples_per_second = in.Double();
  s.eta_seconds = in.Double();
  s.uptime_seconds = in.Double();
  s.failure.rank = static_cast<int>(in.Int());
  s.failure.kind = static_cast<FailureKind>(in.Byte() % 12);  // 11 is no cause at all
  s.failure.text = in.Str(200);
  s.stop_reason = in.Str(200);
  s.checkpoint_epoch = in.Int();
  s.checkpoint_step = in.Int();
  s.checkpoint_path = in.Str();
  const int ranks = in.Byte() % 41;
  for (int i = 0; i < ranks && in.remaining() > 0; ++i) {
    RankStatus r;
    r.rank = static_cast<int>(in.Int());
    r.host = in.Str(32);
    r.node_rank = static_cast<int>(in.Int());
    r.local_rank = static_cast<int>(in.Int());
    r.pid = static_cast<int>(in.Int());
    r.state = static_cast<RankState>(in.Byte() % 12);  // 11 is no state at all
    r.phase = static_cast<StepPhase>(in.Byte() % 10);  // 9 is no phase at all
    r.phase_seconds = in.Double();
    r.epoch = in.Int();
    r.step = in.Int();
    r.loss = in.Double();
    r.samples_per_second = in.Double();
    r.last_seen_seconds = in.Double();
    s.ranks.push_back(r);
  }
  const int events = in.Byte() % 13;
  for (int i = 0; i < events && in.remaining() > 0; ++i) s.events.push_back(in.Str(80));
  return s;
}

inline void ReadDecided(ByteReader& in, JobStatus* s) {
  DecideStatus(s);
  for (RankStatus& r : s->ranks) {
    if (in.remaining() == 0) return;
    r.flag = static_cast<RankFlag>(in.Byte() % 8);  // 7 is no flag at all
    r.behind_by = in.Int();
    r.final = in.Bool();
  }
  if (in.remaining() > 0) s->exit_code = static_cast<int>(in.Int());
}

}  // namespace ddp::fuzz

#endif  // SLURM_DDP_FUZZ_STATUS_INPUT_H_
