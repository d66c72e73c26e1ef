#include "coordinator/rpc/server.h"

#include <arpa/inet.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <netdb.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/ops/status_cache.h"
#include "coordinator/rpc/async_queues.h"
#include "coordinator/rpc/epoch_interceptor.h"
#include "coordinator/rpc/metrics_interceptor.h"
#include "coordinator/rpc/service.h"
#include "coordinator/rpc/validation.h"
#include "proto/transport_args.h"

namespace ddp {
namespace {

// Transport memory allowed per rank of the job, above ServerOptions::memory_quota_bytes.
constexpr size_t kQuotaPerRank = size_t{64} << 10;

// Reflection on this builder or not. Linking grpc++_reflection registers its plugin for every
// server of the process (a static initializer calls InitProtoReflectionServerBuilderPlugin), so
// "off" has to take it out again; "on" puts in exactly one.
class ReflectionOption : public grpc::ServerBuilderOption {
 public:
  explicit ReflectionOption(bool on) : on_(on) {}
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    const std::string name = grpc::reflection::ProtoServerReflectionPlugin().name();
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [&](const std::unique_ptr<grpc::ServerBuilderPlugin>& p) {
                                    return p->name() == name;
                                  }),
                   plugins->end());
    if (on_) plugins->push_back(std::make_unique<grpc::reflection::ProtoServerReflectionPlugin>());
  }

 private:
  const bool on_;
};

}  // namespace

std::string DefaultListenHost() {
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(name, nullptr, &hints, &res) != 0 || res == nullptr) return "127.0.0.1";
  std::string host = "127.0.0.1";
  for (addrinfo* p = res; p != nullptr; p = p->ai_next) {
    auto* in = reinterpret_cast<sockaddr_in*>(p->ai_addr);
    char buf[INET_ADDRSTRLEN];
    if (::inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf)) == nullptr) continue;
    if (absl::string_view(buf).substr(0, 4) == "127.") continue;
    host = buf;
    break;
  }
  ::freeaddrinfo(res);
  return host;
}

CoordinatorServer::CoordinatorServer(Job* job, KvStore* store, const Clock* clock,
                                     const ServerOptions& options)
    : job_(job), store_(store), clock_(clock), tick_(options.tick) {
  std::vector<std::string> methods;
  const auto* service = slurm_ddp::v1::HelloRequest::descriptor()->file()->service(0);
  for (int i = 0; i < service->method_count(); ++i) methods.push_back(service->method(i)->name());
  metrics_ = std::make_unique<RpcMetrics>(methods);
  cache_ = std::make_unique<StatusCache>(job, clock, options.status_max_age);
  history_ = std::make_unique<History>(options.history_capacity,
                                       absl::ToDoubleSeconds(options.history_interval));
}

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const ServerOptions& options, Job* job, KvStore* store, const Clock* clock) {
  absl::StatusOr<Authenticator> auth = Authenticator::Create(options.tokens);
  if (!auth.ok()) return auth.status();
  std::unique_ptr<CoordinatorServer> s(new CoordinatorServer(job, store, clock, options));
  s->auth_ = std::make_unique<Authenticator>(*std::move(auth));
  s->refusals_ = std::make_unique<RefusalLog>(clock, options.refusal_log_interval, options.log);
  CallBudgets budgets = options.budgets;
  if (budgets.worker_calls == 0) {
    budgets.worker_calls = 16 * static_cast<size_t>(job->config().world_size) + 1024;
  }
  s->gate_ = std::make_unique<CallGate>(s->auth_.get(), s->refusals_.get(), clock, budgets);
  if (options.fence) s->gate_->SetFence(options.fence);
  TlsIdentity tls = options.tls;
  if (tls.key_pem.empty() || tls.cert_pem.empty()) {
    ASSIGN_OR_RETURN(tls, NewTlsIdentity());
  }
  if (!options.plaintext) s->tls_cert_ = tls.cert_pem;
  s->service_ =
      std::make_unique<CoordinatorService>(job, store, s->gate_.get(), s->cache_.get(), clock);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({tls.key_pem, tls.cert_pem});
  ssl.client_certificate_request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  builder.AddListeningPort(
      options.listen,
      options.plaintext ? grpc::InsecureServerCredentials() : grpc::SslServerCredentials(ssl),
      &s->port_);
  builder.RegisterService(s->service_.get());
  builder.SetOption(std::make_unique<ReflectionOption>(options.reflection));
  builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxRequestBytes));
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_streams_per_connection);
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, options.max_header_bytes);
  SetCoordinatorServerArgs(&builder);
  grpc::ResourceQuota quota("ddp-coordinator");
  // Every connection holds read buffers against the quota; under pressure gRPC sends idle
  // connections GOAWAY to reclaim memory, which at 16,384 connections refused registrations. So
  // the bound grows with the world (one connection per worker, one per node task).
  quota.Resize(options.memory_quota_bytes +
               kQuotaPerRank * static_cast<size_t>(job->config().world_size));
  if (options.reflection) quota.SetMaxThreads(kReflectionThreads);
  builder.SetResourceQuota(quota);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(MakeRpcMetricsInterceptor(s->metrics_.get()));
  if (options.epoch > 0) interceptors.push_back(MakeEpochInterceptor(options.epoch));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> status_cq;
  status_cq.push_back(builder.AddCompletionQueue(/*is_frequently_polled=*/false));
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> parked_cqs;
  for (int i = 0; i < kParkedQueues; ++i) {
    parked_cqs.push_back(builder.AddCompletionQueue(/*is_frequently_polled=*/false));
  }
  s->server_ = builder.BuildAndStart();
  s->status_queue_ = std::make_unique<AsyncQueues>(
      s->service_.get(), s->gate_.get(),
      std::vector<CoordinatorService::AsyncMethod>{s->service_->status_method()},
      /*requests_ahead=*/1, std::move(status_cq));
  s->parked_queues_ = std::make_unique<AsyncQueues>(s->service_.get(), s->gate_.get(),
                                                    s->service_->parked_methods(),
                                                    kParkedRequestsAhead, std::move(parked_cqs));
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen));
  }
  s->status_queue_->Start();
  s->parked_queues_->Start();
  std::string host = options.listen.substr(0, options.listen.rfind(':'));
  if (host.empty() || host == "0.0.0.0" || host == "[::]") host = DefaultListenHost();
  s->address_ = absl::StrCat(host, ":", s->port_);
  s->ticker_ = std::thread([raw = s.get()] { raw->TickLoop(); });
  return s;
}

