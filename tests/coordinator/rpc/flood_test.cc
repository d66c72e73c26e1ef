// Hostile callers against the real ddp-coordinator binary while a job runs: 64 concurrent
// unauthenticated StoreCheck calls of 16 MiB (repeated empty keys, the body that once took the
// coordinator from 19 MB to 1 GB), oversized calls with a real token, and calls with the wrong
// role's token. The coordinator must refuse them all without reading their bodies, keep its
// peak RSS under 256 MB, keep answering the job's heartbeats, and log the refusals at most about
// once a second, with counts. And hostile text: a stop reason that a byte cut would break inside
// a character (the reproduction of issue 16), longer than the limit, or not UTF-8 at all, sent
// straight to the coordinator without the client's own clamping.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/coordinator_client.h"
#include "client/operator_client.h"
#include "common/dist_file.h"
#include "common/exit_codes.h"
#include "common/utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/coordinator.pb.h"
#include "tests/testing/sanitizers.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;

using ::ddp::testing::kUnderSanitizer;

constexpr size_t kBody = 16 * 1024 * 1024 - 5;  // with the 5-byte gRPC frame header: 16 MiB

// A StoreCheckRequest of `size` bytes: field 1 (keys), empty, over and over.
const std::string& EmptyKeysBody() {
  static const std::string* body = [] {
    auto* s = new std::string(kBody, '\0');
    for (size_t i = 0; i + 1 < s->size(); i += 2) (*s)[i] = 0x0a;
    return s;
  }();
  return *body;
}

// Peak resident set (VmHWM) of `pid`, in bytes; 0 when unreadable.
size_t PeakRss(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      size_t kb = 0;
      std::istringstream(line.substr(6)) >> kb;
      return kb * 1024;
    }
  }
  return 0;
}

struct CallResult {
  grpc::StatusCode code;
  std::string message;
  std::string reply;  // the reply's bytes, when OK
};

// One unary call of `method` with `body` (shared, not copied) on a connection of its own.
std::future<CallResult> RawCall(const std::string& cert, const std::string& address,
                                const std::string& method, const std::string& body,
                                const std::string& token) {
  return std::async(std::launch::async, [=] {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(64 << 20);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one TCP connection per call
    args.SetSslTargetNameOverride(kTlsServerName);
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = cert;  // the job's certificate: a flood gets past TLS, as a peer would
    auto channel = grpc::CreateCustomChannel(address, grpc::SslCredentials(ssl), args);
    grpc::GenericStub stub(channel);
    grpc::Slice slice(const_cast<char*>(body.data()), body.size(), grpc::Slice::STATIC_SLICE);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer reply;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    std::promise<grpc::Status> done;
    stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &reply,
                   [&](grpc::Status s) { done.set_value(s); });
    grpc::Status s = done.get_future().get();
    std::string bytes;
    if (s.ok()) {
      std::vector<grpc::Slice> slices;
      if (reply.Dump(&slices).ok()) {
        for (const grpc::Slice& piece : slices) {
          bytes.append(reinterpret_cast<const char*>(piece.begin()), piece.size());
        }
      }
    }
    return CallResult{s.error_code(), s.error_message(), std::move(bytes)};
  });
}

// Waits for every call and expects each to end with `want`; returns how many did.
int ExpectEach(std::vector<std::future<CallResult>>* calls, grpc::StatusCode want) {
  int n = 0;
  for (auto& f : *calls) {
    const CallResult r = f.get();
    EXPECT_EQ(r.code, want) << r.message;
    n += r.code == want ? 1 : 0;
  }
  return n;
}

// Waits for `call` and expects it to end with `want` and a message containing `text`.
void ExpectRefused(std::future<CallResult>* call, grpc::StatusCode want, const std::string& text) {
  const CallResult r = call->get();
  EXPECT_EQ(r.code, want) << r.message;
  EXPECT_THAT(r.message, HasSubstr(text));
}

class FloodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("DDP_BIN_DIR");
    if (bin == nullptr) GTEST_SKIP() << "DDP_BIN_DIR is unset (run through ctest)";
    std::string tmpl = ::testing::TempDir() + "/flood.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    dist_file_ = dir_ + "/dist_file.flood";
    log_ = dir_ + "/coordinator.log";
    const std::string exe = std::string(bin) + "/ddp-coordinator";
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      std::freopen("/dev/null", "w", stderr);
      ::execl(exe.c_str(), exe.c_str(), "--world-size", "1", "--job-id", "flood", "--dist-file",
              dist_file_.c_str(), "--listen", "127.0.0.1:0", "--log-file", log_.c_str(),
              "--heartbeat-timeout", "10", "--linger", "0.2", nullptr);
      ::_exit(127);
    }
    auto file = WaitForDistFile(dist_file_, {"flood", 0}, absl::Seconds(20));
    ASSERT_TRUE(file.ok()) << file.status();
    contents_ = *file;
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  ConnectOptions Options(TokenRole role) const {
    ConnectOptions o;
    o.dist_file = dist_file_;
    o.role = role;
    o.rpc_timeout = absl::Seconds(5);
    return o;
  }
  // A worker registered as `host` (the job's one rank); null, with a test failure, otherwise.
  std::unique_ptr<CoordinatorApi> RegisteredWorker(const std::string& host) const {
    auto worker = ConnectToCoordinator(Options(TokenRole::kWorker));
    if (!worker.ok()) {
      ADD_FAILURE() << worker.status();
      return nullptr;
    }
    WorkerIdentity who;
    who.host = host;
    if (absl::Status st = (*worker)->Register(who, absl::Seconds(10)).status(); !st.ok()) {
      ADD_FAILURE() << st;
      return nullptr;
    }
    return *std::move(worker);
  }
  std::string Log() const {
    std::ifstream in(log_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string dir_;
  std::string dist_file_;
  std::string log_;
  DistFileContents contents_;
  pid_t pid_ = -1;
};

TEST_F(FloodTest, SixtyFourUnauthenticatedSixteenMegabyteCallsCostNothing) {
  std::unique_ptr<CoordinatorApi> worker = RegisteredWorker("flood-host");
  ASSERT_NE(worker, nullptr);
  ASSERT_TRUE(worker->StoreSet("real", {'1'}).ok());

  // The job's heartbeats, every 100 ms, throughout.
  std::atomic<bool> stop{false};
  std::atomic<int> beats{0};
  std::atomic<int> failed_beats{0};
  std::string first_failure;
  std::thread heart([&] {
    while (!stop.load()) {
      absl::StatusOr<HeartbeatReply> r = worker->Heartbeat(ProgressReport());
      if (r.ok()) {
        ++beats;
      } else if (failed_beats++ == 0) {
        first_failure = r.status().ToString();
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
  });

  const std::string address = contents_.grpc_address;
  const std::string check = "/slurm_ddp.v1.Coordinator/StoreCheck";
  const absl::Time start = absl::Now();
  std::vector<std::future<CallResult>> flood;
  for (int i = 0; i < 64; ++i)
    flood.push_back(RawCall(contents_.tls_cert, address, check, EmptyKeysBody(), ""));
  // Oversized with the right token, and a store write with the view token.
  std::vector<std::future<CallResult>> oversized;
  for (int i = 0; i < 4; ++i) {
    oversized.push_back(
        RawCall(contents_.tls_cert, address, check, EmptyKeysBody(), contents_.token));
  }
  std::future<CallResult> view_write =
      RawCall(contents_.tls_cert, address, "/slurm_ddp.v1.Coordinator/StoreSet",
              std::string("\x0a\x01k\x12\x01v", 6), contents_.view_token);
  const int unauthenticated = ExpectEach(&flood, grpc::StatusCode::UNAUTHENTICATED);
  ExpectEach(&oversized, grpc::StatusCode::RESOURCE_EXHAUSTED);
  ExpectRefused(&view_write, grpc::StatusCode::PERMISSION_DENIED,
                "needs the worker token; this is the view token");
  const absl::Duration took = absl::Now() - start;
  absl::SleepFor(absl::Milliseconds(1500));  // the last summary line and a few more beats
  stop = true;
  heart.join();

  const size_t peak = PeakRss(pid_);
  std::printf("flood: %d refused in %.1f s; coordinator peak RSS %.1f MB; %d heartbeats ok\n",
              unauthenticated, absl::ToDoubleSeconds(took), peak / 1e6, beats.load());
  EXPECT_EQ(::waitpid(pid_, nullptr, WNOHANG), 0) << "the coordinator died";
  EXPECT_GT(peak, 0u);
  if (kUnderSanitizer) {
    std::printf(
        "peak RSS not checked: a sanitizer build's shadow memory and quarantine dominate\n");
  } else {
    EXPECT_LT(peak, size_t{256} << 20) << "peak RSS " << peak;
  }
  EXPECT_EQ(failed_beats.load(), 0) << first_failure;
  EXPECT_GE(beats.load(), 10);

  // Still serving the job: its store is intact, the view token reads status.
  auto value = worker->StoreGet("real", absl::Seconds(5));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(std::string(value->begin(), value->end()), "1");
  EXPECT_FALSE(*worker->StoreCheck({"k"}));  // the view token's write changed nothing
  auto op = OperatorClient::Connect(Options(TokenRole::kView));
  ASSERT_TRUE(op.ok()) << op.status();
  auto status = (*op)->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->state, JobState::kRunning);

  // Refusals: summarized lines, at most about one a second, whose counts add up.
  const std::string log = Log();
  std::regex line_re("refused ([0-9]+) call\\(s\\)");
  int lines = 0;
  long counted = 0;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line_re);
       it != std::sregex_iterator(); ++it) {
    ++lines;
    counted += std::stol((*it)[1]);
  }
  EXPECT_EQ(counted, 64 + 1) << log;  // the flood and the view token's write
  EXPECT_LE(lines, static_cast<int>(absl::ToDoubleSeconds(took)) + 3) << log;
  EXPECT_THAT(log, HasSubstr("StoreCheck: missing authorization token"));
}

