#include "common/file_util.h"

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/tmpfs.h"

namespace ddp {
namespace {

class FileUtilTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/file_util.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::vector<std::string> Entries() const {
    std::vector<std::string> out;
    DIR* d = ::opendir(dir_.c_str());
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") out.push_back(name);
    }
    ::closedir(d);
    return out;
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string dir_;
};

TEST_F(FileUtilTest, WritesWithModeAndLeavesNoTempFile) {
  const std::string path = dir_ + "/f";
  const mode_t old_umask = ::umask(0077);  // the mode is applied despite the umask
  ASSERT_TRUE(WriteFileAtomically(path, "hello", 0644).ok());
  ::umask(old_umask);
  EXPECT_EQ(Read(path), "hello");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  ASSERT_TRUE(WriteFileAtomically(path, "second", 0600).ok());
  EXPECT_EQ(Read(path), "second");
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(Entries(), std::vector<std::string>{"f"});
}

TEST_F(FileUtilTest, FailureLeavesTheOldFileAndNoTempFile) {
  const std::string path = dir_ + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, "old", 0600).ok());
  // Renaming a file over a non-empty folder fails: the old content must survive untouched.
  const std::string folder = dir_ + "/sub";
  ASSERT_EQ(::mkdir(folder.c_str(), 0700), 0);
  { std::ofstream(folder + "/x") << "x"; }
  absl::Status st = WriteFileAtomically(folder, "new", 0600);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("rename to " + folder), std::string::npos) << st;
  EXPECT_EQ(Read(path), "old");
  EXPECT_EQ(Entries().size(), 2u);  // f and sub, no temp file
  // A missing folder: a one-line error naming the temp file's path.
  st = WriteFileAtomically(dir_ + "/missing/f", "x", 0600);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("create " + dir_ + "/missing/f.tmp."), std::string::npos)
      << st;
}

TEST_F(FileUtilTest, ConcurrentWritersNeverExposeAPartialFile) {
  const std::string path = dir_ + "/f";
  const std::string a(1 << 20, 'a'), b(1 << 20, 'b');
  ASSERT_TRUE(WriteFileAtomically(path, a, 0600).ok());
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) ASSERT_TRUE(WriteFileAtomically(path, t % 2 ? a : b, 0600).ok());
    });
  }
  for (int i = 0; i < 50; ++i) {
    const std::string got = Read(path);
    ASSERT_TRUE(got == a || got == b) << "partial file of " << got.size() << " bytes";
  }
  for (auto& w : writers) w.join();
  EXPECT_EQ(Entries(), std::vector<std::string>{"f"});
}

TEST(DirNameTest, Cases) {
  EXPECT_EQ(DirName("f"), ".");
  EXPECT_EQ(DirName("/f"), "/");
  EXPECT_EQ(DirName("a/b/f"), "a/b");
}

TEST(BaseNameTest, Cases) {
  EXPECT_EQ(BaseName("f"), "f");
  EXPECT_EQ(BaseName("/f"), "f");
  EXPECT_EQ(BaseName("a/b/f"), "f");
}

TEST_F(FileUtilTest, WithoutAModeTheFileHonoursTheUmask) {
  const std::string path = dir_ + "/f";
  for (const auto& [mask, want] : std::vector<std::pair<mode_t, mode_t>>{
           {0077, 0600}, {0022, 0644}, {0002, 0664}, {0027, 0640}}) {
    const mode_t old_umask = ::umask(mask);
    const absl::Status st = WriteFileAtomically(path, "weights");
    ::umask(old_umask);
    ASSERT_TRUE(st.ok()) << st;
    struct stat info;
    ASSERT_EQ(::stat(path.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, want) << "umask " << std::oct << mask;
  }
  EXPECT_EQ(Read(path), "weights");
  EXPECT_EQ(Entries(), std::vector<std::string>{"f"});
}

TEST(FileUtilFullDiskTest, AFullFileSystemIsResourceExhaustedAndLosesNothing) {
  std::string why_not;
  auto fs = testing::Tmpfs::Create(256 << 10, &why_not);
  if (fs == nullptr) GTEST_SKIP() << "SKIPPED: " << why_not;
  const std::string path = fs->path() + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, std::string(8 << 10, 'o')).ok());
  fs->Fill();
  const absl::Status st = WriteFileAtomically(path, std::string(64 << 10, 'n'));
  EXPECT_TRUE(absl::IsResourceExhausted(st)) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "No space left on device")) << st;
  std::ifstream in(path);
  std::stringstream old;
  old << in.rdbuf();
  EXPECT_EQ(old.str(), std::string(8 << 10, 'o'));
  DIR* d = ::opendir(fs->path().c_str());
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"f", "filler"}));
}

