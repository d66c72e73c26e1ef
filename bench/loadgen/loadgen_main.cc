// ddp-loadgen: N simulated workers of a running ddp-coordinator (its own process, found through
// its dist_file), driven through the callback API by a few threads rather than N blocked
// threads: they register, fetch their shard and heartbeat (every --heartbeat seconds) with
// simulated training progress advancing at --steps-per-second. A worker obeys the heartbeat's
// command (CHECKPOINT_AND_STOP: ReportDone CANCELLED; ABORT: exit), and with --finish every
// worker reports done after --epochs x --steps-per-epoch steps. Workers share --channels
// connections (default one per 8 workers). Used by bench/status.sh, the ops tests and the
// dashboard screenshot. With --step-sections (or --slow-rank) the workers also report the time
// their steps spent in each section (data, compute, communication, optimizer), as the real
// trainer's heartbeats do, and --slow-rank is --slow-factor times slower in --slow-section: its
// peers wait for it in communication, so the coordinator's straggler watch names it (the
// dashboard and ops tests). Scale measurements with one connection per rank and the coordinator's
// CPU: ddp-scalebench (bench/loadgen.sh).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "bench/loadgen/bench_credentials.h"
#include "common/dist_file.h"
#include "common/mutex_mode.h"
#include "proto/coordinator.grpc.pb.h"

namespace pb = ::slurm_ddp::v1;

