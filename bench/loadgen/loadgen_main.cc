// ddp-loadgen: N simulated workers (callback-API gRPC, a few threads, not N blocked threads)
// register, fetch their shard, heartbeat at 1 Hz and report done against an in-process
// coordinator. Prints the time until all N hold rank + shard, and GetStatus latency
// percentiles measured while every worker heartbeats.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/dist_file.h"
#include "coordinator/job.h"
#include "coordinator/kv_store.h"
#include "coordinator/server.h"
#include "proto/coordinator.grpc.pb.h"

namespace pb = ::slurm_ddp::v1;

namespace ddp {
namespace {

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
};

int Main(int workers, int channels, int per_node, double status_seconds) {
  auto contents = *NewDistFileContents("loadgen", 0, "", 0);
  JobConfig config;
  config.job_id = "loadgen";
  config.nonce = contents.nonce;
  config.world_size = workers;
  config.heartbeat_timeout = absl::Seconds(30);
  Job job(config, MonotonicClock::Get());
  KvStore store;
  ServerOptions options;
  options.token = contents.token;
  auto server = CoordinatorServer::Start(options, &job, &store, MonotonicClock::Get());
  if (!server.ok()) {
    std::fprintf(stderr, "loadgen: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  const std::string auth = "Bearer " + contents.token;
  std::vector<std::unique_ptr<pb::Coordinator::Stub>> stubs;
  for (int c = 0; c < channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one TCP connection per channel
    args.SetInt("loadgen.channel", c);
    stubs.push_back(pb::Coordinator::NewStub(
        grpc::CreateCustomChannel((*server)->address(), grpc::InsecureChannelCredentials(), args)));
  }
  // Warm the connections so the measurement is the rendezvous, not TCP setup of idle channels.
  for (auto& stub : stubs) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", auth);
    pb::HelloRequest req;
    req.set_nonce(contents.nonce);
    pb::HelloReply reply;
    stub->Hello(&ctx, req, &reply);
  }

  std::vector<std::unique_ptr<Worker>> ws;
  std::atomic<int> ready{0};
  std::atomic<int> errors{0};
  absl::Notification all_ready;
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
            errors++;
            std::fprintf(stderr, "register %d: %s\n", raw->index, s.error_message().c_str());
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
                  errors++;
                  std::fprintf(stderr, "shard %d: %s\n", raw->index, s2.error_message().c_str());
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

  // Heartbeats at 1 Hz from every worker (spread over the second) while we time GetStatus.
  std::atomic<bool> stop{false};
  std::atomic<int64_t> heartbeats{0};
  std::thread beater([&] {
    while (!stop.load()) {
      const absl::Time round = absl::Now();
      for (int i = 0; i < workers && !stop.load(); ++i) {
        auto* ctx = new grpc::ClientContext();
        ctx->AddMetadata("authorization", auth);
        auto* req = new pb::HeartbeatRequest();
        auto* reply = new pb::HeartbeatReply();
        req->mutable_worker()->set_rank(ws[static_cast<size_t>(i)]->register_reply.rank());
        req->mutable_worker()->set_pid(ws[static_cast<size_t>(i)]->register_req.pid());
        req->mutable_progress()->set_step(1);
        ws[static_cast<size_t>(i)]->stub->async()->Heartbeat(
            ctx, req, reply, [ctx, req, reply, &heartbeats](grpc::Status s) {
              if (s.ok()) heartbeats++;
              delete ctx;
              delete req;
              delete reply;
            });
        if (i % 64 == 63) SleepUntil(round + absl::Seconds(1) * (i + 1) / workers);
      }
      SleepUntil(round + absl::Seconds(1));
    }
  });
  std::vector<double> latencies_ms;
  const absl::Time measure_end = absl::Now() + absl::Seconds(status_seconds);
  while (absl::Now() < measure_end) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", auth);
    pb::GetStatusRequest req;
    pb::JobStatus reply;
    const absl::Time t0 = absl::Now();
    grpc::Status s = stubs[0]->GetStatus(&ctx, req, &reply);
    if (s.ok()) latencies_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
    absl::SleepFor(absl::Milliseconds(20));
  }
  stop = true;
  beater.join();
  absl::SleepFor(absl::Milliseconds(300));  // let the last heartbeats land
  std::sort(latencies_ms.begin(), latencies_ms.end());
  auto pct = [&](double p) {
    if (latencies_ms.empty()) return -1.0;
    return latencies_ms[std::min(
        latencies_ms.size() - 1,
        static_cast<size_t>(p * static_cast<double>(latencies_ms.size())))];
  };
  std::printf(
      "workers=%d channels=%d rendezvous_s=%.4f status_p50_ms=%.3f status_p99_ms=%.3f "
      "status_samples=%zu heartbeats_ok=%lld errors=%d\n",
      workers, channels, rendezvous_s, pct(0.50), pct(0.99), latencies_ms.size(),
      static_cast<long long>(heartbeats.load()), errors.load());
  (*server)->Shutdown(absl::Seconds(1));
  return errors.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ddp

int main(int argc, char** argv) {
  int workers = 1024;
  int channels = 0;
  int per_node = 8;
  double status_seconds = 5;
  CLI::App app{"ddp-loadgen: simulated workers against an in-process coordinator"};
  app.add_option("--workers", workers, "Simulated workers")->check(CLI::Range(1, 65536));
  app.add_option("--channels", channels, "gRPC connections (default: one per 8 workers)");
  app.add_option("--per-node", per_node, "Workers per simulated node")->check(CLI::Range(1, 1024));
  app.add_option("--status-seconds", status_seconds, "How long to time GetStatus");
  CLI11_PARSE(app, argc, argv);
  if (workers % per_node != 0) per_node = 1;
  if (channels <= 0) channels = std::max(1, workers / 8);
  return ddp::Main(workers, channels, per_node, status_seconds);
}
