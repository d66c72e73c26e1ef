// What `ddpctl ls` lists: the user's jobs, found through Slurm (squeue, and sacct where Slurm
// keeps accounting) or in a folder of dist_files, each then looked at through its own files and
// coordinator. Slurm knows a job's dist_file from its Comment, where the sbatch kit records it
// (slurm/lib/job.sh: "ddp:dist_file=<absolute path>", after any comment of the user's), or else
// from the kit's default path, <WorkDir>/dist_file.<job id>.
//
// Thread safety: free functions; InspectJobs runs the inspections on threads of its own, each
// writing only its own row.
#ifndef SLURM_DDP_CLIENT_DDPCTL_JOB_LIST_H_
#define SLURM_DDP_CLIENT_DDPCTL_JOB_LIST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/job_status.h"

namespace ddp {

// The prefix of the kit's record in a job's Slurm Comment; the path runs to the end of it.
inline constexpr char kCommentDistFileKey[] = "ddp:dist_file=";

// A job as its source names it.
struct JobRef {
  std::string job_id;       // Slurm's (array jobs: 123_4) or, from a folder, the dist_file's
  std::string raw_job_id;   // Slurm's unique id (what the coordinator's job_id is); may be empty
  std::string name;         // Slurm's job name; from a folder, the file's name
  std::string slurm_state;  // empty without Slurm
  std::string dist_file;    // empty when unknown
  bool dist_file_only = false;  // from a folder: the dist_file is the only source
};

// What ls shows of one job.
struct JobRow {
  JobRef ref;
  // The job's state: the coordinator's (JobStateName) when it answered, else the result file's,
  // else Slurm's; "UNREACHABLE" for a folder's dist_file whose coordinator does not answer and
  // left no result; "UNREADABLE" for a dist_file that cannot be trusted or read and no other
  // source (`error` says why); "UNKNOWN" otherwise.
  std::string state;
  std::string state_source;  // "coordinator", "result", "slurm" or "none"
  bool have_status = false;  // `status` came from the coordinator
  JobStatus status;
  std::string dashboard_url;           // empty when none
  double checkpoint_age_seconds = -1;  // mtime of the last checkpoint's file; -1 unknown
  int result_exit_code = -1;           // from the result file; -1 when none
  bool dist_file_unreadable = false;   // the dist_file is there but not trusted or readable
  std::string error;                   // why the coordinator or a file could not be read
};

// Parses `squeue --format=` output of SqueueFormat() (or sacct's with the same separator and
// fields: raw id, id, state, work dir, name, comment). A job whose comment has no record gets the
// kit's default path when a dist_file or result file is there (the only file system access).
std::vector<JobRef> ParseSlurmJobs(absl::string_view text);
// squeue's --format argument for ParseSlurmJobs.
std::string SqueueFormat();

// The user's jobs as Slurm knows them: squeue (every state it still remembers), then sacct for
// finished jobs squeue has forgotten (when Slurm keeps accounting; silently skipped otherwise).
// UNAVAILABLE, saying so and suggesting --dir, when there is no squeue or it fails.
absl::StatusOr<std::vector<JobRef>> SlurmJobs();

// The jobs of the dist_files in `dir`: files named dist_file* and any other file that parses as
// one, plus the result files (<dist_file>.result) of finished jobs whose dist_file is gone.
// Sorted by file name. NOT_FOUND when `dir` cannot be read.
absl::StatusOr<std::vector<JobRef>> FolderJobs(const std::string& dir);

// Looks at each job (result file, dist_file, coordinator within `deadline`), up to `parallel` at
// a time. One unreachable job never fails the list: its row says why.
std::vector<JobRow> InspectJobs(const std::vector<JobRef>& refs, absl::Duration deadline,
                                int parallel);

}  // namespace ddp

#endif  // SLURM_DDP_CLIENT_DDPCTL_JOB_LIST_H_
