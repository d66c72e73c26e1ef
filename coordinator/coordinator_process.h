// ddp-coordinator as a library: everything its thin main does after parsing flags. Start()
// resolves the job's identity (flags, else Slurm's through common/slurm_env, else local), starts
// the signal watcher (before any other thread), the job, the gRPC server and the HTTP endpoint,
// and publishes the dist_file. RunUntilDone() waits for the job to end, lingers so status stays
// readable (a signal ends the linger at once), shuts the servers down, writes the job's result
// file (common/job_result.h), removes the dist_file if it is still ours and returns the exit code
// (common/exit_codes.h).
//
// One job per dist_file: before the journal or the dist_file is touched, Start() takes the
// dist_file's lock (common/dist_file_lock.h), or adopts the one its task 0 holds; a live job's
// lock refuses the start (ALREADY_EXISTS, naming that job: exit 2) and nothing of that job's is
// touched. At the end the dist_file is removed only while it is still this incarnation's.
//
// The journal (coordinator/job/journal.h): a fresh coordinator creates `<dist_file>.journal`
// beside the dist_file and records every state change a successor needs. With
// resume_from_journal, Start() instead reads the dist_file and the journal (refusing a corrupt
// journal or one of another job, FAILED_PRECONDITION / DATA_LOSS), restores the job, listens on a
// new port and republishes the dist_file with the same job, generation, nonce and tokens and the
// next incarnation. Once the job has finished the journal is removed: nothing is left to resume.
// A fresh coordinator also makes the job's TLS key and certificate
// (coordinator/rpc/tls_identity.h): the certificate goes into the dist_file, both into the
// journal's header, so a restarted one serves the certificate its clients already pin.
//
// Epochs (docs/architecture.md, "Standby coordinator"): task 0's coordinator is epoch 0; a
// standby on another node that takes the job over starts one with epoch E+1 and claim_epoch. It
// claims the epoch with an O_EXCL file (<dist_file>.epoch<E+1>, EpochFilePath: of two claimants
// one wins, also on NFS), takes the journal over, treats the lost node's ranks as lost
// (Job::TakeOverFromLostNode) and republishes the dist_file with the epoch and its node. Every
// coordinator holds an EpochLease on the dist_file: finding a newer epoch there, or the job's
// result written by a newer epoch (the job ended while this one did not run), it logs when it
// last accepted a call and exits (exit 1) without touching the dist_file, journal or result.
//
// Signals: SIGUSR1 (Slurm: time limit near) asks for a graceful stop while RUNNING and is
// ignored otherwise, so it never kills the coordinator while workers checkpoint. The first
// SIGTERM/SIGINT while RUNNING asks for a graceful stop; any other one aborts the job.
//
// Thread safety: Start, RunUntilDone and the destructor from one owning thread; signals are
// handled on the watcher's thread, which the destructor joins.
#ifndef SLURM_DDP_COORDINATOR_COORDINATOR_PROCESS_H_
#define SLURM_DDP_COORDINATOR_COORDINATOR_PROCESS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/dist_file.h"
#include "common/dist_file_lock.h"
#include "common/fd_limit.h"
#include "common/slurm_env.h"
#include "coordinator/epoch_lease.h"
#include "coordinator/job/job.h"
#include "coordinator/kv_store.h"
#include "coordinator/line_logger.h"
#include "coordinator/ops/http_endpoint.h"
#include "coordinator/rpc/server.h"
#include "coordinator/signal_watcher.h"

