#include "client/ddpctl/job_list.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "client/operator_client.h"
#include "common/dist_file.h"
#include "common/file_util.h"
#include "common/job_result.h"

extern char** environ;

namespace ddp {
namespace {

// Separates squeue's fields: a byte no job name, state or path carries in practice.
constexpr char kSep = '\x1f';
constexpr absl::Duration kSlurmTimeout = absl::Seconds(15);

struct CommandResult {
  int exit_code = -1;  // -1: killed (timed out) or died of a signal
  std::string out;
  std::string err;
};

// Runs `argv` (looked up on PATH) with stdin from /dev/null, collecting its output for at most
// `timeout` (then it is killed).
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         absl::Duration timeout) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return ErrnoError("pipe for", argv[0]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return ErrnoError("pipe for", argv[0]);
  }
  ScopedFd out_r(out_pipe[0]), out_w(out_pipe[1]), err_r(err_pipe[0]), err_w(err_pipe[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_w.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, err_w.get(), 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    errno = rc;
    return ErrnoError("cannot run", argv[0]);
  }
  out_w.Close();
  err_w.Close();
  CommandResult result;
  const absl::Time deadline = absl::Now() + timeout;
  bool out_open = true, err_open = true, killed = false;
  while (out_open || err_open) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      ::kill(pid, SIGKILL);
      killed = true;
      break;
    }
    pollfd fds[2] = {{out_r.get(), POLLIN, 0}, {err_r.get(), POLLIN, 0}};
    if (!out_open) fds[0].fd = -1;
    if (!err_open) fds[1].fd = -1;
    const int n = ::poll(fds, 2, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    char buf[8192];
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t got = ::read(fds[i].fd, buf, sizeof(buf));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        (i == 0 ? out_open : err_open) = false;
        continue;
      }
      (i == 0 ? result.out : result.err).append(buf, static_cast<size_t>(got));
    }
  }
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (killed) {
    return absl::DeadlineExceededError(
        absl::StrCat(argv[0], " did not answer within ", absl::FormatDuration(timeout)));
  }
  if (WIFEXITED(wstatus)) result.exit_code = WEXITSTATUS(wstatus);
  return result;
}

bool OnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return true;
    }
  }
  return false;
}

