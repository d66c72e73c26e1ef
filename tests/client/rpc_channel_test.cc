// How client calls retry and classify errors, against real gRPC servers on loopback: nothing
// listening, and a scripted coordinator whose Hello answers UNAVAILABLE, answers
// DEADLINE_EXCEEDED itself, never answers, or answers OK, call by call. And whom the client
// trusts: only a server holding the key of the certificate it was given; one with another key,
// or a plaintext one, never sees a call (nor the token it carries).
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/coordinator_client.h"
#include "common/dist_file.h"
#include "coordinator/rpc/tls_identity.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"

namespace ddp {
namespace {

namespace pb = ::slurm_ddp::v1;
using ::testing::HasSubstr;

enum class Act { kUnavailable, kDeadlineExceeded, kHang, kOk };

class ScriptedCoordinator final : public pb::Coordinator::CallbackService {
 public:
  // `epoch`: the coordinator epoch its replies carry (kEpochHeader; none for epoch 0).
  explicit ScriptedCoordinator(std::vector<Act> script, int epoch = 0)
      : script_(std::move(script)), epoch_(epoch) {}

  grpc::ServerUnaryReactor* Hello(grpc::CallbackServerContext* ctx, const pb::HelloRequest*,
                                  pb::HelloReply* resp) override {
    if (epoch_ > 0) ctx->AddInitialMetadata("ddp-epoch", std::to_string(epoch_));
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    absl::MutexLock lock(&mu_);
    const Act act = script_[std::min(calls_, script_.size() - 1)];
    ++calls_;
    switch (act) {
      case Act::kUnavailable:
        reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "not ready"));
        break;
      case Act::kDeadlineExceeded:  // the very text gRPC uses for a client's own deadline
        reactor->Finish(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"));
        break;
      case Act::kHang:
        hung_.push_back(reactor);
        break;
      case Act::kOk:
        resp->set_job_id("scripted");
        resp->set_world_size(1);
        reactor->Finish(grpc::Status::OK);
        break;
    }
    return reactor;
  }
  // Finishes the calls left hanging (before the server shuts down).
  void ReleaseHung() {
    absl::MutexLock lock(&mu_);
    for (grpc::ServerUnaryReactor* r : hung_) {
      r->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "test over"));
    }
    hung_.clear();
  }
  size_t calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  const std::vector<Act> script_;
  const int epoch_;
  mutable absl::Mutex mu_;
  size_t calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<grpc::ServerUnaryReactor*> hung_ ABSL_GUARDED_BY(mu_);
};

// The scripted coordinators' TLS identity (made once: key generation costs milliseconds).
const TlsIdentity& Identity() {
  static const TlsIdentity* identity = new TlsIdentity(*NewTlsIdentity());
  return *identity;
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsIdentity& identity) {
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({identity.key_pem, identity.cert_pem});
  return grpc::SslServerCredentials(ssl);
}

absl::Status ConnectTo(const std::string& address, absl::Duration timeout) {
  ConnectOptions o;
  o.address = address;
  o.token = "t";
  o.tls_cert = Identity().cert_pem;
  o.rpc_timeout = timeout;
  return ConnectToCoordinator(o).status();
}

TEST(RpcChannelTest, NothingListeningIsUnreachable) {
  // A bound socket that does not listen: every connection is refused.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string address = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
  const absl::Time start = absl::Now();
  absl::Status st = ConnectTo(address, absl::Seconds(2));
  ::close(fd);
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("unreachable"));
  EXPECT_THAT(std::string(st.message()), HasSubstr(address));
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
}

TEST(RpcChannelTest, RetriesAndClassification) {
  struct Case {
    const char* name;
    std::vector<Act> script;
    absl::StatusCode want;
    const char* want_text;
    size_t want_calls;
    bool waits_for_deadline;
  };
  const std::vector<Case> cases = {
      {"UNAVAILABLE is retried",
       {Act::kUnavailable, Act::kOk},
       absl::StatusCode::kOk,
       "",
       2,
       false},
      {"retries that run into our deadline: unreachable",
       {Act::kUnavailable, Act::kUnavailable, Act::kHang},
       absl::StatusCode::kUnavailable,
       "unreachable after",
       3,
       true},
      // The coordinator itself answered DEADLINE_EXCEEDED (with gRPC's own wording) before our
      // deadline: it is reachable, and its answer is passed on.
      {"the coordinator's own DEADLINE_EXCEEDED",
       {Act::kUnavailable, Act::kDeadlineExceeded},
       absl::StatusCode::kDeadlineExceeded,
       "Hello: Deadline Exceeded",
       2,
       false},
      // It took the first call and never answered: reachable but slow, not "unreachable".
      {"no answer to the first call",
       {Act::kHang},
       absl::StatusCode::kDeadlineExceeded,
       "Hello: ",
       1,
       true},
  };
  for (const Case& c : cases) {
    ScriptedCoordinator service(c.script);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", ServerCredentials(Identity()), &port);
    builder.RegisterService(&service);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    ASSERT_NE(server, nullptr);
    const absl::Time start = absl::Now();
    absl::Status st = ConnectTo(absl::StrCat("127.0.0.1:", port), absl::Milliseconds(1500));
    const absl::Duration took = absl::Now() - start;
    EXPECT_EQ(st.code(), c.want) << c.name << ": " << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr(c.want_text)) << c.name;
    EXPECT_EQ(service.calls(), c.want_calls) << c.name;
    if (c.waits_for_deadline) {
      EXPECT_GE(took, absl::Milliseconds(1400)) << c.name;
    } else {
      EXPECT_LT(took, absl::Milliseconds(1000)) << c.name;
    }
    service.ReleaseHung();
    server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }
}

