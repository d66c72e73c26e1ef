// ddp-statusbench: sequential status reads against a running coordinator (found through its
// dist_file): the GetStatus RPC, GET /api/status and GET /metrics, each for --seconds, with
// --pause between requests. Prints one row per endpoint: p50/p99/max latency and sizes.
// bench/status.sh runs it while ddp-loadgen keeps thousands of simulated workers heartbeating.
#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/time/clock.h"
#include "bench/loadgen/bench_credentials.h"
#include "common/dist_file.h"
#include "google/protobuf/arena.h"
#include "proto/coordinator.grpc.pb.h"

namespace pb = ::slurm_ddp::v1;

namespace {

struct Result {
  std::vector<double> ms;
  size_t bytes = 0;
  int errors = 0;
};

Result Measure(double seconds, double pause_ms, const std::function<long()>& once) {
  Result r;
  const absl::Time end = absl::Now() + absl::Seconds(seconds);
  while (absl::Now() < end) {
    const absl::Time t0 = absl::Now();
    const long bytes = once();
    const double ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
    if (bytes < 0) {
      r.errors++;
    } else {
      r.ms.push_back(ms);
      r.bytes = static_cast<size_t>(bytes);
    }
    absl::SleepFor(absl::Milliseconds(pause_ms));
  }
  std::sort(r.ms.begin(), r.ms.end());
  return r;
}

double Pct(const std::vector<double>& v, double p) {
  if (v.empty()) return -1;
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  std::string dist_file;
  double seconds = 10;
  double pause_ms = 20;
  CLI::App app{"ddp-statusbench: status read latency against a running coordinator"};
  app.add_option("--dist-file", dist_file, "The job's dist_file")->required();
  app.add_option("--seconds", seconds, "Seconds per endpoint");
  app.add_option("--pause-ms", pause_ms, "Pause between requests");
  CLI11_PARSE(app, argc, argv);
  auto file = ddp::ReadDistFile(dist_file, {"", 0});
  if (!file.ok()) {
    std::fprintf(stderr, "statusbench: %s\n", std::string(file.status().message()).c_str());
    return 1;
  }
  const std::string auth = "Bearer " + file->view_token;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  auto stub = pb::Coordinator::NewStub(grpc::CreateCustomChannel(
      file->grpc_address, ddp::bench::BenchChannelCredentials(file->tls_cert, &args), args));
  const std::string host = file->grpc_address.substr(0, file->grpc_address.rfind(':'));
  httplib::Client http(host, file->http_port);
  http.set_keep_alive(true);
  http.set_read_timeout(10);
  const httplib::Headers headers = {{"Authorization", auth}};
  auto fetch = [&](pb::JobStatus* reply) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", auth);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub->GetStatus(&ctx, pb::GetStatusRequest(), reply).ok();
  };
  // The first call connects; its reply gives the size and how much of the GetStatus row is the
  // client's own protobuf parsing.
  long rpc_bytes = -1;
  double parse_ms = -1;
  if (pb::JobStatus reply; fetch(&reply)) {
    const std::string wire = reply.SerializeAsString();
    rpc_bytes = static_cast<long>(wire.size());
    constexpr int kParses = 50;
    const absl::Time t0 = absl::Now();
    for (int i = 0; i < kParses; ++i) {
      google::protobuf::Arena arena;
      google::protobuf::Arena::CreateMessage<pb::JobStatus>(&arena)->ParseFromString(wire);
    }
    parse_ms = absl::ToDoubleMilliseconds(absl::Now() - t0) / kParses;
  }
  auto rpc = [&]() -> long {
    // Parsed into an arena, as ddpctl (OperatorClient) does: 4096 RankStatus messages otherwise
    // cost thousands of mallocs and frees per reply.
    google::protobuf::Arena arena;
    if (!fetch(google::protobuf::Arena::CreateMessage<pb::JobStatus>(&arena))) return -1;
    return rpc_bytes;  // measured once, outside the timing
  };
  auto get = [&](const char* path) {
    return [&, path]() -> long {
      auto res = http.Get(path, headers);
      if (!res || res->status != 200) return -1;
      return static_cast<long>(res->body.size());
    };
  };
  std::printf("%-16s %10s %10s %10s %8s %10s %7s\n", "endpoint", "p50_ms", "p99_ms", "max_ms",
              "samples", "bytes", "errors");
  const std::vector<std::pair<const char*, std::function<long()>>> endpoints = {
      {"GetStatus (gRPC)", rpc},
      {"GET /api/status", get("/api/status")},
      {"GET /metrics", get("/metrics")}};
  int errors = 0;
  for (const auto& [name, once] : endpoints) {
    Result r = Measure(seconds, pause_ms, once);
    errors += r.errors;
    std::printf("%-16s %10.3f %10.3f %10.3f %8zu %10zu %7d\n", name, Pct(r.ms, 0.5),
                Pct(r.ms, 0.99), r.ms.empty() ? -1.0 : r.ms.back(), r.ms.size(), r.bytes, r.errors);
    std::fflush(stdout);
  }
  std::printf("(client-side parse of one GetStatus reply, included above: %.3f ms)\n", parse_ms);
  return errors == 0 ? 0 : 1;
}
