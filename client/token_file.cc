#include "client/token_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"

namespace ddp {
namespace {

constexpr size_t kMaxTokenFileBytes = 4096;

}  // namespace

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT)
      return absl::NotFoundError(absl::StrCat("token file ", path, " does not exist"));
    if (errno == ELOOP) {
      return absl::PermissionDeniedError(
          absl::StrCat("token file ", path, " is a symlink; refusing it"));
    }
    return ErrnoError("open", path);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoError("fstat", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::PermissionDeniedError(absl::StrCat("token file ", path, " is not a regular file"));
  }
  if (st.st_uid != ::geteuid()) {
    return absl::PermissionDeniedError(
        absl::StrCat("token file ", path, " is owned by uid ", st.st_uid, ", not by this user"));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("token file ", path, " has mode ", absl::StrFormat("%04o", st.st_mode & 0777),
                     " (group/others may read or change the token); chmod 600 it"));
  }
  std::string text(kMaxTokenFileBytes + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("read", path);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > kMaxTokenFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat("token file ", path, " is too large (> 4 KiB)"));
  }
  text.resize(got);
  const size_t eol = text.find('\n');
  const std::string token(absl::StripAsciiWhitespace(text.substr(0, eol)));
  if (token.empty())
    return absl::InvalidArgumentError(absl::StrCat("token file ", path, " is empty"));
  for (char c : token) {
    if (c <= ' ' || c >= 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat("token file ", path, " does not hold a token (unprintable or space)"));
    }
  }
  return token;
}

}  // namespace ddp
