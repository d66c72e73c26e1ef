#include "trainer/checkpoint/checkpoint_run.h"

#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/dist_file.h"

namespace ddp {
namespace {

constexpr absl::string_view kPrefix = "ckpt-";
constexpr absl::string_view kSuffix = ".pt";
constexpr absl::string_view kManifestHeader = "slurm-ddp-run v1";
constexpr size_t kRunIdLength = 8;

bool ParseStep(absl::string_view digits, int64_t* step) {
  if (digits.empty()) return false;
  for (char c : digits) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return absl::SimpleAtoi(digits, step);
}

}  // namespace

absl::StatusOr<std::string> NewRunId() { return RandomHex(kRunIdLength / 2); }

bool IsRunId(absl::string_view s) {
  if (s.size() != kRunIdLength) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string CheckpointFileName(absl::string_view run_id, int64_t step) {
  return absl::StrFormat("%s%s-%010d%s", kPrefix, run_id, step, kSuffix);
}

std::optional<CheckpointFileInfo> ParseCheckpointFileName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kPrefix) || !absl::ConsumeSuffix(&name, kSuffix)) {
    return std::nullopt;
  }
  CheckpointFileInfo info;
  const size_t dash = name.find('-');
  if (dash != absl::string_view::npos) {
    if (!IsRunId(name.substr(0, dash))) return std::nullopt;
    info.run_id = std::string(name.substr(0, dash));
    name.remove_prefix(dash + 1);
  }
  if (!ParseStep(name, &info.step)) return std::nullopt;
  return info;
}

std::string SerializeRunManifest(const RunManifest& m) {
  return absl::StrCat(kManifestHeader, "\nrun_id=", m.run_id, "\nfinished_epoch=", m.finished_epoch,
                      "\nfinished_step=", m.finished_step, "\nend=1\n");
}

absl::StatusOr<RunManifest> ParseRunManifest(absl::string_view text) {
  const std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (lines[0] != kManifestHeader) {
    return absl::InvalidArgumentError("run manifest has a bad first line");
  }
  std::map<std::string, std::string, std::less<>> kv;
  bool ended = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    if (ended) return absl::InvalidArgumentError("run manifest has data after its end line");
    const size_t eq = lines[i].find('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("run manifest line ", i + 1, " is not key=value"));
    }
    std::string key(lines[i].substr(0, eq));
    ended = key == "end";
    if (!kv.emplace(std::move(key), std::string(lines[i].substr(eq + 1))).second) {
      return absl::InvalidArgumentError("run manifest repeats a key");
    }
  }
  if (!ended) return absl::InvalidArgumentError("run manifest is truncated (no end line)");
  RunManifest m;
  m.run_id = kv["run_id"];
  if (!IsRunId(m.run_id)) return absl::InvalidArgumentError("run manifest has a bad run_id");
  if (!absl::SimpleAtoi(kv["finished_epoch"], &m.finished_epoch) ||
      !absl::SimpleAtoi(kv["finished_step"], &m.finished_step) || m.finished_epoch < -1 ||
      m.finished_step < -1) {
    return absl::InvalidArgumentError("run manifest has a bad finished_epoch or finished_step");
  }
  return m;
}

}  // namespace ddp
