#include "coordinator/rpc/metrics_interceptor.h"

#include <chrono>

#include "absl/time/clock.h"

namespace ddp {
namespace {

class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(RpcMetrics* metrics, const char* method)
      : metrics_(metrics), method_(method == nullptr ? "" : method), start_(absl::Now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      metrics_->Record(method_, static_cast<int>(methods->GetSendStatus().error_code()),
                       absl::Now() - start_);
    }
    methods->Proceed();
  }

 private:
  RpcMetrics* const metrics_;
  const char* const method_;  // owned by the server's method table
  const absl::Time start_;
};

class MetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MetricsInterceptorFactory(RpcMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new MetricsInterceptor(metrics_, info->method());
  }

 private:
  RpcMetrics* const metrics_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeRpcMetricsInterceptor(
    RpcMetrics* metrics) {
  return std::make_unique<MetricsInterceptorFactory>(metrics);
}

}  // namespace ddp
