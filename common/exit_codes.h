// The process exit codes of every binary (ddp-trainer, ddp-coordinator, ddpctl), defined once.
// Shell scripts never write these numbers: they read them from `ddpctl exit-codes`, which prints
// this table (kExitCodeTable) as NAME=VALUE lines.
//
// Thread safety: constants only.
#ifndef SLURM_DDP_COMMON_EXIT_CODES_H_
#define SLURM_DDP_COMMON_EXIT_CODES_H_

namespace ddp {

inline constexpr int kExitOk = 0;         // success (ddpctl watch: the job SUCCEEDED)
inline constexpr int kExitFailed = 1;     // failed; the reason is the last line on stderr
inline constexpr int kExitUsage = 2;      // bad flags or environment; nothing was started
inline constexpr int kExitResumable = 3;  // stopped after a checkpoint: resumable (requeue me)
inline constexpr int kExitAborted = 4;    // ddp-trainer: aborted because another rank failed
inline constexpr int kExitTimedOut = 5;   // ddpctl: the job did not answer or act in time

struct ExitCodeEntry {
  const char* name;  // shell variable name, e.g. DDP_EXIT_RESUMABLE
  int value;
  const char* meaning;
};

inline constexpr ExitCodeEntry kExitCodeTable[] = {
    {"DDP_EXIT_OK", kExitOk, "success"},
    {"DDP_EXIT_FAILED", kExitFailed, "failed (reason on stderr)"},
    {"DDP_EXIT_USAGE", kExitUsage, "bad flags or environment; nothing was started"},
    {"DDP_EXIT_RESUMABLE", kExitResumable, "stopped after a checkpoint; resumable (requeue)"},
    {"DDP_EXIT_ABORTED", kExitAborted, "aborted because another rank failed"},
    {"DDP_EXIT_TIMED_OUT", kExitTimedOut, "ddpctl: the job did not answer or act in time"},
};

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_EXIT_CODES_H_
