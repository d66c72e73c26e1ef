// ddp-trainer's configuration: every flag of the contract (docs/architecture.md, "Contracts"),
// parsed once in main and passed by value to the launcher and to each worker (workers are
// re-executed with the same command line, so they parse the same flags).
//
// Thread safety: a plain value.
#ifndef SLURM_DDP_TRAINER_LAUNCHER_CONFIG_H_
#define SLURM_DDP_TRAINER_LAUNCHER_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/exit_codes.h"  // ddp-trainer's exit codes (README, "Exit codes")

namespace ddp {

struct TrainerConfig {
  // Job and launch.
  std::string dist_file;         // default dist_file.<job id> in the working directory
  std::string job_id;            // local mode only; Slurm jobs use SLURM_JOB_ID
  int nprocs_per_node = 0;       // 0 = GPUs visible to the task, or 1 on a CPU-only node
  std::string backend = "auto";  // auto | nccl | gloo
  std::string device = "auto";   // auto (cuda with NCCL, else cpu) | cpu | cuda
  double registration_timeout_s = 120;
  double heartbeat_timeout_s = 10;
  double stall_timeout_s = 0;  // 0: derived from the median step time (coordinator)
  double stop_timeout_s = 60;  // a graceful stop ends within this (coordinator)
  // Straggler detection (coordinator): a rank whose relative score stays under the threshold
  // for the window is a straggler; the action is warn (the only one so far).
  double straggler_threshold = 0.75;
  double straggler_window_s = 30;
  std::string straggler_action = "warn";
  // Workers that cannot reach the coordinator for this long agree through their process group
  // to checkpoint and exit resumable (docs/operations.md, "When the coordinator is lost").
  double coordinator_grace_s = 60;
  double pg_timeout_s = 300;  // every collective fails after this long instead of hanging
  double linger_s = 10;       // the coordinator keeps serving status this long after the end
  // node: a task that spawns several workers relays their heartbeats as one call per interval,
  // and their Register, Rejoin and GetShard as node calls (client/heartbeat_relay.h); worker:
  // every worker makes these calls to the coordinator itself.
  std::string heartbeats = "node";
  // In-job recovery: workers the job may replace in place, job-wide (0: a lost worker fails the
  // job, exit kExitAborted naming it). A replacement must register within registration_timeout_s.
  int max_restarts = 3;
  // Warm workers per task (0 or 1; trainer/launcher/warm_link.h): started ahead of need, each
  // takes the slot of a lost worker without a process start or a data open.
  int warm_workers = 0;
  // The last K nodes of a Slurm step (one task per node) are spares: they hold no ranks and
  // take over a node that is lost as a whole (docs/operations.md, "When a node is lost").
  int spare_nodes = 0;
  // Without a spare, a node lost as a whole is dropped and the job goes on while at least this
  // many nodes remain (0: never; docs/operations.md, "When a node is lost").
  int min_nodes = 0;
  // Times task 0 restarts a coordinator that died, from its journal (0: never).
  int coordinator_restarts = 3;
  // The standby coordinator (trainer/launcher/standby.h): "auto" runs one on the next node in a
  // job of two or more nodes; "off" never. The standby takes the job over after
  // failover_timeout_s without an answer from the coordinator.
  std::string standby = "auto";
  double failover_timeout_s = 3;

  // Data and model.
  std::string data = "fashion-mnist";
  std::string normalize;  // MEAN,STD override
  std::string arch = "cnn";
  std::string model_path;              // TorchScript module to train instead of --arch
  int workers = 2;                     // loader threads per worker process
  std::string data_pipeline = "auto";  // auto | cpu | gpu (nvJPEG decode + GPU transforms)

  // Optimization.
  int epochs = 2;
  int batch_size = 64;  // per worker
  double lr = 0.05;
  double momentum = 0.9;
  double weight_decay = 1e-4;
  bool nesterov = false;
  std::string schedule = "step";  // step (x0.1 every lr_step epochs) | cosine | constant
  int lr_step_epochs = 30;
  int warmup_epochs = 0;
  int64_t seed = 0;
  bool bf16 = false;           // autocast to bf16 on GPU
  bool channels_last = false;  // 4-D parameters and inputs in channels-last memory format
  bool fused_bn_relu = false;  // ResNets: BatchNorm + residual add + ReLU as one CUDA op
  bool deterministic = false;  // deterministic algorithms (cuDNN, scatter, ...); no cuDNN autotune
  int64_t bucket_mb = 25;

  // Checkpoints and stopping.
  std::string checkpoint_dir;    // empty: no checkpoints (final weights are not kept)
  std::string resume = "auto";   // auto (the folder's run, if any) | none (a new run) | PATH
  bool force_resume = false;     // resume despite a different --seed or data set size
  int64_t checkpoint_every = 0;  // steps between checkpoints (0: epoch ends only)
  int keep_checkpoints = 3;
  int64_t stop_after_steps = 0;  // checkpoint and exit resumable after this many steps of this run

  // Output.
  int print_freq = 50;
  bool evaluate = true;

  // Internal: set on the command line of workers the launcher spawns.
  bool internal_worker = false;
};

// Parses argv. On --help prints usage and returns an error whose message is empty with
// `*exit_code` = 0; on bad flags returns a one-line error and sets `*exit_code` = kExitUsage.
absl::StatusOr<TrainerConfig> ParseTrainerFlags(int argc, char** argv, int* exit_code);

// The deadline of a worker's calls to the coordinator (heartbeats, a shard, a checkpoint
// commit): 10 s, or --coordinator-grace when shorter, so a call that was on its way when the
// coordinator died does not hold a worker past the grace. A node's heartbeat relay uses it too.
absl::Duration WorkerRpcTimeout(const TrainerConfig& c);

}  // namespace ddp

#endif  // SLURM_DDP_TRAINER_LAUNCHER_CONFIG_H_