namespace ddp {
namespace {

struct Flags {
  int workers = 1024;
  int channels = 0;
  int per_node = 8;
  std::string dist_file;
  double duration_s = 0;  // 0 = until the job ends
  double steps_per_second = 5;
  int64_t epochs = 3;
  int64_t steps_per_epoch = 100;
  int batch_size = 64;
  bool finish = false;
  int lag_rank = -1;           // this rank runs behind (dashboards, tests)
  bool step_sections = false;  // report section times (implied by --slow-rank)
  int slow_rank = -1;          // this rank is slow in slow_section (a straggler)
  std::string slow_section = "compute";
  double slow_factor = 2;
  double heartbeat_s = 1;
};

void SleepUntil(absl::Time t) {
  const absl::Duration d = t - absl::Now();
  if (d > absl::ZeroDuration()) absl::SleepFor(d);
}

struct Worker {
  int index = 0;
  pb::Coordinator::Stub* stub = nullptr;
  grpc::ClientContext register_ctx;
  pb::RegisterRequest register_req;
  pb::RegisterReply register_reply;
  grpc::ClientContext shard_ctx;
  pb::GetShardRequest shard_req;
  pb::GetShardReply shard_reply;
  std::atomic<int> command{pb::CONTINUE};
  std::atomic<bool> done{false};
};

// The simulated training curve: every rank at the same step (DDP is synchronous), except
// --lag-rank, which runs 3 seconds behind.
pb::Progress Simulate(const Flags& f, int rank, double elapsed_s) {
  const int64_t total = f.epochs * f.steps_per_epoch;
  double steps = elapsed_s * f.steps_per_second;
  if (rank == f.lag_rank) steps = std::max(0.0, steps - 3 * f.steps_per_second);
  const int64_t step = std::min<int64_t>(total, static_cast<int64_t>(steps));
  pb::Progress p;
  p.set_phase(step >= total ? pb::PHASE_FINISHED : pb::PHASE_TRAINING);
  p.set_epochs(f.epochs);
  p.set_steps_per_epoch(f.steps_per_epoch);
  p.set_step(step);
  p.set_epoch(std::min<int64_t>(f.epochs - 1, step / std::max<int64_t>(1, f.steps_per_epoch)));
  const double wiggle = 0.04 * std::sin(0.37 * static_cast<double>(step) + rank);
  p.set_loss(2.2 * std::exp(-static_cast<double>(step) / (0.35 * static_cast<double>(total))) +
             0.15 + wiggle);
  const double warm = std::min(1.0, elapsed_s / 5.0);
  p.set_samples_per_second(f.steps_per_second * f.batch_size * (0.6 + 0.4 * warm) *
                           (1.0 + 0.03 * std::sin(elapsed_s + rank)));
  return p;
}

// The simulated step's sections, in units of the base step: a rank's busy sections, and the
// exposed communication that the fastest collective takes. The step takes as long as the
// busiest rank's busy time plus that communication; every other rank waits the difference in
// communication (synchronous DDP: the allreduce ends when the last rank joins it).
constexpr double kDataShare = 0.10;
constexpr double kComputeShare = 0.55;
constexpr double kOptimizerShare = 0.10;
constexpr double kMinCommShare = 0.05;

struct Sections {
  double data = kDataShare, compute = kComputeShare, optimizer = kOptimizerShare;
  double busy() const { return data + compute + optimizer; }
};

Sections BusyOf(const Flags& f, int rank) {
  Sections x;
  // A small, steady difference between ranks (not enough to score under any sane threshold).
  const double jitter = 1.0 + 0.02 * std::sin(1.7 * rank);
  x.data *= jitter;
  x.compute *= jitter;
  x.optimizer *= jitter;
  if (rank == f.slow_rank) {
    if (f.slow_section == "data") x.data *= f.slow_factor;
    if (f.slow_section == "compute") x.compute *= f.slow_factor;
    if (f.slow_section == "optimizer") x.optimizer *= f.slow_factor;
  }
  return x;
}

// Fills the cumulative section times of `p` (section_steps and the four sections' seconds) for
// a rank that has done p.step() steps of 1 / --steps-per-second seconds each.
void SimulateSections(const Flags& f, int rank, int world, pb::Progress* p) {
  // Every rank's jitter is at most 2%; the slow rank (if any) may be busier still.
  double slowest = (kDataShare + kComputeShare + kOptimizerShare) * 1.02;
  if (f.slow_rank >= 0 && f.slow_rank < world) {
    slowest = std::max(slowest, BusyOf(f, f.slow_rank).busy());
  }
  const double units = slowest + kMinCommShare;
  const double unit_s = 1.0 / (f.steps_per_second * units);  // seconds per unit of a step
  const Sections x = BusyOf(f, rank);
  const double steps = static_cast<double>(p->step());
  p->set_section_steps(p->step());
  p->set_data_seconds(steps * x.data * unit_s);
  p->set_compute_seconds(steps * x.compute * unit_s);
  p->set_optimizer_seconds(steps * x.optimizer * unit_s);
  p->set_communication_seconds(steps * (units - x.busy()) * unit_s);
}

int Main(const Flags& f) {
  auto read = WaitForDistFile(f.dist_file, {"", 0}, absl::Seconds(30));
  if (!read.ok()) {
    std::fprintf(stderr, "loadgen: %s\n", std::string(read.status().message()).c_str());
    return 1;
  }
  const DistFileContents contents = *read;
  const std::string address = contents.grpc_address;
  const int channels = f.channels > 0 ? f.channels : std::max(1, f.workers / 8);
  const std::string auth = "Bearer " + contents.token;
  std::vector<std::unique_ptr<pb::Coordinator::Stub>> stubs;
  for (int c = 0; c < channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one TCP connection per channel
    args.SetInt("loadgen.channel", c);
    stubs.push_back(pb::Coordinator::NewStub(grpc::CreateCustomChannel(
        address, bench::BenchChannelCredentials(contents.tls_cert, &args), args)));
  }
  // Connect every channel (Hello checks the nonce) before the workers register.
  for (auto& stub : stubs) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", auth);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    pb::HelloRequest req;
    req.set_nonce(contents.nonce);
    pb::HelloReply reply;
    grpc::Status s = stub->Hello(&ctx, req, &reply);
    if (!s.ok()) {
      std::fprintf(stderr, "loadgen: Hello to %s: %s\n", address.c_str(),
                   s.error_message().c_str());
      return 1;
    }
  }

