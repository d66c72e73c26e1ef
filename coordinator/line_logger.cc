#include "coordinator/line_logger.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ddp {

std::string EscapeControlCharacters(absl::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else if (c == 0xc2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      const auto c1 = static_cast<unsigned char>(text[++i]);
      out += "\\u00";
      out += kHex[c1 >> 4];
      out += kHex[c1 & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<LineLogger>> LineLogger::Open(const std::string& path) {
  std::unique_ptr<LineLogger> logger(new LineLogger());
  if (!path.empty()) {
    absl::MutexLock lock(&logger->mu_);
    logger->file_.open(path, std::ios::app);
    if (!logger->file_.is_open()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot open --log-file ", path));
    }
  }
  return logger;
}

void LineLogger::Log(const std::string& line) { LogLines({line}); }

void LineLogger::LogLines(const std::vector<std::string>& lines) {
  if (lines.empty()) return;
  const std::string head =
      absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%E3S", absl::Now(), absl::LocalTimeZone()),
                   " ddp-coordinator: ");
  std::string out;
  for (const std::string& line : lines) {
    absl::StrAppend(&out, head, EscapeControlCharacters(line), "\n");
  }
  absl::MutexLock lock(&mu_);
  std::cerr << out << std::flush;
  if (file_.is_open()) file_ << out << std::flush;
}

}  // namespace ddp
