#include "trainer/launcher/config.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <iostream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ddp {
namespace {

absl::Status Validate(const TrainerConfig& c) {
  // CLI11's range checks let inf and nan through (nan compares false to every bound): every
  // number must be finite.
  const std::pair<const char*, double> numbers[] = {
      {"--registration-timeout", c.registration_timeout_s},
      {"--heartbeat-timeout", c.heartbeat_timeout_s},
      {"--stall-timeout", c.stall_timeout_s},
      {"--stop-timeout", c.stop_timeout_s},
      {"--straggler-threshold", c.straggler_threshold},
      {"--straggler-window", c.straggler_window_s},
      {"--coordinator-grace", c.coordinator_grace_s},
      {"--pg-timeout", c.pg_timeout_s},
      {"--linger", c.linger_s},
      {"--lr", c.lr},
      {"--momentum", c.momentum},
      {"--weight-decay", c.weight_decay},
  };
  for (const auto& [flag, value] : numbers) {
    if (!std::isfinite(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " ", value, ": expected a finite number"));
    }
  }
  if (c.straggler_action != "warn" && c.straggler_action != "replace" &&
      c.straggler_action != "exclude") {
    return absl::InvalidArgumentError(absl::StrCat("--straggler-action ", c.straggler_action,
                                                   ": expected warn, replace or exclude"));
  }
  if (c.backend != "auto" && c.backend != "nccl" && c.backend != "gloo") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend ", c.backend, ": expected auto, nccl or gloo"));
  }
  if (c.device != "auto" && c.device != "cpu" && c.device != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("--device ", c.device, ": expected auto, cpu or cuda"));
  }
  if (c.backend == "nccl" && c.device == "cpu") {
    return absl::InvalidArgumentError("--backend nccl needs CUDA tensors: drop --device cpu");
  }
  if (c.fused_bn_relu && (!c.model_path.empty() || c.arch.rfind("resnet", 0) != 0)) {
    return absl::InvalidArgumentError(
        "--fused-bn-relu applies to --arch resnet18, resnet34 and resnet50 only");
  }
  if (c.fused_bn_relu && !c.channels_last) {
    return absl::InvalidArgumentError("--fused-bn-relu needs --channels-last");
  }
  if (c.fused_bn_relu && c.device == "cpu") {
    return absl::InvalidArgumentError("--fused-bn-relu runs on CUDA tensors: drop --device cpu");
  }
  if (c.data_pipeline != "auto" && c.data_pipeline != "cpu" && c.data_pipeline != "gpu") {
    return absl::InvalidArgumentError(
        absl::StrCat("--data-pipeline ", c.data_pipeline, ": expected auto, cpu or gpu"));
  }
  if (c.schedule != "step" && c.schedule != "cosine" && c.schedule != "constant") {
    return absl::InvalidArgumentError(
        absl::StrCat("--schedule ", c.schedule, ": expected step, cosine or constant"));
  }
  if (!(c.coordinator_grace_s > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--coordinator-grace ", c.coordinator_grace_s, ": expected seconds > 0"));
  }
  if (c.resume.empty()) {
    return absl::InvalidArgumentError("--resume needs auto, none or a checkpoint path");
  }
  if (c.stop_after_steps > 0 && c.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError("--stop-after-steps needs --checkpoint-dir to resume from");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainerConfig> ParseTrainerFlags(int argc, char** argv, int* exit_code) {
  TrainerConfig c;
  CLI::App app{
      "ddp-trainer: distributed data-parallel training, coordinated over gRPC.\n"
      "Under Slurm (srun ddp-trainer ...) task 0 starts the job's coordinator and every task\n"
      "starts its workers; without Slurm it trains with --nprocs-per-node local workers.\n"
      "Exit codes: 0 done, 1 failed, 2 bad usage, 3 stopped after a checkpoint (requeue),\n"
      "4 aborted because another rank failed.",
      "ddp-trainer"};
  app.option_defaults()->always_capture_default();
  app.get_formatter()->column_width(34);

  auto* job = "Job";
  app.add_option("--dist-file", c.dist_file,
                 "Rendezvous file on a shared file system (default: dist_file.<job id>)")
      ->group(job);
  app.add_option("--job-id", c.job_id, "Job id in local mode (default: local-<pid>)")->group(job);
  app.add_option("--nprocs-per-node", c.nprocs_per_node,
                 "Workers per node (0: the GPUs visible to the task, or 1 without GPUs)")
      ->check(CLI::Range(0, 1024))
      ->group(job);
  app.add_option("--backend", c.backend, "auto | nccl | gloo")->group(job);
  app.add_option("--device", c.device,
                 "auto (cuda with NCCL, else cpu) | cpu | cuda (e.g. Gloo on CUDA tensors)")
      ->group(job);
  app.add_option("--registration-timeout", c.registration_timeout_s,
                 "Seconds to wait for every worker to register")
      ->check(CLI::PositiveNumber)
      ->group(job);
  app.add_option("--heartbeat-timeout", c.heartbeat_timeout_s,
                 "Seconds of silence after which a rank is declared lost")
      ->check(CLI::PositiveNumber)
      ->group(job);
  app.add_option("--max-restarts", c.max_restarts,
                 "Workers the job may replace in place when one dies (job-wide; 0 = fail fast). "
                 "A replacement must register within --registration-timeout")
      ->check(CLI::Range(0, 1000000))
      ->group(job);
  app.add_option("--warm-workers", c.warm_workers,
                 "Warm workers each task keeps ready (0 or 1) while --max-restarts allows: "
                 "started ahead of need (LibTorch loaded, data open, no rank), one takes a lost "
                 "worker's slot at once and another is started after that one's first step; 0 = "
                 "a replacement process is started when needed. Costs one more process per node "
                 "(its memory)")
      ->check(CLI::Range(0, 1))
      ->group(job);
  app.add_option("--spare-nodes", c.spare_nodes,
                 "The last K nodes of the Slurm step are spares (one task per node): they hold "
                 "no ranks and take over the ranks of a node lost as a whole (its task and "
                 "workers silent past --heartbeat-timeout), each of its ranks costing a restart")
      ->check(CLI::Range(0, 65535))
      ->group(job);
  app.add_option("--min-nodes", c.min_nodes,
                 "Without a spare, a node lost as a whole is dropped and the job goes on on the "
                 "others (smaller global batch, same learning rate) while at least this many "
                 "nodes remain; 0 = never: the job fails at the recovery deadline")
      ->check(CLI::Range(0, 65535))
      ->group(job);
  app.add_option("--coordinator-restarts", c.coordinator_restarts,
                 "Times task 0 restarts the job's coordinator when it dies (a signal or an error "
                 "exit) while workers run, from its journal beside the dist_file; workers "
                 "re-attach without stopping. 0 = never. A restarted coordinator that refuses "
                 "its journal is not restarted again")
      ->check(CLI::Range(0, 1000))
      ->group(job);
  app.add_option("--standby", c.standby,
                 "auto: in a job of two or more nodes, the node after the coordinator's (node 1 "
                 "at first) watches the coordinator and takes the job over when node 0 is lost "
                 "(a coordinator of the next epoch, from the journal beside the dist_file); "
                 "off: node 0's loss ends the job (grace checkpoint, exit 3)")
      ->check(CLI::IsMember({"auto", "off"}))
      ->group(job);
  app.add_option("--failover-timeout", c.failover_timeout_s,
                 "Seconds the standby waits without an answer from the coordinator before it "
                 "takes the job over (task 0 restarts a dead coordinator well within it); must "
                 "be under --coordinator-grace")
      ->check(CLI::PositiveNumber)
      ->group(job);
  app.add_option(
         "--stall-timeout", c.stall_timeout_s,
         absl::StrCat("Seconds a rank may sit in one working phase while a peer waits in "
                      "a collective before it is stalled: with a restart left "
                      "(--max-restarts) it is replaced, else the job fails naming it (exit ",
                      kExitAborted,
                      "); 0: max(60 s, 20x the median step time); checkpoint, eval and "
                      "the first step get 10x"))
      ->check(CLI::NonNegativeNumber)
      ->group(job);
  app.add_option("--stop-timeout", c.stop_timeout_s,
                 absl::StrCat("Seconds a graceful stop (ddpctl stop, SIGTERM, SIGUSR1) may take "
                              "before the ranks still running are ended: exit ",
                              kExitResumable, " with a checkpoint, else ", kExitFailed))
      ->check(CLI::PositiveNumber)
      ->group(job);
  app.add_option("--straggler-threshold", c.straggler_threshold,
                 "A rank whose relative score (the best rank's busy time per step, the step less "
                 "its time waiting in collectives, over its own) stays under this for "
                 "--straggler-window is a straggler, named with the slow section (data, compute, "
                 "optimizer) in ddpctl status, /metrics and an event")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str()
      ->group(job);
  app.add_option("--straggler-window", c.straggler_window_s,
                 "Seconds a rank's relative score must stay under --straggler-threshold before "
                 "it is named (one slow step, a checkpoint or an evaluation never is)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str()
      ->group(job);
  app.add_option(
         "--straggler-action", c.straggler_action,
         "What naming a straggler does besides reporting it: warn (nothing more), replace (hand "
         "its node to a spare node standing by, inside the job: --spare-nodes), exclude "
         "(write its node to <dist_file>.exclude, which the sbatch kit's requeue passes "
         "to Slurm as --exclude)")
      ->capture_default_str()
      ->group(job);
  app.add_option("--coordinator-grace", c.coordinator_grace_s,
                 absl::StrCat("Seconds the workers train on while the coordinator cannot be "
                              "reached; then they agree through their process group to write a "
                              "checkpoint and exit ",
                              kExitResumable, " (", kExitAborted, " without --checkpoint-dir)"))
      ->group(job);
  app.add_option("--pg-timeout", c.pg_timeout_s, "Seconds before a stuck collective fails")
      ->check(CLI::PositiveNumber)
      ->group(job);
  app.add_option("--heartbeats", c.heartbeats,
                 "node: a task that starts several workers sends their heartbeats to the "
                 "coordinator as one call per interval (an 8-GPU node costs one RPC, not eight), "
                 "and their registrations, rejoins and shard requests as one call per node, over "
                 "the node's one connection (the workers open none); "
                 "worker: each worker sends its own (a task that is one worker always does)")
      ->check(CLI::IsMember({"node", "worker"}))
      ->group(job);
  app.add_option("--linger", c.linger_s,
                 "Seconds the coordinator (task 0) keeps serving status after a successful job, "
                 "so that ddpctl and the dashboard can read the outcome; a signal ends it early")
      ->check(CLI::Range(0.0, 3600.0))
      ->group(job);

  auto* data = "Data and model";
  app.add_option("--data", c.data,
                 "fashion-mnist[:DIR] | mnist:DIR | cifar10:DIR | imagefolder:DIR | "
                 "synthetic[:spec]")
      ->group(data);
  app.add_option("--normalize", c.normalize, "Override normalization: MEAN,STD")->group(data);
  app.add_option("--arch", c.arch, "mlp | cnn | resnet18 | resnet34 | resnet50")->group(data);
  app.add_option("--model", c.model_path, "TorchScript module to train instead of --arch")
      ->group(data);
  app.add_option("--workers", c.workers, "Data loading threads per worker")
      ->check(CLI::Range(0, 64))
      ->group(data);
  app.add_option("--data-pipeline", c.data_pipeline,
                 "imagefolder JPEGs: gpu (nvJPEG decode + transforms on the GPU), cpu, or auto "
                 "(gpu on a CUDA device when nvJPEG loads)")
      ->group(data);

  auto* opt = "Optimization";
  app.add_option("--epochs", c.epochs)->check(CLI::Range(1, 100000))->group(opt);
  app.add_option("--batch-size", c.batch_size, "Per worker")
      ->check(CLI::Range(1, 1 << 20))
      ->group(opt);
  app.add_option("--lr", c.lr, "Learning rate (for the whole job, not scaled)")
      ->check(CLI::PositiveNumber)
      ->group(opt);
  app.add_option("--momentum", c.momentum)->check(CLI::Range(0.0, 1.0))->group(opt);
  app.add_option("--weight-decay", c.weight_decay)->check(CLI::NonNegativeNumber)->group(opt);
  app.add_flag("--nesterov", c.nesterov, "Nesterov momentum")->group(opt);
  app.add_option("--schedule", c.schedule, "step (x0.1 every --lr-step epochs) | cosine | constant")
      ->group(opt);
  app.add_option("--lr-step", c.lr_step_epochs, "Epochs between x0.1 steps (step schedule)")
      ->check(CLI::Range(1, 100000))
      ->group(opt);
  app.add_option("--warmup-epochs", c.warmup_epochs, "Linear warmup epochs")
      ->check(CLI::Range(0, 100000))
      ->group(opt);
  app.add_option("--seed", c.seed, "Seed of initialization, data order and augmentation")
      ->group(opt);
  app.add_flag("--bf16", c.bf16, "bf16 autocast (GPU)")->group(opt);
  app.add_flag("--channels-last", c.channels_last,
               "Channels-last memory format for 4-D weights and inputs (faster convolutions on "
               "GPU tensor cores)")
      ->group(opt);
  app.add_flag("--fused-bn-relu", c.fused_bn_relu,
               "ResNets: BatchNorm, residual add and ReLU as one CUDA op in training (fewer "
               "passes over the activations; same weights, checkpoints and results up to float "
               "rounding). Needs --channels-last and CUDA tensors")
      ->group(opt);
  app.add_flag("--deterministic", c.deterministic,
               "Deterministic algorithms only (as torch.use_deterministic_algorithms(True, "
               "warn_only=True)); on GPU also no cuDNN autotuning. Set CUBLAS_WORKSPACE_CONFIG="
               ":4096:8 for deterministic cuBLAS")
      ->group(opt);
  app.add_option("--bucket-mb", c.bucket_mb, "DDP gradient bucket size in MiB")
      ->check(CLI::Range(1, 4096))
      ->group(opt);

  auto* ckpt = "Checkpoints and stopping";
  app.add_option("--checkpoint-dir", c.checkpoint_dir, "Where checkpoints and final.pt go")
      ->group(ckpt);
  app.add_option("--resume", c.resume,
                 "auto (continue the folder's run from its newest valid checkpoint) | none (start "
                 "a new run) | PATH")
      ->group(ckpt);
  app.add_flag("--force-resume", c.force_resume,
               "Resume even if the checkpoint was written with another --seed or a data set of "
               "another size (refused otherwise)")
      ->group(ckpt);
  app.add_option("--checkpoint-every", c.checkpoint_every,
                 "Steps between checkpoints (0: at epoch ends only)")
      ->check(CLI::NonNegativeNumber)
      ->group(ckpt);
  app.add_option("--keep-checkpoints", c.keep_checkpoints,
                 "Checkpoints of this run kept besides final.pt (other runs' files are never "
                 "deleted)")
      ->check(CLI::Range(1, 1000))
      ->group(ckpt);
  app.add_option("--stop-after-steps", c.stop_after_steps,
                 "Checkpoint and exit with code 3 after this many steps (as on a requeue signal)")
      ->check(CLI::NonNegativeNumber)
      ->group(ckpt);

  auto* out = "Output";
  app.add_option("--print-freq", c.print_freq, "Steps between progress lines (rank 0)")
      ->check(CLI::Range(1, 1 << 30))
      ->group(out);
  app.add_flag("!--no-eval", c.evaluate, "Skip evaluation after each epoch")->group(out);
  app.add_flag("--internal-worker", c.internal_worker)->group("");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    *exit_code = app.exit(e);
    return absl::CancelledError("");
  } catch (const CLI::ParseError& e) {
    *exit_code = kExitUsage;
    std::string what = e.what();
    return absl::InvalidArgumentError(what.substr(0, what.find('\n')));
  }
  if (absl::Status s = Validate(c); !s.ok()) {
    *exit_code = kExitUsage;
    return s;
  }
  *exit_code = kExitOk;
  return c;
}

absl::Duration WorkerRpcTimeout(const TrainerConfig& c) {
  return std::min(absl::Seconds(10), absl::Seconds(c.coordinator_grace_s));
}

}  // namespace ddp