// A server that answers every call but holds another key (a squatter with a self-signed
// certificate of the same name), or speaks plaintext: the handshake fails, no call arrives, and
// the client says the coordinator is unreachable.
TEST(RpcChannelTest, TrustsOnlyTheJobsCertificate) {
  const TlsIdentity other = *NewTlsIdentity();
  ASSERT_NE(other.cert_pem, Identity().cert_pem);
  struct Case {
    const char* name;
    std::shared_ptr<grpc::ServerCredentials> credentials;
  };
  const Case cases[] = {{"another key", ServerCredentials(other)},
                        {"plaintext", grpc::InsecureServerCredentials()}};
  for (const Case& c : cases) {
    ScriptedCoordinator service({Act::kOk});
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", c.credentials, &port);
    builder.RegisterService(&service);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    ASSERT_NE(server, nullptr);
    absl::Status st = ConnectTo(absl::StrCat("127.0.0.1:", port), absl::Milliseconds(1500));
    EXPECT_TRUE(absl::IsUnavailable(st)) << c.name << ": " << st;
    EXPECT_EQ(service.calls(), 0u) << c.name;
    server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }
  // The same server with the job's key is trusted.
  ScriptedCoordinator service({Act::kOk});
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", ServerCredentials(Identity()), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(ConnectTo(absl::StrCat("127.0.0.1:", port), absl::Seconds(5)).ok());
  EXPECT_EQ(service.calls(), 1u);
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
}

// A scripted coordinator with the job's identity on a free port.
struct ScriptedServer {
  explicit ScriptedServer(std::vector<Act> script, int epoch = 0)
      : service(std::move(script), epoch) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", ServerCredentials(Identity()), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
  }
  ~ScriptedServer() {
    service.ReleaseHung();
    server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port); }

  ScriptedCoordinator service;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

// A coordinator that stops answering without going away (its node stopped or hung: the
// connection stays open, calls wait) while a standby publishes the next epoch in the dist_file:
// a call waiting on the old one is sent to the new one at once, not at its deadline. A republish
// that names no newer coordinator leaves it waiting.
TEST(RpcChannelTest, ACallWaitingOnAHungCoordinatorFollowsANewerEpoch) {
  std::string dir = ::testing::TempDir() + "/rpc_channel_test.XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string dist_file = dir + "/dist_file";
  for (const bool newer : {true, false}) {
    ScriptedServer old_one({Act::kOk, Act::kHang});
    ScriptedServer new_one({Act::kOk}, /*epoch=*/1);
    ASSERT_NE(old_one.server, nullptr);
    ASSERT_NE(new_one.server, nullptr);
    absl::StatusOr<DistFileContents> contents =
        NewDistFileContents("scripted", 0, old_one.address(), 0);
    ASSERT_TRUE(contents.ok()) << contents.status();
    contents->tls_cert = Identity().cert_pem;
    ASSERT_TRUE(PublishDistFile(dist_file, *contents).ok());
    ConnectOptions o;
    o.dist_file = dist_file;
    o.expected_job_id = "scripted";
    o.rpc_timeout = absl::Seconds(3);
    absl::StatusOr<std::unique_ptr<CoordinatorApi>> api = ConnectToCoordinator(o);
    ASSERT_TRUE(api.ok()) << api.status();
    DistFileContents next = *contents;
    if (newer) {
      next.epoch = 1;
      next.coordinator_node = 1;
      next.grpc_address = new_one.address();
    }
    std::thread publisher([&] {
      absl::SleepFor(absl::Milliseconds(400));
      ASSERT_TRUE(PublishDistFile(dist_file, next).ok());
    });
    const absl::Time start = absl::Now();
    const absl::Status st = (*api)->Ping();
    const absl::Duration took = absl::Now() - start;
    publisher.join();
    EXPECT_EQ(old_one.service.calls(), 2u) << newer;
    if (newer) {
      EXPECT_TRUE(st.ok()) << st;
      EXPECT_EQ(new_one.service.calls(), 1u);
      EXPECT_LT(took, absl::Milliseconds(1500)) << "the call waited for its deadline";
    } else {
      EXPECT_TRUE(absl::IsDeadlineExceeded(st)) << st;
      EXPECT_EQ(new_one.service.calls(), 0u);
      EXPECT_GE(took, absl::Milliseconds(2900));
    }
  }
  std::system(("rm -rf '" + dir + "'").c_str());
}

// An address without the job's certificate is refused before anything is sent.
TEST(RpcChannelTest, AnAddressNeedsTheCertificate) {
  ConnectOptions o;
  o.address = "127.0.0.1:1";
  o.token = "t";
  absl::Status st = ConnectToCoordinator(o).status();
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("certificate"));
}

}  // namespace
}  // namespace ddp