namespace ddp {

struct CoordinatorOptions {
  int world_size = 0;
  std::string dist_file;    // empty: dist_file.<job id> in the current folder
  std::string listen;       // host:port; empty: this node's routable address, port 0
  std::string job_id;       // empty: SLURM_JOB_ID, else local-<pid>
  int64_t generation = -1;  // < 0: SLURM_RESTART_COUNT, else 0
  absl::Duration registration_timeout = absl::Seconds(300);
  absl::Duration heartbeat_timeout = absl::Seconds(10);
  // In-job recovery: restarts the whole job may use (0: a lost rank fails the job). A recovery
  // gets registration_timeout to complete (the registration deadline for a replacement).
  int max_restarts = 0;
  int min_nodes = 0;                                    // shrinking (JobConfig::min_nodes)
  absl::Duration stall_timeout = absl::ZeroDuration();  // zero: from the job's pace (stall_rule.h)
  absl::Duration stop_timeout = absl::Seconds(60);
  StragglerOptions straggler;  // --straggler-threshold, --straggler-window
  int http_port = 0;           // 0: ephemeral; -1: no HTTP endpoint
  // After a successful job; after one that failed or stopped, at least kOutcomeLinger.
  absl::Duration linger = absl::Seconds(10);
  std::string log_file;  // also append log lines here
  // Take over the job of the dist_file from its journal (a restarted coordinator).
  bool resume_from_journal = false;
  // Standby takeover (trainer/launcher/standby.h; with resume_from_journal): serve as this
  // coordinator epoch (> 0) without the dist_file's lock (which the lost node may still hold);
  // the epoch fences instead. claim_epoch: this start is the takeover itself, which first claims
  // the epoch (ClaimEpoch: at most one claimant wins) and then treats `lost_node`'s ranks as lost.
  int64_t epoch = 0;
  bool claim_epoch = false;
  // --standby auto: a standby watches this coordinator from the next node (JobConfig::standby).
  bool standby = false;
  int node_rank = 0;   // the node this coordinator runs on (published as coordinator_node)
  int lost_node = -1;  // the node whose coordinator was lost (claim_epoch)
  absl::Time last_answer = absl::InfinitePast();  // when the lost coordinator last answered
  // Calls in flight by role, and the first-message deadline (coordinator/rpc/call_gate.h).
  CallBudgets call_budgets;
  // Serve gRPC reflection (debugging only: coordinator/rpc/server.h).
  bool grpc_reflection = false;
  // No TLS and no certificate in the dist_file, so no client of the product connects: for
  // bench/loadgen.sh --plaintext only (ServerOptions::plaintext).
  bool bench_plaintext = false;
  // An inherited descriptor that holds the dist_file's lock (common/dist_file_lock.h; task 0 of
  // ddp-trainer holds it for the job); -1: take the lock here.
  int dist_file_lock_fd = -1;
  // What main() made resident with ReserveHeap before anything started (logged at start).
  size_t heap_reserved_bytes = 0;
  double heap_reserve_seconds = 0;
  // The descriptor limit main() raised to the hard limit (common/fd_limit.h), logged at start
  // when it changed or falls short of the job; unset: not raised.
  std::optional<FdLimit> fd_limit;
};

struct JobIdentity {
  std::string job_id;
  int64_t generation = 0;
};
// The flags when given; else, in a Slurm job, its id and restart count (common/slurm_env; an
// environment it cannot parse is INVALID_ARGUMENT naming the variable); else local-<pid> and 0.
absl::StatusOr<JobIdentity> ResolveJobIdentity(const std::string& job_id, int64_t generation,
                                               const EnvMap& env);

// <dist_file>.epoch<E>: the claim of coordinator epoch E (created O_EXCL by the standby that
// takes the job over; removed with the job's other files at its end).
std::string EpochFilePath(const std::string& dist_file, int64_t epoch);

class CoordinatorProcess {
 public:
  // INVALID_ARGUMENT: bad options or environment (usage); ALREADY_EXISTS: the dist_file belongs to
  // a live job; other errors: could not start.
  static absl::StatusOr<std::unique_ptr<CoordinatorProcess>> Start(
      const CoordinatorOptions& options, const EnvMap& env);
  ~CoordinatorProcess();
  CoordinatorProcess(const CoordinatorProcess&) = delete;
  // The least a coordinator lingers after a job that failed or stopped.
  static constexpr absl::Duration kOutcomeLinger = absl::Seconds(10);
  CoordinatorProcess& operator=(const CoordinatorProcess&) = delete;

  int RunUntilDone();

  const std::string& dist_file() const { return dist_file_; }
  const std::string& address() const { return server_->address(); }
  Job& job() { return *job_; }

 private:
  explicit CoordinatorProcess(const CoordinatorOptions& options);
  absl::Status StartServing(const JobIdentity& identity);
  // The dist_file's contents and the journal's state for a restart (resume_from_journal).
  absl::Status ResumeJournal(const JobIdentity& identity, JournalState* state);
  void OnSignal(int sig);
  void Log(const std::string& line) { logger_->Log(line); }
  // --straggler-action exclude: appends the node to <dist_file>.exclude (common/exclude_list.h).
  void AppendExclusion(const NodeExclusion& e);
  // The takeover's first steps (claim_epoch): claims the epoch, then moves the journal to a fresh
  // file so that a lost coordinator that comes back appends only to a file nobody reads.
  absl::Status ClaimEpoch(const JobIdentity& identity);
  // A newer epoch (its dist_file, or the result it wrote at the job's end): log, then exit at once
  // without touching the job's files.
  [[noreturn]] void OnFenced(const Supersession& by);
  // Writes <dist_file>.result: how the job ended, with this coordinator's epoch (written by this
  // process alone; no client string goes into it).
  void WriteResult(const JobStatus& status, int exit_code);

  const CoordinatorOptions options_;
  std::string dist_file_;
  DistFileContents contents_;
  TlsIdentity tls_;  // the key and certificate the server presents (the journal keeps them)
  std::unique_ptr<LineLogger> logger_;
  std::unique_ptr<DistFileLock> lock_;  // held from before the journal is touched to the end
  std::unique_ptr<Journal> journal_;    // before job_: the job reports to it
  std::unique_ptr<Job> job_;
  KvStore store_;
  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<HttpEndpoint> http_;
  std::unique_ptr<EpochLease> lease_;  // fencing: every call checks it (epoch_lease.h)
  absl::Notification end_linger_;
  std::atomic<int> interrupts_{0};  // SIGTERM/SIGINT received
  // Last: destroyed (joined) first, while everything its callback touches still exists.
  std::unique_ptr<SignalWatcher> signals_;
};

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_COORDINATOR_PROCESS_H_