// GetStatus has a completion queue and thread of its own (async_queues.h); it keeps the gate
// before the body: unauthenticated 16 MiB calls cost nothing, the worker token is refused, a
// body over its bound is refused, and the view token gets the snapshot, while heartbeats go on.
TEST_F(FloodTest, GetStatusOnItsOwnQueueRefusesBeforeReadingAndAnswersTheViewToken) {
  std::unique_ptr<CoordinatorApi> worker = RegisteredWorker("status-host");
  ASSERT_NE(worker, nullptr);
  ProgressReport progress;
  progress.phase = WorkerPhase::kTraining;
  progress.step = 7;
  ASSERT_TRUE(worker->Heartbeat(progress).ok());

  const std::string address = contents_.grpc_address;
  const std::string method = "/slurm_ddp.v1.Coordinator/GetStatus";
  std::vector<std::future<CallResult>> flood;
  for (int i = 0; i < 64; ++i)
    flood.push_back(RawCall(contents_.tls_cert, address, method, EmptyKeysBody(), ""));
  std::future<CallResult> as_worker =
      RawCall(contents_.tls_cert, address, method, "", contents_.token);
  const std::string two_kib(2048, '\0');
  std::future<CallResult> too_long =
      RawCall(contents_.tls_cert, address, method, two_kib, contents_.view_token);
  ExpectEach(&flood, grpc::StatusCode::UNAUTHENTICATED);
  ExpectRefused(&as_worker, grpc::StatusCode::PERMISSION_DENIED,
                "needs a view or control token; this is the worker token");
  ExpectRefused(&too_long, grpc::StatusCode::RESOURCE_EXHAUSTED,
                "GetStatus request of 2048 bytes exceeds its limit of 1024");

  // Heartbeats still answered; the view token reads the job.
  progress.step = 8;
  ASSERT_TRUE(worker->Heartbeat(progress).ok());
  const CallResult read =
      RawCall(contents_.tls_cert, address, method, "", contents_.view_token).get();
  ASSERT_EQ(read.code, grpc::StatusCode::OK) << read.message;
  slurm_ddp::v1::JobStatus status;
  ASSERT_TRUE(status.ParseFromString(read.reply));
  EXPECT_EQ(status.job_id(), "flood");
  EXPECT_EQ(status.world_size(), 1);
  ASSERT_EQ(status.ranks_size(), 1);
  EXPECT_EQ(status.ranks(0).host(), "status-host");

  const size_t peak = PeakRss(pid_);
  std::printf("GetStatus flood: coordinator peak RSS %.1f MB\n", peak / 1e6);
  EXPECT_EQ(::waitpid(pid_, nullptr, WNOHANG), 0) << "the coordinator died";
  if (!kUnderSanitizer) {
    EXPECT_LT(peak, size_t{256} << 20) << "peak RSS " << peak;
  }
  EXPECT_THAT(Log(), HasSubstr("GetStatus: missing authorization token"));
}