void CoordinatorServer::TickLoop() {
  while (!stop_ticker_.WaitForNotificationWithTimeout(tick_)) {
    job_->Tick();
    store_->ExpireWaiters(clock_->Now());
    // A newer membership generation forms: the group of the one it replaces can never be built,
    // so ranks still waiting for a peer's address under it (a peer lost right after that
    // generation formed) learn it now and rejoin, rather than at the group's timeout.
    if (const std::string superseded = job_->SupersededStorePrefix(); !superseded.empty()) {
      store_->ClosePrefix(superseded,
                          absl::AbortedError(absl::StrCat(
                              "the process group under '", superseded,
                              "' can no longer form: a newer membership generation is forming")));
    }
    gate_->ExpireAwaitedRequests();
    // Refresh() takes a state change at once where the CPU budget allows (status_cache.h); while
    // workers register, once a second: a build per tick would copy the whole world under the
    // registration lock 20 times a second (every registration is a major change).
    cache_->Refresh();
    std::shared_ptr<const StatusSnapshot> snapshot = cache_->Current();
    history_->Add(snapshot->status);
    service_->PollWatchers();
    refusals_->Flush();
  }
}

uint64_t CoordinatorServer::status_calls() const { return service_->status_calls(); }

void CoordinatorServer::SetHttpPort(int port) { service_->SetHttpPort(port); }

void CoordinatorServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  // Finish every parked call first (a callback-API server waits for them): registrations end
  // with the job's failure, store waiters with UNAVAILABLE.
  if (!job_->Finished()) job_->ShutDown("coordinator shutting down");
  store_->CancelAll(absl::UnavailableError("coordinator shutting down"));
  if (server_ != nullptr) server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  // After the server's: no call is in flight on the status queue any more.
  if (status_queue_ != nullptr) status_queue_->Shutdown();
  if (parked_queues_ != nullptr) parked_queues_->Shutdown();
  stop_ticker_.Notify();
  if (ticker_.joinable()) ticker_.join();
}

CoordinatorServer::~CoordinatorServer() { Shutdown(absl::Seconds(1)); }

}  // namespace ddp