TEST(ErrnoErrorTest, ClassifiesFullDiskAndQuota) {
  for (int err : {ENOSPC, EDQUOT, EFBIG}) {
    errno = err;
    EXPECT_TRUE(absl::IsResourceExhausted(ErrnoError("write", "x"))) << err;
  }
  errno = EIO;
  EXPECT_TRUE(absl::IsInternal(ErrnoError("write", "x")));
}

TEST(ParseTempFileNameTest, Table) {
  struct Case {
    std::string name;
    bool parses;
    std::string target;
    int64_t pid;
    std::string host;
  };
  const std::vector<Case> cases = {
      {"ckpt-1.pt.tmp.123.0.456.node-1.cluster", true, "ckpt-1.pt", 123, "node-1.cluster"},
      {"final.pt.tmp.7.12.99", true, "final.pt", 7, ""},  // written before hosts were named
      {"a.tmp.b.tmp.5.6.7.h", true, "a.tmp.b", 5, "h"},
      {"final.pt", false, "", 0, ""},
      {"final.pt.tmp.", false, "", 0, ""},
      {"final.pt.tmp.12.x.3.h", false, "", 0, ""},
      {"final.pt.tmp.12.3", false, "", 0, ""},
      {".tmp.1.2.3.h", false, "", 0, ""},
      {"x.tmp.99999999999999999999999.1.2.h", false, "", 0, ""},
  };
  for (const Case& c : cases) {
    const auto got = ParseTempFileName(c.name);
    ASSERT_EQ(got.has_value(), c.parses) << c.name;
    if (!got) continue;
    EXPECT_EQ(got->target, c.target) << c.name;
    EXPECT_EQ(got->pid, c.pid) << c.name;
    EXPECT_EQ(got->host, c.host) << c.name;
  }
}

// A writer killed in the middle of its temp file (SIGXFSZ: its file size limit is below the
// data), as a checkpoint writer killed by the OOM killer or a node failure would be.
pid_t KilledWriter(const std::string& path) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    struct rlimit limit = {64 << 10, 64 << 10};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    (void)WriteFileAtomically(path, std::string(1 << 20, 'x'));
    ::_exit(0);  // not reached: SIGXFSZ ends the writer
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ) << status;
  return pid;
}

TEST_F(FileUtilTest, RemovesTempFilesOfDeadWritersOnly) {
  KilledWriter(dir_ + "/ckpt-1.pt");
  std::vector<std::string> left = Entries();
  ASSERT_EQ(left.size(), 1u);
  const std::string dead = left[0];
  ASSERT_TRUE(absl::StartsWith(dead, "ckpt-1.pt.tmp.")) << dead;
  ASSERT_TRUE(ParseTempFileName(dead).has_value());
  EXPECT_EQ(ParseTempFileName(dead)->host, HostName());

  auto touch = [&](const std::string& name, int age_seconds) {
    std::ofstream(dir_ + "/" + name) << "x";
    if (age_seconds > 0) {
      struct timeval times[2];
      ::gettimeofday(&times[0], nullptr);
      times[0].tv_sec -= age_seconds;
      times[1] = times[0];
      ::utimes((dir_ + "/" + name).c_str(), times);
    }
  };
  const std::string self = absl::StrCat("ckpt-2.pt.tmp.", ::getpid(), ".0.1.", HostName());
  touch(self, 0);                                                // a live writer: this process
  touch("ckpt-3.pt.tmp.1.0.1.some-other-host", 0);               // elsewhere, still writing
  touch("ckpt-4.pt.tmp.1.0.1.some-other-host", 3600);            // elsewhere, silent for an hour
  touch(absl::StrCat("notes.txt.tmp.", dead.substr(14)), 3600);  // not ours to remove
  touch("ckpt-5.pt", 3600);                                      // not a temp file

  const std::vector<std::string> removed = RemoveStaleTempFiles(
      dir_, [](absl::string_view target) { return absl::StartsWith(target, "ckpt-"); },
      absl::Minutes(10));
  std::vector<std::string> want = {dead, "ckpt-4.pt.tmp.1.0.1.some-other-host"};
  std::vector<std::string> got = removed;
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
  left = Entries();
  std::sort(left.begin(), left.end());
  std::vector<std::string> kept = {self, "ckpt-3.pt.tmp.1.0.1.some-other-host",
                                   absl::StrCat("notes.txt.tmp.", dead.substr(14)), "ckpt-5.pt"};
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(left, kept);
}

}  // namespace
}  // namespace ddp
