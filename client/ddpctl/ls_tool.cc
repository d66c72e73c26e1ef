// `ddpctl ls [--dir DIR] [--json]`: the user's jobs, one row each: job id, name, state,
// progress, samples/s, ETTR, restarts, stragglers, age of the last checkpoint and the dashboard
// URL. Jobs come from Slurm (squeue, sacct) or, with --dir, from a folder of dist_files
// (client/ddpctl/job_list.h); each job's coordinator is asked with a short deadline, and one that
// does not answer shows what Slurm or its result file says.
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/ddpctl/job_list.h"
#include "client/ddpctl/status_view.h"
#include "client/ddpctl/tool.h"
#include "common/exit_codes.h"
#include "common/job_status.h"
#include "common/utf8.h"

namespace ddp {
namespace {

struct LsFlags {
  std::string dir;
  bool json = false;
  double deadline_s = 2;
  int parallel = 16;
};

// A string from Slurm, a file or a job, made safe for a terminal cell: valid UTF-8, control
// characters (C0, DEL, C1) as '?', at most `max_bytes`.
std::string Cell(absl::string_view raw, size_t max_bytes = 64) {
  const std::string valid = ToValidUtf8(raw);
  std::string out;
  for (size_t i = 0; i < valid.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(valid[i]);
    if (c < 0x20 || c == 0x7f) {
      out.push_back('?');
    } else if (c == 0xc2 && i + 1 < valid.size() &&
               static_cast<unsigned char>(valid[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(valid[i + 1]) <= 0x9f) {
      out.push_back('?');
      ++i;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (out.size() > max_bytes) out = absl::StrCat(TruncateUtf8(out, max_bytes - 3), "...");
  return out.empty() ? "-" : out;
}

std::string Progress(const JobRow& row) {
  if (!row.have_status) return "-";
  const JobStatus& s = row.status;
  if (s.state == JobState::kRegistering) {
    return absl::StrFormat("registered %d/%d", s.registered, s.world_size);
  }
  int64_t total = 0;
  if (s.epochs <= 0 || s.steps_per_epoch <= 0 ||
      __builtin_mul_overflow(s.epochs, s.steps_per_epoch, &total)) {
    total = 0;
  }
  return absl::StrFormat("epoch %d/%d step %d%s", s.epoch, s.epochs, s.step,
                         total > 0 ? absl::StrCat("/", total) : std::string());
}

// The last column: the dashboard, else why the coordinator could not be asked.
std::string Dashboard(const JobRow& row) {
  if (!row.dashboard_url.empty()) return Cell(row.dashboard_url, 512);
  if (row.have_status) return "-";
  if (row.dist_file_unreadable) return "(dist_file not trusted: ls --json says why)";
  if (!row.error.empty()) return "(coordinator unreachable)";
  return "-";
}

std::string Table(const std::vector<JobRow>& rows) {
  std::vector<std::vector<std::string>> cells = {{"JOBID", "NAME", "STATE", "PROGRESS", "SAMPLES/S",
                                                  "ETTR", "RESTARTS", "STRAGGLERS", "CKPT-AGE",
                                                  "DASHBOARD"}};
  for (const JobRow& r : rows) {
    const JobStatus& s = r.status;
    const double ettr = s.time_use.ettr();
    cells.push_back({
        Cell(r.ref.job_id, 32),
        Cell(r.ref.name, 24),
        Cell(r.state, 16),
        Progress(r),
        r.have_status ? absl::StrFormat("%.1f", s.samples_per_second) : "-",
        r.have_status && ettr >= 0 ? absl::StrFormat("%.1f%%", 100 * ettr) : "-",
        r.have_status ? absl::StrCat(s.restarts) : "-",
        r.have_status ? absl::StrCat(s.stragglers.size()) : "-",
        r.checkpoint_age_seconds >= 0 ? FormatDuration(r.checkpoint_age_seconds) : "-",
        Dashboard(r),
    });
  }
  std::vector<size_t> width(cells[0].size(), 0);
  for (const auto& line : cells) {
    for (size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  }
  std::string out;
  for (const auto& line : cells) {
    std::string text;
    for (size_t i = 0; i < line.size(); ++i) {
      absl::StrAppend(&text, line[i]);
      if (i + 1 < line.size()) text.append(width[i] - line[i].size() + 2, ' ');
    }
    absl::StrAppend(&out, text, "\n");
  }
  return out;
}

std::string Num(double v, bool known) {
  if (!known) return "null";
  std::string out;
  AppendJsonNumber(v, &out);
  return out;
}

std::string StrOrNull(const std::string& s) { return s.empty() ? "null" : JsonQuote(s); }

// One object per job; numbers the job did not report are null.
std::string JobJson(const JobRow& r) {
  const JobStatus& s = r.status;
  const bool st = r.have_status;
  const double ettr = s.time_use.ettr();
  std::vector<std::string> f = {
      absl::StrCat("\"job_id\":", StrOrNull(r.ref.job_id)),
      absl::StrCat("\"name\":", StrOrNull(r.ref.name)),
      absl::StrCat("\"state\":", JsonQuote(r.state)),
      absl::StrCat("\"state_source\":", JsonQuote(r.state_source)),
      absl::StrCat("\"slurm_state\":", StrOrNull(r.ref.slurm_state)),
      absl::StrCat("\"dist_file\":", StrOrNull(r.ref.dist_file)),
      absl::StrCat("\"reachable\":", st ? "true" : "false"),
      absl::StrCat("\"epoch\":", Num(s.epoch, st)),
      absl::StrCat("\"epochs\":", Num(s.epochs, st)),
      absl::StrCat("\"step\":", Num(s.step, st)),
      absl::StrCat("\"steps_per_epoch\":", Num(s.steps_per_epoch, st)),
      absl::StrCat("\"samples_per_second\":", Num(s.samples_per_second, st)),
      absl::StrCat("\"ettr\":", Num(ettr, st && ettr >= 0)),
      absl::StrCat("\"restarts\":", Num(s.restarts, st)),
      absl::StrCat("\"stragglers\":", Num(static_cast<double>(s.stragglers.size()), st)),
      absl::StrCat("\"checkpoint_age_seconds\":",
                   Num(r.checkpoint_age_seconds, r.checkpoint_age_seconds >= 0)),
      absl::StrCat("\"checkpoint_path\":", StrOrNull(st ? s.checkpoint_path : "")),
      absl::StrCat("\"dashboard_url\":", StrOrNull(r.dashboard_url)),
      absl::StrCat("\"exit_code\":", st && s.exit_code >= 0    ? absl::StrCat(s.exit_code)
                                     : r.result_exit_code >= 0 ? absl::StrCat(r.result_exit_code)
                                                               : "null"),
      absl::StrCat("\"error\":", StrOrNull(r.error)),
  };
  return absl::StrCat("{", absl::StrJoin(f, ","), "}");
}

ToolRun Setup(CLI::App* sub) {
  auto flags = std::make_shared<LsFlags>();
  sub->add_option("--dir", flags->dir,
                  "List the jobs of the dist_files in this folder instead of asking Slurm "
                  "(files named dist_file*, any other file that reads as one, and the "
                  "<dist_file>.result of finished jobs)");
  sub->add_flag("--json", flags->json,
                "Print one JSON array, an object per job: job_id, name, state, state_source, "
                "slurm_state, dist_file, reachable, epoch, epochs, step, steps_per_epoch, "
                "samples_per_second, ettr, restarts, stragglers, checkpoint_age_seconds, "
                "checkpoint_path, dashboard_url, exit_code, error");
  sub->add_option("--deadline", flags->deadline_s,
                  "Seconds to wait for each job's coordinator (default 2)")
      ->check(CLI::Range(0.1, 60.0));
  sub->add_option("--parallel", flags->parallel, "Coordinators asked at once (default 16)")
      ->check(CLI::Range(1, 256));
  sub->footer(absl::StrCat(
      "Without --dir, the jobs are yours as Slurm knows them (squeue --me --states=all, and sacct "
      "where Slurm keeps accounting), each with the dist_file the sbatch kit recorded in its "
      "Comment (ddp:dist_file=PATH), else <WorkDir>/dist_file.<job id>. STATE is the "
      "coordinator's when it answers, else the outcome in <dist_file>.result, else Slurm's.\n"
      "Exit codes: ",
      kExitOk, " listed (also when a coordinator does not answer), ", kExitFailed,
      " no list (Slurm not here or failing: use --dir; an unreadable folder), ", kExitUsage,
      " usage."));
  return [flags](const GlobalOptions&) {
    absl::StatusOr<std::vector<JobRef>> refs =
        flags->dir.empty() ? SlurmJobs() : FolderJobs(flags->dir);
    if (!refs.ok()) return Fail(std::string(refs.status().message()));
    const std::vector<JobRow> rows =
        InspectJobs(*refs, absl::Seconds(flags->deadline_s), flags->parallel);
    if (flags->json) {
      std::vector<std::string> objects;
      for (const JobRow& r : rows) objects.push_back(JobJson(r));
      std::cout << "[" << absl::StrJoin(objects, ",") << "]\n";
    } else if (rows.empty()) {
      std::cout << "no jobs\n";
    } else {
      std::cout << Table(rows);
    }
    return kExitOk;
  };
}

const ToolRegistrar registrar(
    {"ls", "List your jobs (Slurm's, or a folder's dist_files) with their progress", &Setup});

}  // namespace
}  // namespace ddp
