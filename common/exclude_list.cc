#include "common/exclude_list.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/utf8.h"

namespace ddp {
namespace {

absl::string_view Absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// A value that stays one field: spaces, '=' and control characters become '_'.
std::string FieldValue(absl::string_view v) {
  std::string out(v);
  for (char& c : out) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f || c == '=') c = '_';
  }
  return out;
}

// `v` for an error message: at most 64 bytes, control characters as '?', in quotes.
std::string Quoted(absl::string_view v) {
  std::string out(TruncateUtf8(v, 64));
  for (char& c : out) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  return absl::StrCat("\"", out, v.size() > out.size() ? "...\"" : "\"");
}

absl::Status LineError(int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("exclude list line ", line, ": ", what));
}

}  // namespace

bool IsValidExcludeNode(std::string_view node) {
  if (node.empty() || node.size() > kMaxExcludeNodeNameBytes) return false;
  for (char c : node) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

std::string FormatExcludeLine(const ExcludeEntry& entry) {
  std::string line = absl::StrCat("node=", entry.node);
  if (!entry.section.empty()) absl::StrAppend(&line, " section=", FieldValue(entry.section));
  if (entry.relative_score >= 0) {
    absl::StrAppend(&line, absl::StrFormat(" relative_score=%.6g", entry.relative_score));
  }
  if (entry.time != 0) absl::StrAppend(&line, " time=", entry.time);
  if (!entry.job.empty()) absl::StrAppend(&line, " job=", FieldValue(entry.job));
  return line;
}

absl::StatusOr<std::vector<ExcludeEntry>> ParseExcludeList(std::string_view text) {
  std::vector<ExcludeEntry> entries;
  std::set<std::string, std::less<>> seen;
  int number = 0;
  for (absl::string_view raw : absl::StrSplit(Absl(text), '\n')) {
    ++number;
    if (!IsValidUtf8(raw)) return LineError(number, "not valid UTF-8");
    const absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line[0] == '#') continue;
    ExcludeEntry entry;
    bool has_node = false;
    for (absl::string_view field :
         absl::StrSplit(line, absl::ByAnyChar(" \t\r\v\f"), absl::SkipEmpty())) {
      const size_t eq = field.find('=');
      if (eq == absl::string_view::npos) {
        return LineError(number, absl::StrCat("field ", Quoted(field), " is not key=value"));
      }
      const absl::string_view key = field.substr(0, eq);
      const absl::string_view value = field.substr(eq + 1);
      if (key == "node") {
        if (!IsValidExcludeNode(std::string_view(value.data(), value.size()))) {
          return LineError(number, absl::StrCat("bad node name ", Quoted(value),
                                                " (1..255 characters of A-Z a-z 0-9 . _ -)"));
        }
        entry.node = std::string(value);
        has_node = true;
      } else if (key == "section") {
        entry.section = std::string(value);
      } else if (key == "relative_score") {
        if (!absl::SimpleAtod(value, &entry.relative_score)) {
          return LineError(number, absl::StrCat("bad relative_score ", Quoted(value)));
        }
      } else if (key == "time") {
        if (!absl::SimpleAtoi(value, &entry.time)) {
          return LineError(number, absl::StrCat("bad time ", Quoted(value)));
        }
      } else if (key == "job") {
        entry.job = std::string(value);
      }  // other keys: a newer writer's fields
    }
    if (!has_node) return LineError(number, "no node= field");
    if (seen.insert(entry.node).second) entries.push_back(std::move(entry));
  }
  return entries;
}

}  // namespace ddp