std::string FirstLine(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  return std::string(text.substr(0, std::min(text.find('\n'), size_t{200})));
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// Where the comment says the dist_file is: the text after kCommentDistFileKey, to the end.
std::string DistFileFromComment(absl::string_view comment) {
  const size_t at = comment.find(kCommentDistFileKey);
  if (at == absl::string_view::npos) return "";
  return std::string(
      absl::StripAsciiWhitespace(comment.substr(at + sizeof(kCommentDistFileKey) - 1)));
}

// Age of the file of the job's last checkpoint (a relative path is taken from the dist_file's
// folder); -1 when there is none or it cannot be seen from here.
double CheckpointAge(const JobStatus& s, const std::string& dist_file) {
  if (s.checkpoint_epoch < 0 || s.checkpoint_path.empty()) return -1;
  std::string path = s.checkpoint_path;
  if (path[0] != '/') path = absl::StrCat(DirName(dist_file), "/", path);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return -1;
  const double age = absl::ToDoubleSeconds(absl::Now() - absl::FromTimeT(st.st_mtime));
  return std::max(age, 0.0);
}

JobRow Inspect(const JobRef& ref, absl::Duration deadline) {
  JobRow row;
  row.ref = ref;
  if (ref.dist_file.empty()) {
    row.state = ref.slurm_state.empty() ? "UNKNOWN" : ref.slurm_state;
    row.state_source = ref.slurm_state.empty() ? "none" : "slurm";
    return row;
  }
  // The job the files must belong to: Slurm's id; from a folder, whatever the file says.
  const std::string& expected = ref.raw_job_id;
  auto result = ReadJobResult(JobResultPath(ref.dist_file));
  if (result.ok() && (expected.empty() || result->job_id == expected)) {
    row.state = result->state;
    row.state_source = "result";
    row.result_exit_code = result->exit_code;
    if (row.ref.job_id.empty()) row.ref.job_id = result->job_id;
  } else if (!result.ok() && !absl::IsNotFound(result.status())) {
    row.error = std::string(result.status().message());
  }
  if (Exists(ref.dist_file)) {
    auto contents = ReadDistFile(ref.dist_file, {expected, 0});
    if (!contents.ok()) {
      row.dist_file_unreadable = true;
      if (row.state_source.empty()) row.error = std::string(contents.status().message());
    } else if (row.ref.job_id.empty()) {
      row.ref.job_id = contents->job_id;
    }
  }
  if (Exists(ref.dist_file) && !row.dist_file_unreadable) {
    ConnectOptions options;
    options.dist_file = ref.dist_file;
    options.role = TokenRole::kView;
    options.expected_job_id = expected;
    options.dist_file_timeout = absl::ZeroDuration();
    options.rpc_timeout = deadline;
    auto client = OperatorClient::Connect(options);
    absl::StatusOr<JobStatus> status =
        client.ok() ? (*client)->GetStatus() : absl::StatusOr<JobStatus>(client.status());
    if (status.ok()) {
      DecideStatus(&*status);
      row.status = *std::move(status);
      row.have_status = true;
      row.state = JobStateName(row.status.state);
      row.state_source = "coordinator";
      row.error.clear();
      if (row.ref.job_id.empty()) row.ref.job_id = row.status.job_id;
      auto url = (*client)->DashboardUrl();
      if (url.ok()) row.dashboard_url = *url;
      row.checkpoint_age_seconds = CheckpointAge(row.status, ref.dist_file);
    } else if (row.state_source.empty()) {
      row.error = std::string(status.status().message());
    }
  }
  if (row.state.empty()) {
    if (!ref.slurm_state.empty()) {
      row.state = ref.slurm_state;
      row.state_source = "slurm";
    } else {
      row.state = row.dist_file_unreadable                      ? "UNREADABLE"
                  : ref.dist_file_only && Exists(ref.dist_file) ? "UNREACHABLE"
                                                                : "UNKNOWN";
      row.state_source = "none";
    }
  }
  return row;
}

}  // namespace

std::string SqueueFormat() {
  // Unique id, display id (arrays: 123_4), state, work dir, name, comment (last: it may hold
  // anything, the separator included).
  return absl::StrCat("%A", std::string(1, kSep), "%i", std::string(1, kSep), "%T",
                      std::string(1, kSep), "%Z", std::string(1, kSep), "%j", std::string(1, kSep),
                      "%k");
}

std::vector<JobRef> ParseSlurmJobs(absl::string_view text) {
  std::vector<JobRef> jobs;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(kSep, 5));
    if (f.size() < 5) continue;  // not ours (a warning squeue printed)
    JobRef ref;
    ref.raw_job_id = std::string(absl::StripAsciiWhitespace(f[0]));
    ref.job_id = std::string(absl::StripAsciiWhitespace(f[1]));
    // sacct: "CANCELLED by 1000".
    const absl::string_view state = absl::StripAsciiWhitespace(f[2]);
    ref.slurm_state = std::string(state.substr(0, state.find(' ')));
    const absl::string_view work_dir = absl::StripAsciiWhitespace(f[3]);
    ref.name = std::string(absl::StripAsciiWhitespace(f[4]));
    const absl::string_view comment = f.size() > 5 ? f[5] : absl::string_view();
    ref.dist_file = DistFileFromComment(comment);
    if (ref.dist_file.empty() && !work_dir.empty() && work_dir != "(null)") {
      // The kit's default path, for a job that could not record its own.
      const std::string guess = absl::StrCat(work_dir, "/dist_file.", ref.raw_job_id);
      if (Exists(guess) || Exists(guess + ".result")) ref.dist_file = guess;
    }
    if (ref.job_id.empty()) continue;
    jobs.push_back(std::move(ref));
  }
  return jobs;
}

