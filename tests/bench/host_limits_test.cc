#include "bench/loadgen/host_limits.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace ddp::bench {
namespace {

TEST(HostLimitsTest, PortRange) {
  EXPECT_EQ(*ParsePortRange("32768\t60999\n"), 28232);
  EXPECT_EQ(*ParsePortRange("1024 1024"), 1);
  for (const char* bad : {"", "1", "10 5", "a b", "1 2 3"}) {
    EXPECT_FALSE(ParsePortRange(bad).ok()) << bad;
  }
}

TEST(HostLimitsTest, StatCpuTicksSkipsACommandNameWithSpacesAndParens) {
  // Fields 14 and 15 (utime, stime) are 17 and 4.
  const std::string stat =
      "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 17 4 0 0 20 0 3 0 12345 "
      "1000000 250 18446744073709551615";
  EXPECT_EQ(*ParseStatCpuTicks(stat), 21);
  EXPECT_FALSE(ParseStatCpuTicks("4242 (x) S 1 2").ok());
  EXPECT_FALSE(ParseStatCpuTicks("no parens at all").ok());
}

TEST(HostLimitsTest, ProcStatCpuReadsIdleAndSteal) {
  // user nice system idle iowait irq softirq steal guest guest_nice, at 100 ticks a second.
  auto t = ParseProcStatCpu("cpu  100 20 30 400 50 6 4 70 90 0\ncpu0 1 2 3 4 5 6 7 8 9 0\n", 100);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->idle, 4.5);  // idle + iowait
  EXPECT_DOUBLE_EQ(t->steal, 0.7);
  EXPECT_FALSE(ParseProcStatCpu("cpu0 1 2 3 4 5 6 7 8\n", 100).ok());
  EXPECT_FALSE(ParseProcStatCpu("cpu  1 2 3\n", 100).ok());
  EXPECT_FALSE(ParseProcStatCpu("cpu  1 2 3 x 5 6 7 8\n", 100).ok());
  auto own = HostCpuSeconds();
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_GT(own->idle, 0);  // a host is idle at times, if only before this test
}

TEST(HostLimitsTest, StatusKibFindsItsKey) {
  const std::string status = "Name:\tx\nVmPeak:\t  9000 kB\nVmHWM:\t    1234 kB\nVmRSS: 1000 kB\n";
  EXPECT_EQ(*ParseStatusKib(status, "VmHWM"), 1234);
  EXPECT_EQ(*ParseStatusKib(status, "VmRSS"), 1000);
  EXPECT_FALSE(ParseStatusKib(status, "VmSwap").ok());
  EXPECT_FALSE(ParseStatusKib("VmHWM:\t12 MB\n", "VmHWM").ok());
  auto own = ProcessPeakRssKib(getpid());
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_GT(*own, 0);
}

TEST(HostLimitsTest, TcpExtPairsNamesWithValues) {
  const std::string netstat =
      "TcpExt: SyncookiesSent ListenOverflows ListenDrops\n"
      "TcpExt: 3 17 19\n"
      "IpExt: InNoRoutes\n"
      "IpExt: 0\n";
  auto c = ParseTcpExt(netstat);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->at("ListenOverflows"), 17);
  EXPECT_EQ(c->at("ListenDrops"), 19);
  EXPECT_EQ(c->at("SyncookiesSent"), 3);
  EXPECT_FALSE(ParseTcpExt("TcpExt: A B\nTcpExt: 1\n").ok());
  EXPECT_FALSE(ParseTcpExt("IpExt: A\nIpExt: 1\n").ok());
}

TEST(HostLimitsTest, OwnCpuTimeGrowsWhenBurningCpu) {
  const double before = *ProcessCpuSeconds(getpid());
  volatile double x = 0;
  const int64_t end = MonotonicNanos() + 300000000;  // 0.3 s of work
  while (MonotonicNanos() < end) x = x + 1.0;
  const double after = *ProcessCpuSeconds(getpid());
  EXPECT_GT(after, before);
  EXPECT_FALSE(ProcessCpuSeconds(-5).ok());
}

TEST(HostLimitsTest, FdLimitRaisedToHard) {
  auto soft = RaiseFdLimitToHard();
  ASSERT_TRUE(soft.ok()) << soft.status();
  rlimit lim{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  EXPECT_EQ(lim.rlim_cur, lim.rlim_max);
  EXPECT_EQ(soft->soft, lim.rlim_cur);
  EXPECT_EQ(soft->hard, lim.rlim_max);
}

TEST(HostLimitsTest, SysctlAndTheRealFiles) {
  char path[] = "/tmp/host_limits_test.XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "4096\n";
  EXPECT_EQ(*ReadSysctl(path), 4096);
  std::ofstream(path) << "many\n";
  EXPECT_FALSE(ReadSysctl(path).ok());
  std::remove(path);
  EXPECT_FALSE(ReadSysctl(path).ok());
  // This host's own files parse.
  EXPECT_GT(*EphemeralPortCount(), 0);
  EXPECT_TRUE(TcpExtCounters().ok());
}

TEST(HostLimitsTest, MonotonicClockAdvances) {
  const int64_t a = MonotonicNanos();
  usleep(2000);
  EXPECT_GE(MonotonicNanos() - a, 2000000);
}

}  // namespace
}  // namespace ddp::bench
