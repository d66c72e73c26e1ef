#include "coordinator/rpc/epoch_interceptor.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace ddp {
namespace {

class EpochInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit EpochInterceptor(const std::string* epoch) : epoch_(epoch) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kEpochHeaderName, *epoch_);
    }
    methods->Proceed();
  }

 private:
  const std::string* const epoch_;  // the factory's
};

class EpochInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit EpochInterceptorFactory(int64_t epoch) : epoch_(absl::StrCat(epoch)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* /*info*/) override {
    return new EpochInterceptor(&epoch_);
  }

 private:
  const std::string epoch_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeEpochInterceptor(
    int64_t epoch) {
  return std::make_unique<EpochInterceptorFactory>(epoch);
}

}  // namespace ddp
