// The exclude list: the nodes a job's coordinator named as stragglers, kept beside the dist_file
// as `<dist_file>.exclude` so that the next submission can leave them out
// (`sbatch --exclude=$(ddpctl stragglers --exclude-list)`). The coordinator writes it; ddpctl
// reads it. The format, UTF-8 text:
//
//   # a comment line (its first non-blank character is '#'); blank lines are skipped
//   node=n2 section=compute relative_score=0.48 time=1764900000 job=1234
//
// One node a line, as key=value fields separated by spaces (or tabs). Only `node` is required;
// `section` (the step section that made it slow), `relative_score` (its score when named), `time`
// (Unix seconds when named) and `job` (the job that named it) are optional, and keys this reader
// does not know are ignored, so writers may add fields. A node name is 1..255 characters of
// [A-Za-z0-9._-] (what Slurm's --exclude accepts in a comma-separated list without quoting).
//
// Thread safety: pure functions; safe from any thread.
#ifndef SLURM_DDP_COMMON_EXCLUDE_LIST_H_
#define SLURM_DDP_COMMON_EXCLUDE_LIST_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ddp {

inline constexpr size_t kMaxExcludeNodeNameBytes = 255;
// What a reader reads of an exclude list at most (a few thousand nodes fit many times over).
inline constexpr size_t kMaxExcludeListBytes = 1 << 20;

struct ExcludeEntry {
  std::string node;            // required; IsValidExcludeNode
  std::string section;         // empty: not given
  double relative_score = -1;  // negative: not given
  int64_t time = 0;            // Unix seconds; 0: not given
  std::string job;             // empty: not given
};

// 1..255 characters, each of [A-Za-z0-9._-].
bool IsValidExcludeNode(std::string_view node);

// One line, without the newline: "node=<node>" followed by the fields that are given, in the
// order section, relative_score (shortest form of 6 significant digits), time, job. A space,
// '=' or control character inside section or job would break the line into other fields, so each
// is written as '_'. `entry.node` must satisfy IsValidExcludeNode (the caller checks it).
std::string FormatExcludeLine(const ExcludeEntry& entry);

// Parses a whole exclude list. Entries keep the order of their first line; a node listed again
// is dropped (its first entry wins). INVALID_ARGUMENT naming the line number ("line 3: ...") for
// a line without node=, a bad node name, a field without '=', a bad relative_score or time, or
// bytes that are not UTF-8.
absl::StatusOr<std::vector<ExcludeEntry>> ParseExcludeList(std::string_view text);

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_EXCLUDE_LIST_H_
