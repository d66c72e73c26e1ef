// `ddpctl stragglers [--exclude-list]`: the job's current stragglers (from its status), one per
// line; or, with --exclude-list, the nodes of the exclude list beside the dist_file
// (`<dist_file>.exclude`, common/exclude_list.h) in Slurm's --exclude syntax, for
//   sbatch --exclude="$(ddpctl --dist-file F stragglers --exclude-list)" ...
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/ddpctl/tool.h"
#include "common/exclude_list.h"
#include "common/exit_codes.h"
#include "common/file_util.h"
#include "common/job_status.h"

namespace ddp {
namespace {

struct StragglerFlags {
  bool exclude_list = false;
};

// The exclude list at `path`: an empty list when there is none. Refused when it is not a regular
// file of this user, or others may write it (it decides where the next job runs).
absl::StatusOr<std::vector<ExcludeEntry>> ReadExcludeList(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0 && errno == ENOENT) return std::vector<ExcludeEntry>();
  if (fd < 0) return ErrnoError("cannot open the exclude list", path);
  ScopedFd file(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError("cannot stat the exclude list", path);
  if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    return absl::PermissionDeniedError(
        absl::StrFormat("exclude list %s is not a regular file of this user that only its owner "
                        "may write (mode %04o); not trusted",
                        path, st.st_mode & 07777));
  }
  std::string text(kMaxExcludeListBytes + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("cannot read the exclude list", path);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > kMaxExcludeListBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("exclude list ", path, " is over ", kMaxExcludeListBytes, " bytes"));
  }
  text.resize(got);
  auto entries = ParseExcludeList(text);
  if (!entries.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", entries.status().message()));
  }
  return entries;
}

int PrintExcludeList(const GlobalOptions& global) {
  if (global.dist_file.empty()) {
    return Fail(
        "--exclude-list needs the job's dist_file: pass --dist-file (or set DDP_DIST_FILE)");
  }
  auto entries = ReadExcludeList(global.dist_file + ".exclude");
  if (!entries.ok()) return Fail(std::string(entries.status().message()));
  if (entries->empty()) return kExitOk;
  std::vector<std::string> nodes;
  for (const ExcludeEntry& e : *entries) nodes.push_back(e.node);
  std::cout << absl::StrJoin(nodes, ",") << "\n";
  return kExitOk;
}

// "rank=3 host=h node=1 section=compute relative_score=0.48 since=12.5s for=40s": host is what
// the rank reported, with anything but printable ASCII other than a space shown as '?'.
std::string StragglerLine(const StragglerReport& s) {
  std::string host = s.host.empty() ? "-" : s.host;
  for (char& c : host) {
    if (c <= 0x20 || c >= 0x7f) c = '?';
  }
  return absl::StrFormat(
      "rank=%d host=%s node=%d section=%s relative_score=%.3g since=%.1fs for=%.0fs", s.rank, host,
      s.node_rank, StepSectionName(s.section), s.relative_score, s.since_seconds, s.seconds);
}

ToolRun Setup(CLI::App* sub) {
  auto flags = std::make_shared<StragglerFlags>();
  sub->add_flag("--exclude-list", flags->exclude_list,
                "Print the nodes of the job's exclude list (<dist_file>.exclude) as Slurm's "
                "--exclude wants them: one line, comma-separated; nothing when there are none");
  sub->footer(absl::StrCat(
      "Without --exclude-list: one line per straggler the job names now (rank, host, node rank, "
      "the step section that makes it slow, its relative score, the job uptime when it fell "
      "under the threshold and for how long); nothing when there are none. The exclude list "
      "outlives the job: use it for the next submission, e.g.\n"
      "  sbatch --exclude=\"$(ddpctl --dist-file F stragglers --exclude-list)\" ...\n"
      "Exit codes: ",
      kExitOk, " printed (also when there is nothing to print), ", kExitFailed,
      " error (no job, unreachable coordinator, an exclude list that is malformed or not "
      "trusted), ",
      kExitUsage, " usage."));
  return [flags](const GlobalOptions& global) {
    if (flags->exclude_list) return PrintExcludeList(global);
    auto client = ConnectOperator(global, TokenRole::kView);
    if (!client.ok()) return Fail(std::string(client.status().message()));
    auto status = (*client)->GetStatus();
    if (!status.ok()) return Fail(std::string(status.status().message()));
    for (const StragglerReport& s : status->stragglers) std::cout << StragglerLine(s) << "\n";
    return kExitOk;
  };
}

const ToolRegistrar registrar(
    {"stragglers", "List the job's stragglers, or its exclude list for sbatch --exclude", &Setup});

}  // namespace
}  // namespace ddp