// Register and Rejoin park on completion queues of their own (async_queues.h); they keep the
// gate before the body as every method does: unauthenticated 16 MiB calls are refused unread,
// the view token is refused, a body over the method's bound is refused, and a body that does not
// parse is INVALID_ARGUMENT, while the job's heartbeats go on.
TEST_F(FloodTest, ParkedMethodsRefuseBeforeReadingAndKeepTheirBounds) {
  std::unique_ptr<CoordinatorApi> worker = RegisteredWorker("parked-host");
  ASSERT_NE(worker, nullptr);
  const std::string address = contents_.grpc_address;
  const std::string reg = "/slurm_ddp.v1.Coordinator/Register";
  const std::string rejoin = "/slurm_ddp.v1.Coordinator/Rejoin";
  std::vector<std::future<CallResult>> flood;
  for (int i = 0; i < 32; ++i) {
    flood.push_back(
        RawCall(contents_.tls_cert, address, i % 2 == 0 ? reg : rejoin, EmptyKeysBody(), ""));
  }
  std::future<CallResult> as_view =
      RawCall(contents_.tls_cert, address, reg, "", contents_.view_token);
  const std::string eight_kib(8192, '\0');
  std::future<CallResult> too_long =
      RawCall(contents_.tls_cert, address, reg, eight_kib, contents_.token);
  std::future<CallResult> garbage =
      RawCall(contents_.tls_cert, address, reg, "\xff\xff\xff", contents_.token);
  ExpectEach(&flood, grpc::StatusCode::UNAUTHENTICATED);
  ExpectRefused(&as_view, grpc::StatusCode::PERMISSION_DENIED,
                "needs the worker token; this is the view token");
  ExpectRefused(&too_long, grpc::StatusCode::RESOURCE_EXHAUSTED,
                "Register request of 8192 bytes exceeds its limit of 4096");
  ExpectRefused(&garbage, grpc::StatusCode::INVALID_ARGUMENT,
                "Register: the request does not parse");

  ASSERT_TRUE(worker->Heartbeat(ProgressReport()).ok());
  absl::SleepFor(absl::Milliseconds(1500));  // the refusal log's next summary line
  const size_t peak = PeakRss(pid_);
  std::printf("parked-method flood: coordinator peak RSS %.1f MB\n", peak / 1e6);
  EXPECT_EQ(::waitpid(pid_, nullptr, WNOHANG), 0) << "the coordinator died";
  if (!kUnderSanitizer) {
    EXPECT_LT(peak, size_t{256} << 20) << "peak RSS " << peak;
  }
  const std::string log = Log();
  EXPECT_THAT(log, HasSubstr("Register: missing authorization token"));
  EXPECT_THAT(log, HasSubstr("Rejoin: missing authorization token"));
}

TEST_F(FloodTest, StopReasonsOfAnyShapeLeaveTheJobHealthyAndStoppable) {
  std::unique_ptr<CoordinatorApi> worker = RegisteredWorker("utf8-host");
  ASSERT_NE(worker, nullptr);
  const std::string address = contents_.grpc_address;
  const std::string stop = "/slurm_ddp.v1.Coordinator/Stop";
  auto stop_body = [](const std::string& reason) {
    slurm_ddp::v1::StopRequest req;
    req.set_reason(reason);
    return req.SerializeAsString();
  };

  // Not UTF-8: refused at the edge, the job untouched.
  std::string bad = stop_body("x");
  bad.back() = '\xff';  // the reason's one byte
  CallResult r = RawCall(contents_.tls_cert, address, stop, bad, contents_.control_token).get();
  EXPECT_EQ(r.code, grpc::StatusCode::INVALID_ARGUMENT) << r.message;
  EXPECT_THAT(r.message, HasSubstr("UTF-8"));
  // The view token may not stop.
  r = RawCall(contents_.tls_cert, address, stop, stop_body("no"), contents_.view_token).get();
  EXPECT_EQ(r.code, grpc::StatusCode::PERMISSION_DENIED) << r.message;
  auto op = OperatorClient::Connect(Options(TokenRole::kView));
  ASSERT_TRUE(op.ok()) << op.status();
  auto status = (*op)->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->state, JobState::kRunning);

  // 4087 ASCII bytes and then two-byte characters well past the 4 KiB limit: a byte cut at 4096
  // would split one. The job must stay readable and stoppable.
  std::string reason(4087, 'a');
  for (int i = 0; i < 1000; ++i) reason += "\xc3\xa9";
  r = RawCall(contents_.tls_cert, address, stop, stop_body(reason), contents_.control_token).get();
  ASSERT_EQ(r.code, grpc::StatusCode::OK) << r.message;
  status = (*op)->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->state, JobState::kStopping);
  EXPECT_TRUE(IsValidUtf8(status->stop_reason));
  EXPECT_LE(status->stop_reason.size(), 4096u + 64);
  EXPECT_THAT(status->stop_reason, HasSubstr(std::string(4087, 'a')));
  auto beat = worker->Heartbeat(ProgressReport());
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_EQ(beat->command, Command::kCheckpointAndStop);
  EXPECT_TRUE(IsValidUtf8(beat->reason));
  ASSERT_TRUE(worker->ReportDone(absl::CancelledError("stopped after checkpoint")).ok());
  int exit_status = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (::waitpid(pid_, &exit_status, WNOHANG) == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(WIFEXITED(exit_status)) << "the coordinator did not end with the stopped job";
  pid_ = -1;
  EXPECT_EQ(WEXITSTATUS(exit_status), kExitResumable);
}

}  // namespace
}  // namespace ddp