  const int per_node = f.workers % f.per_node == 0 ? f.per_node : 1;
  std::vector<std::unique_ptr<Worker>> ws;
  std::atomic<int> ready{0};
  std::atomic<int> errors{0};
  absl::Notification all_ready;
  const int workers = f.workers;
  const absl::Time start = absl::Now();
  for (int i = 0; i < workers; ++i) {
    auto w = std::make_unique<Worker>();
    w->index = i;
    w->stub = stubs[static_cast<size_t>(i % channels)].get();
    w->register_req.set_host(absl::StrCat("node", i / per_node));
    w->register_req.set_node_rank(i / per_node);
    w->register_req.set_local_rank(i % per_node);
    w->register_req.set_local_world_size(per_node);
    w->register_req.set_pid(100000 + i);
    w->register_req.set_nonce(contents.nonce);
    w->register_ctx.AddMetadata("authorization", auth);
    w->register_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    Worker* raw = w.get();
    ws.push_back(std::move(w));
    raw->stub->async()->Register(
        &raw->register_ctx, &raw->register_req, &raw->register_reply,
        [raw, &ready, &errors, &all_ready, workers, &auth](grpc::Status s) {
          if (!s.ok()) {
            if (errors++ == 0) {
              std::fprintf(stderr, "register %d: %s\n", raw->index, s.error_message().c_str());
            }
            return;
          }
          raw->shard_req.mutable_worker()->set_rank(raw->register_reply.rank());
          raw->shard_req.mutable_worker()->set_pid(raw->register_req.pid());
          raw->shard_req.set_dataset_size(1281167);  // ImageNet-1k
          raw->shard_req.set_seed(0);
          raw->shard_req.set_shuffle(true);
          raw->shard_ctx.AddMetadata("authorization", auth);
          raw->stub->async()->GetShard(
              &raw->shard_ctx, &raw->shard_req, &raw->shard_reply,
              [raw, &ready, &errors, &all_ready, workers](grpc::Status s2) {
                if (!s2.ok()) {
                  if (errors++ == 0) {
                    std::fprintf(stderr, "shard %d: %s\n", raw->index, s2.error_message().c_str());
                  }
                  return;
                }
                if (ready.fetch_add(1) + 1 == workers) all_ready.Notify();
              });
        });
  }
  if (!all_ready.WaitForNotificationWithTimeout(absl::Seconds(120))) {
    std::fprintf(stderr, "loadgen: only %d of %d workers ready (%d errors)\n", ready.load(),
                 workers, errors.load());
    return 1;
  }
  const double rendezvous_s = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf("loadgen: %d workers registered in %.3fs; heartbeating\n", workers, rendezvous_s);
  std::fflush(stdout);

  // Heartbeats at 1 Hz from every worker (spread over the second).
  std::atomic<bool> stop{false};
  std::atomic<int64_t> heartbeats{0};
  std::atomic<int> finished{0};
  std::atomic<int> aborted{0};
  const absl::Time train_start = absl::Now();
  const int64_t total_steps = f.epochs * f.steps_per_epoch;
  auto report_done = [&](Worker* w, bool ok, int code, const std::string& message) {
    if (w->done.exchange(true)) return;
    auto* ctx = new grpc::ClientContext();
    ctx->AddMetadata("authorization", auth);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto* req = new pb::ReportDoneRequest();
    auto* reply = new pb::ReportDoneReply();
    req->mutable_worker()->set_rank(w->register_reply.rank());
    req->mutable_worker()->set_pid(w->register_req.pid());
    req->set_ok(ok);
    req->set_error_code(code);
    req->set_message(message);
    w->stub->async()->ReportDone(ctx, req, reply, [ctx, req, reply, &finished](grpc::Status) {
      finished++;
      delete ctx;
      delete req;
      delete reply;
    });
  };
  std::thread beater([&] {
    const absl::Duration period = absl::Seconds(f.heartbeat_s);
    while (!stop.load()) {
      const absl::Time round = absl::Now();
      for (int i = 0; i < workers && !stop.load(); ++i) {
        Worker* w = ws[static_cast<size_t>(i)].get();
        if (w->done.load()) continue;
        const int rank = w->register_reply.rank();
        const int command = w->command.load();
        if (command == pb::ABORT) {
          w->done = true;
          aborted++;
          continue;
        }
        if (command == pb::CHECKPOINT_AND_STOP) {
          report_done(w, false, static_cast<int>(grpc::StatusCode::CANCELLED),
                      "stopped after checkpoint (simulated)");
          continue;
        }
        pb::Progress progress = Simulate(f, rank, absl::ToDoubleSeconds(absl::Now() - train_start));
        if (f.step_sections || f.slow_rank >= 0) SimulateSections(f, rank, f.workers, &progress);
        if (f.finish && progress.step() >= total_steps) {
          report_done(w, true, 0, "");
          continue;
        }
        auto* ctx = new grpc::ClientContext();
        ctx->AddMetadata("authorization", auth);
        ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        auto* req = new pb::HeartbeatRequest();
        auto* reply = new pb::HeartbeatReply();
        req->mutable_worker()->set_rank(rank);
        req->mutable_worker()->set_pid(w->register_req.pid());
        *req->mutable_progress() = progress;
        w->stub->async()->Heartbeat(ctx, req, reply,
                                    [w, ctx, req, reply, &heartbeats](grpc::Status s) {
                                      if (s.ok()) {
                                        heartbeats++;
                                        if (reply->command() != pb::CONTINUE) {
                                          w->command = reply->command();
                                        }
                                      }
                                      delete ctx;
                                      delete req;
                                      delete reply;
                                    });
        if (i % 64 == 63) SleepUntil(round + period * (i + 1) / workers);
      }
      SleepUntil(round + period);
    }
  });

