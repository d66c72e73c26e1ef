// A small tmpfs mounted for one test, to fill a file system for real (ENOSPC). Mounting needs
// root (CAP_SYS_ADMIN); where it is refused, Create says why and the test skips with that reason.
//
// Thread safety: one test thread.
#ifndef SLURM_DDP_TESTS_TESTING_TMPFS_H_
#define SLURM_DDP_TESTS_TESTING_TMPFS_H_

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace ddp::testing {

class Tmpfs {
 public:
  // A tmpfs of `bytes` on a fresh folder under $TMPDIR (or /tmp); nullptr and `*why_not` when the
  // kernel refuses the mount.
  static std::unique_ptr<Tmpfs> Create(size_t bytes, std::string* why_not) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/ddp-tmpfs-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      *why_not = std::string("mkdtemp: ") + std::strerror(errno);
      return nullptr;
    }
    const std::string options = "size=" + std::to_string(bytes) + ",mode=0777";
    if (::mount("tmpfs", pattern.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      *why_not = std::string("cannot mount a tmpfs (needs root): ") + std::strerror(errno);
      ::rmdir(pattern.c_str());
      return nullptr;
    }
    return std::unique_ptr<Tmpfs>(new Tmpfs(pattern));
  }
  ~Tmpfs() {
    ::umount2(path_.c_str(), MNT_DETACH);
    ::rmdir(path_.c_str());
  }
  Tmpfs(const Tmpfs&) = delete;
  Tmpfs& operator=(const Tmpfs&) = delete;

  const std::string& path() const { return path_; }

  // Fills the file system to the last byte with `<path>/filler`.
  void Fill() {
    const std::string filler = path_ + "/filler";
    const int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd < 0) return;
    const std::vector<char> zeros(1 << 16, 0);
    for (size_t chunk = zeros.size(); chunk > 0; chunk /= 2) {
      while (::write(fd, zeros.data(), chunk) == static_cast<ssize_t>(chunk)) {
      }
    }
    ::close(fd);
  }
  // Gives back `bytes` of the filler.
  void Free(size_t bytes) {
    const std::string filler = path_ + "/filler";
    struct stat st;
    if (::stat(filler.c_str(), &st) != 0) return;
    const off_t size = st.st_size > static_cast<off_t>(bytes) ? st.st_size - bytes : 0;
    if (::truncate(filler.c_str(), size) != 0) return;
  }
  void RemoveFiller() { ::unlink((path_ + "/filler").c_str()); }

 private:
  explicit Tmpfs(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace ddp::testing

#endif  // SLURM_DDP_TESTS_TESTING_TMPFS_H_
