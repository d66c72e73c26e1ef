// HttpServer's limits with real sockets on loopback: more connections from one address than the
// per-address limit are closed at accept while other addresses are served; a request that
// announces a body is answered from its head, at once, and its body is never waited for; slow
// clients (heads trickling in a byte at a time) hold no thread, so a complete request is answered
// promptly even with one server thread; a stalled head is closed after the idle timeout and
// reported as dropped; an oversized head gets MHD's 431.
#include "coordinator/ops/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

// An owned client socket.
class Client {
 public:
  // Connects from `from` (any loopback address: 127.0.0.2 plays another host) to 127.0.0.1:port.
  Client(const char* from, int port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    ::inet_pton(AF_INET, from, &local.sin_addr);
    ::bind(fd_, reinterpret_cast<const sockaddr*>(&local), sizeof(local));
    sockaddr_in server{};
    server.sin_family = AF_INET;
    server.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &server.sin_addr);
    connected_ = ::connect(fd_, reinterpret_cast<const sockaddr*>(&server), sizeof(server)) == 0;
  }
  ~Client() { ::close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return connected_; }
  bool Send(absl::string_view data) {
    return ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
  }
  // Reads until the server closes the connection or `limit` passes; closed() says which.
  std::string Read(absl::Duration limit) {
    std::string got;
    const absl::Time deadline = absl::Now() + limit;
    for (;;) {
      const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (left <= 0) return got;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {  // EOF, or a reset: closed either way
        closed_ = true;
        return got;
      }
      got.append(buf, static_cast<size_t>(n));
    }
  }
  bool closed() const { return closed_; }

 private:
  int fd_;
  bool connected_ = false;
  bool closed_ = false;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(const HttpLimits& limits) {
    HttpServerOptions options;
    options.limits = limits;
    auto server = HttpServer::Start(
        options,
        [this](const HttpRequest& req) {
          ++handled_;
          HttpResponse res;
          if (req.has_body()) {
            res.status = 413;
            res.body = "no bodies\n";
            return res;
          }
          const char* who = req.Query("who");
          res.body = absl::StrCat(req.method(), " ", req.path(), " ", who ? who : "-");
          return res;
        },
        [this] { ++dropped_; });
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    ASSERT_GT(server_->port(), 0);
  }

  // One complete request from 127.0.0.1; the answer (head and body) and how long it took.
  std::pair<std::string, absl::Duration> Get(const std::string& target) {
    const absl::Time start = absl::Now();
    Client c("127.0.0.1", server_->port());
    c.Send(absl::StrCat("GET ", target, " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    std::string answer = c.Read(absl::Seconds(5));
    return {std::move(answer), absl::Now() - start};
  }

  std::unique_ptr<HttpServer> server_;
  std::atomic<int> handled_{0};
  std::atomic<int> dropped_{0};
};

TEST_F(HttpServerTest, ServesAParsedRequest) {
  StartServer(HttpLimits{});
  auto [answer, took] = Get("/a%20b?who=me%21");
  EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 200")) << answer;
  EXPECT_TRUE(absl::StrContains(answer, "Content-Type: text/plain")) << answer;
  EXPECT_TRUE(absl::EndsWith(answer, "GET /a b me!")) << answer;
}

TEST_F(HttpServerTest, ConnectionsBeyondThePerAddressLimitAreClosedAtAccept) {
  HttpLimits limits;
  limits.max_connections_per_peer = 4;
  StartServer(limits);
  std::vector<std::unique_ptr<Client>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<Client>("127.0.0.2", server_->port()));
    ASSERT_TRUE(held.back()->connected());
  }
  absl::SleepFor(absl::Milliseconds(200));  // let the server accept them
  Client extra("127.0.0.2", server_->port());
  const std::string got = extra.Read(absl::Seconds(2));
  EXPECT_TRUE(extra.closed()) << "the 5th connection from 127.0.0.2 stayed open";
  EXPECT_EQ(got, "");
  for (auto& c : held) {
    c->Read(absl::Milliseconds(50));
    EXPECT_FALSE(c->closed()) << "a connection within the limit was closed";
  }
  // Another address is not affected, and the held ones may still send a request.
  EXPECT_TRUE(absl::StartsWith(Get("/").first, "HTTP/1.1 200"));
  held[0]->Send("GET /held HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(absl::EndsWith(held[0]->Read(absl::Seconds(5)), "GET /held -"));
}

TEST_F(HttpServerTest, ABodyIsRefusedFromTheHeadWithoutBeingRead) {
  StartServer(HttpLimits{});
  for (const char* framing : {"Content-Length: 1000000\r\n", "Transfer-Encoding: chunked\r\n",
                              "Content-Length: 1000000\r\nExpect: 100-continue\r\n"}) {
    SCOPED_TRACE(framing);
    const int before = handled_;
    const absl::Time start = absl::Now();
    Client c("127.0.0.1", server_->port());
    // The head only: the body never comes, so an answer proves nobody waited for it.
    c.Send(absl::StrCat("GET /upload HTTP/1.1\r\nHost: x\r\n", framing, "\r\n"));
    const std::string answer = c.Read(absl::Seconds(3));
    EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 413")) << answer;
    EXPECT_FALSE(absl::StrContains(answer, "100 Continue")) << answer;
    EXPECT_TRUE(c.closed()) << "the connection stayed open, waiting for the body";
    EXPECT_LT(absl::Now() - start, absl::Seconds(2));
    EXPECT_EQ(handled_ - before, 1);
  }
}

