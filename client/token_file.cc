#include "client/token_file.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace ddp {
namespace {

constexpr size_t kMaxTokenFileBytes = 16 * 1024;

}  // namespace

absl::StatusOr<TokenFileContents> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> read = ReadPrivateFile(path, "token file", kMaxTokenFileBytes);
  if (!read.ok()) return read.status();
  const std::string& text = *read;
  const size_t eol = text.find('\n');
  TokenFileContents contents;
  contents.token = std::string(absl::StripAsciiWhitespace(text.substr(0, eol)));
  if (contents.token.empty())
    return absl::InvalidArgumentError(absl::StrCat("token file ", path, " is empty"));
  for (char c : contents.token) {
    if (c <= ' ' || c >= 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat("token file ", path, " does not hold a token (unprintable or space)"));
    }
  }
  const std::string rest(
      absl::StripAsciiWhitespace(eol == std::string::npos ? "" : text.substr(eol + 1)));
  if (!rest.empty()) {
    if (!absl::StartsWith(rest, "-----BEGIN CERTIFICATE-----") ||
        !absl::EndsWith(rest, "-----END CERTIFICATE-----")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token file ", path, ": after the token only the job's certificate (PEM) may follow"));
    }
    contents.tls_cert = rest + "\n";
  }
  return contents;
}

}  // namespace ddp