absl::StatusOr<std::vector<JobRef>> SlurmJobs() {
  if (!OnPath("squeue")) {
    return absl::UnavailableError(
        "Slurm is not available here (no squeue on PATH); to list the jobs of a folder of "
        "dist_files, use --dir DIR");
  }
  auto squeue = RunCommand(
      {"squeue", "--me", "--states=all", "--noheader", absl::StrCat("--format=", SqueueFormat())},
      kSlurmTimeout);
  if (!squeue.ok() || squeue->exit_code != 0) {
    const std::string why = !squeue.ok() ? std::string(squeue.status().message())
                            : FirstLine(squeue->err).empty()
                                ? absl::StrCat("exit ", squeue->exit_code)
                                : FirstLine(squeue->err);
    return absl::UnavailableError(absl::StrCat(
        "squeue failed (", why, "); to list the jobs of a folder of dist_files, use --dir DIR"));
  }
  std::vector<JobRef> jobs = ParseSlurmJobs(squeue->out);
  if (OnPath("sacct")) {
    // Finished jobs squeue has forgotten, where Slurm keeps accounting (best effort: without
    // slurmdbd sacct fails, and the list is what squeue knows).
    std::string user;
    if (const passwd* pw = ::getpwuid(::geteuid())) user = pw->pw_name;
    if (!user.empty()) {
      auto sacct = RunCommand(
          {"sacct", "-X", "--noheader", "--parsable2",
           absl::StrCat("--delimiter=", std::string(1, kSep)), absl::StrCat("--user=", user),
           "--starttime=now-7days", "--format=JobIDRaw,JobID,State,WorkDir,JobName,Comment"},
          kSlurmTimeout);
      if (sacct.ok() && sacct->exit_code == 0) {
        std::set<std::string> known;
        for (const JobRef& j : jobs) known.insert(j.raw_job_id);
        for (JobRef& j : ParseSlurmJobs(sacct->out)) {
          if (known.insert(j.raw_job_id).second) jobs.push_back(std::move(j));
        }
      }
    }
  }
  return jobs;
}

absl::StatusOr<std::vector<JobRef>> FolderJobs(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return absl::NotFoundError(absl::StrCat("cannot read the folder ", dir));
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  const std::set<std::string> all(names.begin(), names.end());
  std::vector<JobRef> jobs;
  for (const std::string& name : names) {
    if (name == "." || name == ".." || name.find(".tmp.") != std::string::npos) continue;
    const std::string path = absl::StrCat(dir, "/", name);
    JobRef ref;
    ref.name = name;
    ref.dist_file_only = true;
    absl::string_view base = name;
    if (absl::ConsumeSuffix(&base, ".result")) {
      // A finished job's outcome, listed here only once its dist_file is gone.
      if (all.count(std::string(base)) != 0) continue;
      if (!ReadJobResult(path).ok()) continue;
      ref.name = std::string(base);
      ref.dist_file = absl::StrCat(dir, "/", base);
      jobs.push_back(std::move(ref));
      continue;
    }
    if (absl::EndsWith(name, ".lock") || absl::EndsWith(name, ".exclude") ||
        absl::EndsWith(name, ".journal")) {
      continue;
    }
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) continue;
    auto contents = ReadDistFile(path, {});
    if (!contents.ok() && !absl::StartsWith(name, "dist_file")) continue;
    ref.dist_file = path;
    if (contents.ok()) ref.job_id = contents->job_id;
    jobs.push_back(std::move(ref));
  }
  return jobs;
}

std::vector<JobRow> InspectJobs(const std::vector<JobRef>& refs, absl::Duration deadline,
                                int parallel) {
  std::vector<JobRow> rows(refs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < refs.size(); i = next++) rows[i] = Inspect(refs[i], deadline);
  };
  const size_t threads = std::min(refs.size(), static_cast<size_t>(std::max(parallel, 1)));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return rows;
}

}  // namespace ddp