TEST_F(HttpServerTest, SlowHeadsHoldNoThread) {
  HttpLimits limits;
  limits.threads = 1;
  limits.max_connections_per_peer = 32;
  StartServer(limits);
  std::vector<std::unique_ptr<Client>> slow;
  for (int i = 0; i < 32; ++i) {
    slow.push_back(std::make_unique<Client>("127.0.0.2", server_->port()));
  }
  const std::string head = "GET /slow HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  absl::Duration worst;
  for (size_t k = 0; k < head.size(); ++k) {
    for (auto& c : slow) c->Send(head.substr(k, 1));
    auto [answer, took] = Get("/fast");
    EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 200")) << answer;
    worst = std::max(worst, took);
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_LT(worst, absl::Milliseconds(500)) << "a complete request waited behind slow heads";
  for (auto& c : slow) {
    c->Read(absl::ZeroDuration());
    EXPECT_FALSE(c->closed()) << "a slow head within the idle timeout was closed";
  }
}

TEST_F(HttpServerTest, AStalledHeadIsClosedAfterTheIdleTimeoutAndReported) {
  HttpLimits limits;
  limits.idle_timeout_seconds = 1;
  StartServer(limits);
  Client c("127.0.0.1", server_->port());
  c.Send("GET /stalled HT");
  const absl::Time start = absl::Now();
  c.Read(absl::Seconds(5));
  EXPECT_TRUE(c.closed());
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  for (int i = 0; i < 100 && dropped_ == 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(dropped_, 1);
  EXPECT_EQ(handled_, 0);
}

// One definition of a complete head, MHD's: the handler runs once the blank line that ends the
// head has arrived, however the head is split into packets, and not before.
TEST_F(HttpServerTest, AHeadSplitAcrossPacketsIsServedOnceCompleteAndNotBefore) {
  StartServer(HttpLimits{});
  const std::string head = "GET /split?who=x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  // Every split point, the CR and LF of the final blank line included.
  for (size_t cut = 1; cut < head.size(); ++cut) {
    SCOPED_TRACE(absl::StrCat("split at ", cut));
    Client c("127.0.0.1", server_->port());
    ASSERT_TRUE(c.Send(head.substr(0, cut)));
    if (cut >= head.size() - 4) {  // in the blank line: the head is not complete yet
      const std::string early = c.Read(absl::Milliseconds(100));
      EXPECT_EQ(early, "") << "answered before the head was complete";
      EXPECT_FALSE(c.closed());
    }
    ASSERT_TRUE(c.Send(head.substr(cut)));
    const std::string answer = c.Read(absl::Seconds(3));
    EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 200")) << answer;
    EXPECT_TRUE(absl::EndsWith(answer, "GET /split x")) << answer;
  }
  // A byte at a time, the last one 300 ms after the others: nothing is served before it.
  const int before = handled_;
  Client c("127.0.0.1", server_->port());
  for (size_t k = 0; k + 1 < head.size(); ++k) ASSERT_TRUE(c.Send(head.substr(k, 1)));
  EXPECT_EQ(c.Read(absl::Milliseconds(300)), "");
  EXPECT_EQ(handled_, before) << "the handler ran on an incomplete head";
  ASSERT_TRUE(c.Send("\n"));
  EXPECT_TRUE(absl::StartsWith(c.Read(absl::Seconds(3)), "HTTP/1.1 200"));
}

// Line ends other than CRLF never leave a client waiting: a head of bare LFs, or of mixed CRLF and
// LF, is answered at once (served, or refused with 400), and a head whose blank line never comes
// is closed by the idle timeout, never served.
TEST_F(HttpServerTest, BareLineFeedsAreAnsweredAtOnceNeverLeftHanging) {
  HttpLimits limits;
  limits.idle_timeout_seconds = 1;
  StartServer(limits);
  for (const char* head : {"GET /lf HTTP/1.1\nHost: x\nConnection: close\n\n",
                           "GET /mixed HTTP/1.1\r\nHost: x\nConnection: close\r\n\n",
                           "GET /mixed HTTP/1.1\nHost: x\r\nConnection: close\n\r\n"}) {
    SCOPED_TRACE(head);
    const absl::Time start = absl::Now();
    Client c("127.0.0.1", server_->port());
    ASSERT_TRUE(c.Send(head));
    const std::string answer = c.Read(absl::Seconds(3));
    EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 200") ||
                absl::StartsWith(answer, "HTTP/1.1 400"))
        << answer;
    EXPECT_TRUE(c.closed());
    EXPECT_LT(absl::Now() - start, absl::Milliseconds(500)) << "the answer waited";
  }
  // A lone CR is no line end: the head is incomplete, and is closed unanswered.
  const int before = handled_;
  Client c("127.0.0.1", server_->port());
  ASSERT_TRUE(c.Send("GET /cr HTTP/1.1\rHost: x\r\r"));
  const std::string answer = c.Read(absl::Seconds(4));
  EXPECT_TRUE(c.closed());
  EXPECT_FALSE(absl::StartsWith(answer, "HTTP/1.1 200")) << answer;
  EXPECT_EQ(handled_, before);
}

TEST_F(HttpServerTest, AnOversizedHeadGets431) {
  StartServer(HttpLimits{});  // 16 KiB per connection
  for (const std::string& extra : {absl::StrCat("X-Big: ", std::string(20000, 'a'), "\r\n"), [] {
                                     std::string lines;
                                     for (int i = 0; i < 2000; ++i)
                                       absl::StrAppend(&lines, "X-", i, ": 1\r\n");
                                     return lines;
                                   }()}) {
    Client c("127.0.0.1", server_->port());
    c.Send(absl::StrCat("GET /big HTTP/1.1\r\nHost: x\r\n", extra, "\r\n"));
    const std::string answer = c.Read(absl::Seconds(3));
    EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 431")) << answer.substr(0, 200);
  }
  EXPECT_EQ(handled_, 0);
}

}  // namespace
}  // namespace ddp
