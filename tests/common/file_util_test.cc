#include "common/file_util.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace ddp
