// ddp-renderbench: the cost of one status snapshot build's rendering, full against incremental,
// on the same statuses in memory. A job of --ranks ranks heartbeats every --interval seconds and
// the snapshot is rebuilt every --every seconds, so each build sees about every/interval of the
// rows changed (step, loss, phase) and every last_seen_seconds moved. Both sides render the same
// sequence of statuses into the same three forms: the JSON, the serialized protobuf and the
// Prometheus text. The full side is what StatusCache did before (ToJson, ToProto +
// SerializeAsString, RenderJobMetrics); the incremental side is StatusRender. The outputs are
// checked equal before anything is timed. Job::Status() itself (the rows) is not timed by either.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/job_status.h"
#include "coordinator/job/job.h"
#include "coordinator/ops/job_metrics.h"
#include "coordinator/ops/status_render.h"
#include "proto/convert.h"
#include "proto/coordinator.pb.h"

namespace {

using ddp::JobStatus;

JobStatus World(int n) {
  JobStatus s;
  s.job_id = "render-bench";
  s.state = ddp::JobState::kRunning;
  s.world_size = n;
  s.registered = n;
  for (int r = 0; r < n; ++r) {
    ddp::RankStatus& row = s.ranks.emplace_back();
    row.rank = r;
    row.host = absl::StrCat("gpu-node-", r / 8);
    row.node_rank = r / 8;
    row.local_rank = r % 8;
    row.pid = 100000 + r;
    row.state = ddp::RankState::kTraining;
    row.phase = ddp::StepPhase::kForward;
    row.loss = 2.0;
    row.samples_per_second = 1280;
  }
  return s;
}

// The statuses of `builds` consecutive snapshots.
std::vector<JobStatus> Sequence(int ranks, int builds, double changed_fraction) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<JobStatus> out;
  JobStatus s = World(ranks);
  for (int b = 0; b < builds; ++b) {
    for (ddp::RankStatus& r : s.ranks) {
      if (u(rng) < changed_fraction) {
        r.step += 1;
        r.loss *= 0.999;
        r.phase_seconds = u(rng);
        r.last_seen_seconds = 0;
      } else {
        r.last_seen_seconds += 0.2;
      }
    }
    s.uptime_seconds += 0.2;
    out.push_back(s);
  }
  return out;
}

struct Forms {
  std::string json;
  std::string proto;
  std::string metrics;
};

void Full(const JobStatus& s, Forms* f) {
  f->json = ddp::ToJson(s);
  slurm_ddp::v1::JobStatus p;
  ddp::ToProto(s, &p);
  f->proto = p.SerializeAsString();
  f->metrics.clear();
  ddp::RenderJobMetrics(s, &f->metrics);
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 16384;
  int builds = 50;
  double interval = 0;
  double every = 0.2;
  CLI::App app{"ddp-renderbench: status snapshot rendering, full against incremental"};
  app.add_option("--ranks", ranks, "Ranks in the status")->check(CLI::Range(1, 1 << 20));
  app.add_option("--builds", builds, "Snapshot builds timed on each side")
      ->check(CLI::Range(2, 100000));
  app.add_option("--interval", interval,
                 "Seconds between a rank's heartbeats (default: the coordinator's interval for "
                 "--ranks with its default --heartbeat-timeout)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--every", every, "Seconds between snapshot builds")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (interval == 0) {
    interval = absl::ToDoubleSeconds(
        ddp::Job::HeartbeatInterval(ranks, ddp::JobConfig().heartbeat_timeout));
  }
  const double changed = std::min(1.0, every / interval);
  const std::vector<JobStatus> seq = Sequence(ranks, builds, changed);

  // Equal outputs first (the protobuf as parsed messages: field order may differ).
  {
    ddp::StatusRender render;
    ddp::StatusRender::Output inc;
    Forms full;
    for (const JobStatus& s : seq) {
      render.Render(s, &inc);
      Full(s, &full);
      slurm_ddp::v1::JobStatus a;
      slurm_ddp::v1::JobStatus b;
      if (inc.json != full.json || inc.metrics != full.metrics ||
          !a.ParseFromString(inc.proto_bytes) || !b.ParseFromString(full.proto) ||
          a.SerializeAsString() != b.SerializeAsString()) {
        std::fprintf(stderr, "ddp-renderbench: the incremental output differs from the full one\n");
        return 1;
      }
    }
  }

  Forms full;
  auto t0 = std::chrono::steady_clock::now();
  for (const JobStatus& s : seq) Full(s, &full);
  const double full_s = Seconds(t0);

  ddp::StatusRender render;
  ddp::StatusRender::Output inc;
  render.Render(seq.front(), &inc);  // the first build renders every rank (not timed)
  size_t redone = 0;
  t0 = std::chrono::steady_clock::now();
  for (const JobStatus& s : seq) {
    render.Render(s, &inc);
    redone += render.rendered_last();
  }
  const double inc_s = Seconds(t0);

  std::printf(
      "renderbench: %d ranks, %d builds, %.1f%% of rows changed per build (every %.2f s, "
      "heartbeat %.2f s); snapshot %zu + %zu + %zu bytes (json, protobuf, metrics)\n",
      ranks, builds, 100 * changed, every, interval, inc.json.size(), inc.proto_bytes.size(),
      inc.metrics.size());
  std::printf("renderbench: full %.2f ms per build, incremental %.2f ms (%.1f rows redone)\n",
              1e3 * full_s / builds, 1e3 * inc_s / builds, static_cast<double>(redone) / builds);
  std::printf(
      "ok ranks=%d builds=%d interval_s=%.2f changed_fraction=%.4f full_ms=%.3f "
      "incremental_ms=%.3f ratio_full_over_incremental=%.2f\n",
      ranks, builds, interval, changed, 1e3 * full_s / builds, 1e3 * inc_s / builds,
      full_s / inc_s);
  return 0;
}
