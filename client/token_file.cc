#include "client/token_file.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace ddp {
namespace {

constexpr size_t kMaxTokenFileBytes = 4096;

}  // namespace

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> read = ReadPrivateFile(path, "token file", kMaxTokenFileBytes);
  if (!read.ok()) return read.status();
  const std::string& text = *read;
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
