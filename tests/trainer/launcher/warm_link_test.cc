// The warm worker's link (trainer/launcher/warm_link.h) over a real socketpair: the activation
// carries the local rank and a descriptor (SCM_RIGHTS) that is the same open file in the
// receiver; a stop flag, a closed task end and a malformed packet each end the wait.
#include "trainer/launcher/warm_link.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

TEST(WarmLinkTest, ActivationCarriesTheLocalRankAndTheRelaySocket) {
  absl::StatusOr<WarmLinkEnds> link = MakeWarmLink();
  ASSERT_TRUE(link.ok()) << link.status();
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  ASSERT_TRUE(SendWarmActivation(link->task_end, 5, pipe_fds[1]).ok());
  absl::StatusOr<WarmActivation> got = AwaitWarmActivation(link->worker_end, [] { return false; });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->local_rank, 5);
  ASSERT_GE(got->relay_fd, 0);
  EXPECT_NE(got->relay_fd, pipe_fds[1]);
  struct stat a {
  }, b{};
  ASSERT_EQ(::fstat(got->relay_fd, &a), 0);
  ASSERT_EQ(::fstat(pipe_fds[1], &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);  // the same pipe
  // Writing through the received descriptor reaches the pipe.
  ASSERT_EQ(::write(got->relay_fd, "x", 1), 1);
  char c = 0;
  ASSERT_EQ(::read(pipe_fds[0], &c, 1), 1);
  EXPECT_EQ(c, 'x');
  for (int fd : {got->relay_fd, pipe_fds[0], pipe_fds[1], link->task_end, link->worker_end}) {
    ::close(fd);
  }
}

TEST(WarmLinkTest, ActivationWithoutARelaySocket) {
  absl::StatusOr<WarmLinkEnds> link = MakeWarmLink();
  ASSERT_TRUE(link.ok());
  ASSERT_TRUE(SendWarmActivation(link->task_end, 0, -1).ok());
  absl::StatusOr<WarmActivation> got = AwaitWarmActivation(link->worker_end, [] { return false; });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->local_rank, 0);
  EXPECT_EQ(got->relay_fd, -1);
  ::close(link->task_end);
  ::close(link->worker_end);
}

TEST(WarmLinkTest, StopFlagEndsTheWait) {
  absl::StatusOr<WarmLinkEnds> link = MakeWarmLink();
  ASSERT_TRUE(link.ok());
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(50));
    stop.store(true);
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<WarmActivation> got = AwaitWarmActivation(
      link->worker_end, [&] { return stop.load(); }, absl::Milliseconds(10));
  stopper.join();
  EXPECT_TRUE(absl::IsCancelled(got.status())) << got.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  ::close(link->task_end);
  ::close(link->worker_end);
}

TEST(WarmLinkTest, ClosedTaskEndEndsTheWait) {
  absl::StatusOr<WarmLinkEnds> link = MakeWarmLink();
  ASSERT_TRUE(link.ok());
  ::close(link->task_end);
  absl::StatusOr<WarmActivation> got = AwaitWarmActivation(link->worker_end, [] { return false; });
  EXPECT_TRUE(absl::IsCancelled(got.status())) << got.status();
  ::close(link->worker_end);
}

TEST(WarmLinkTest, MalformedPacketIsRefused) {
  absl::StatusOr<WarmLinkEnds> link = MakeWarmLink();
  ASSERT_TRUE(link.ok());
  for (const std::string packet : {"hello", "ddp-warm v1 -3", "ddp-warm v1 x"}) {
    ASSERT_EQ(::send(link->task_end, packet.data(), packet.size(), 0),
              static_cast<ssize_t>(packet.size()));
    absl::StatusOr<WarmActivation> got =
        AwaitWarmActivation(link->worker_end, [] { return false; });
    EXPECT_TRUE(absl::IsInvalidArgument(got.status())) << packet << ": " << got.status();
  }
  ::close(link->task_end);
  ::close(link->worker_end);
}

TEST(WarmLinkTest, SendToAGoneWorkerIsUnavailable) {
  absl::StatusOr<WarmLinkEnds> link = MakeWarmLink();
  ASSERT_TRUE(link.ok());
  ::close(link->worker_end);
  EXPECT_TRUE(absl::IsUnavailable(SendWarmActivation(link->task_end, 1, -1)));
  ::close(link->task_end);
}

TEST(WarmLinkTest, ClosedOnlyOnceTheActivatedWorkerClosesItsEnd) {
  absl::StatusOr<WarmLinkEnds> link = MakeWarmLink();
  ASSERT_TRUE(link.ok());
  ASSERT_TRUE(SendWarmActivation(link->task_end, 2, -1).ok());
  ASSERT_TRUE(AwaitWarmActivation(link->worker_end, [] { return false; }).ok());
  EXPECT_FALSE(WarmLinkClosed(link->task_end)) << "the worker still holds its end";
  EXPECT_FALSE(WarmLinkClosed(link->task_end)) << "looking does not consume anything";
  ::close(link->worker_end);  // its first step is committed (or it died)
  EXPECT_TRUE(WarmLinkClosed(link->task_end));
  ::close(link->task_end);
}

TEST(WarmLinkTest, AKilledWorkerClosesItsEnd) {
  absl::StatusOr<WarmLinkEnds> link = MakeWarmLink();
  ASSERT_TRUE(link.ok());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(link->task_end);
    ::pause();  // holds worker_end until killed
    ::_exit(0);
  }
  ::close(link->worker_end);
  EXPECT_FALSE(WarmLinkClosed(link->task_end));
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WarmLinkClosed(link->task_end));
  ::close(link->task_end);
}

}  // namespace
}  // namespace ddp