  const absl::Time end =
      f.duration_s > 0 ? absl::Now() + absl::Seconds(f.duration_s) : absl::InfiniteFuture();
  while (absl::Now() < end) {
    int done = 0;
    for (const auto& w : ws) done += w->done.load() ? 1 : 0;
    if (done == workers) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  stop = true;
  beater.join();
  absl::SleepFor(absl::Milliseconds(500));  // let the last calls land
  std::printf("loadgen: heartbeats_ok=%lld reported_done=%d aborted=%d errors=%d\n",
              static_cast<long long>(heartbeats.load()), finished.load(), aborted.load(),
              errors.load());
  return errors.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ddp

int main(int argc, char** argv) {
  ddp::UseReleaseMutexMode();
  ddp::Flags f;
  CLI::App app{"ddp-loadgen: simulated workers of a running coordinator"};
  app.add_option("--workers", f.workers, "Simulated workers")->check(CLI::Range(1, 65536));
  app.add_option("--channels", f.channels, "gRPC connections (default: one per 8 workers)");
  app.add_option("--per-node", f.per_node, "Workers per simulated node")
      ->check(CLI::Range(1, 1024));
  app.add_option("--dist-file", f.dist_file, "The running coordinator's dist_file")->required();
  app.add_option("--duration", f.duration_s, "Seconds to run (0 = until every worker is done)");
  app.add_option("--steps-per-second", f.steps_per_second, "Simulated training speed")
      ->check(CLI::PositiveNumber);
  app.add_option("--epochs", f.epochs, "Simulated epochs")->check(CLI::Range(1, 1000000));
  app.add_option("--steps-per-epoch", f.steps_per_epoch, "Simulated steps per epoch")
      ->check(CLI::Range(1, 100000000));
  app.add_option("--batch-size", f.batch_size, "Simulated per-worker batch")
      ->check(CLI::Range(1, 1000000));
  app.add_flag("--finish", f.finish, "Report done after the last step");
  app.add_option("--lag-rank", f.lag_rank, "This rank trails the others");
  app.add_flag("--step-sections", f.step_sections,
               "Report each step's time in data, compute, communication and optimizer");
  app.add_option("--slow-rank", f.slow_rank,
                 "This rank is --slow-factor times slower in --slow-section (a straggler; implies "
                 "--step-sections)");
  app.add_option("--slow-section", f.slow_section, "The slow rank's slow section")
      ->check(CLI::IsMember({"data", "compute", "optimizer"}));
  app.add_option("--slow-factor", f.slow_factor, "How many times slower the slow rank is")
      ->check(CLI::Range(1.0, 100.0));
  app.add_option("--heartbeat", f.heartbeat_s, "Seconds between heartbeats")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  return ddp::Main(f);
}
