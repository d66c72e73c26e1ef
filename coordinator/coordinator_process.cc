#include "coordinator/coordinator_process.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/exclude_list.h"
#include "common/exit_codes.h"
#include "common/file_util.h"
#include "common/heap_reserve.h"
#include "common/job_result.h"
#include "common/job_status.h"
#include "common/status_macros.h"
#include "coordinator/line_logger.h"

namespace ddp {
namespace {

// How a finished job ended, for the log.
std::string OutcomeName(JobState state) {
  return state == JobState::kStopped ? "STOPPED (resumable)" : JobStateName(state);
}

std::string OutcomeReason(const JobStatus& s) {
  return s.state == JobState::kFailed ? s.failure.text : s.stop_reason;
}

// --straggler-action exclude writes here (common/exclude_list.h); ddpctl stragglers reads it.
std::string ExcludeListPath(const std::string& dist_file) { return dist_file + ".exclude"; }

}  // namespace

absl::StatusOr<JobIdentity> ResolveJobIdentity(const std::string& job_id, int64_t generation,
                                               const EnvMap& env) {
  JobIdentity id{job_id, generation};
  if ((id.job_id.empty() || id.generation < 0) && IsSlurm(env)) {
    absl::StatusOr<SlurmEnv> slurm = ParseSlurmEnv(env);
    if (!slurm.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot read the Slurm environment (",
                                                     slurm.status().message(),
                                                     "); pass --job-id and --generation"));
    }
    if (id.job_id.empty()) id.job_id = SlurmJobIdentity(*slurm);
    if (id.generation < 0) id.generation = slurm->restart_count;
  }
  if (id.job_id.empty()) id.job_id = LocalJobId();
  if (id.generation < 0) id.generation = 0;
  return id;
}

CoordinatorProcess::CoordinatorProcess(const CoordinatorOptions& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<CoordinatorProcess>> CoordinatorProcess::Start(
    const CoordinatorOptions& options, const EnvMap& env) {
  if (options.world_size < 1 || options.world_size > kMaxWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("--world-size ", options.world_size, " is outside 1..", kMaxWorldSize));
  }
  std::unique_ptr<CoordinatorProcess> p(new CoordinatorProcess(options));
  ASSIGN_OR_RETURN(p->logger_, LineLogger::Open(options.log_file));
  ASSIGN_OR_RETURN(JobIdentity identity,
                   ResolveJobIdentity(options.job_id, options.generation, env));
  RETURN_IF_ERROR(p->StartServing(identity));
  return p;
}

absl::Status CoordinatorProcess::StartServing(const JobIdentity& identity) {
  dist_file_ =
      options_.dist_file.empty() ? DefaultDistFilePath(identity.job_id) : options_.dist_file;
  if (options_.epoch > 0) {
    // A standby's coordinator: the lost node's task may still hold the lock (stopped, or an NFS
    // lock of a dead client); the epoch fences instead (epoch_lease.h).
    if (!options_.resume_from_journal) {
      return absl::InvalidArgumentError("--epoch needs --resume-from-journal");
    }
    if (options_.claim_epoch) RETURN_IF_ERROR(ClaimEpoch(identity));
  } else if (options_.dist_file_lock_fd >= 0) {
    ASSIGN_OR_RETURN(lock_, DistFileLock::Adopt(dist_file_, options_.dist_file_lock_fd));
  } else {
    ASSIGN_OR_RETURN(lock_, DistFileLock::Acquire(
                                dist_file_, absl::StrCat("job ", identity.job_id, " generation ",
                                                         identity.generation,
                                                         ", ddp-coordinator pid ", ::getpid())));
  }
  JournalState restored;
  if (options_.resume_from_journal) {
    RETURN_IF_ERROR(ResumeJournal(identity, &restored));
  } else {
    ASSIGN_OR_RETURN(contents_, NewDistFileContents(identity.job_id, identity.generation, "", 0));
    ASSIGN_OR_RETURN(tls_, NewTlsIdentity());
    if (!options_.bench_plaintext) contents_.tls_cert = tls_.cert_pem;
    const JournalHeader header{contents_.job_id,    contents_.generation, contents_.nonce,
                               contents_.token,     contents_.view_token, contents_.control_token,
                               options_.world_size, tls_.key_pem,         tls_.cert_pem};
    ASSIGN_OR_RETURN(journal_, Journal::Create(JournalPath(dist_file_), header,
                                               [this](const std::string& line) { Log(line); }));
  }
  JobConfig config;
  config.job_id = identity.job_id;
  config.generation = identity.generation;
  config.nonce = contents_.nonce;
  config.world_size = options_.world_size;
  config.registration_timeout = options_.registration_timeout;
  config.heartbeat_timeout = options_.heartbeat_timeout;
  config.max_restarts = options_.max_restarts;
  config.min_nodes = options_.min_nodes;
  config.recovery_timeout = options_.registration_timeout;
  config.stall.timeout = options_.stall_timeout;
  config.stop_timeout = options_.stop_timeout;
  config.straggler = options_.straggler;
  config.suspend_threshold = absl::Seconds(2);  // the server ticks every 50 ms
  config.log = [this](const std::string& line) { Log(line); };
  config.log_lines = [this](const std::vector<std::string>& lines) { logger_->LogLines(lines); };
  config.exclude = [this](const NodeExclusion& e) { AppendExclusion(e); };
  config.journal = journal_.get();
  config.standby = options_.standby;
  job_ = std::make_unique<Job>(config, MonotonicClock::Get());
  if (options_.resume_from_journal) {
    absl::Status st = job_->Restore(restored);
    if (!st.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot resume from journal ", journal_->path(), ": ", st.message()));
    }
  }
  CoordinatorInfo me;
  me.epoch = contents_.epoch;
  me.node = contents_.coordinator_node;
  me.host = HostName();
  job_->SetCoordinator(me);
  if (options_.claim_epoch && options_.lost_node >= 0) {
    job_->TakeOverFromLostNode(options_.lost_node, options_.epoch);
  }

  // Before the first thread: Slurm delivers a job step's signals to every process of the task.
  ASSIGN_OR_RETURN(signals_, SignalWatcher::Start({SIGTERM, SIGINT, SIGUSR1},
                                                  [this](int sig) { OnSignal(sig); }));
  // After the watcher: the lease's thread must not take a job step's SIGUSR1 (its default
  // action would end the coordinator).
  EpochLease::Options lease;
  lease.dist_file = dist_file_;
  lease.mine = contents_;
  lease.wait_for_serve_from = options_.claim_epoch;
  lease.on_fenced = [this](const Supersession& by) { OnFenced(by); };
  lease_ = std::make_unique<EpochLease>(std::move(lease));

  ServerOptions server_options;
  server_options.listen =
      options_.listen.empty() ? absl::StrCat(DefaultListenHost(), ":0") : options_.listen;
  server_options.tokens = {contents_.token, contents_.view_token, contents_.control_token};
  server_options.tls = tls_;
  server_options.reflection = options_.grpc_reflection;
  server_options.plaintext = options_.bench_plaintext;
  server_options.log = config.log;
  server_options.budgets = options_.call_budgets;
  server_options.epoch = contents_.epoch;
  server_options.fence = [this] { return lease_->Current(); };
  ASSIGN_OR_RETURN(server_, CoordinatorServer::Start(server_options, job_.get(), &store_,
                                                     MonotonicClock::Get()));
  // The HTTP endpoint listens on the gRPC host; the dist_file carries the port it really bound.
  if (options_.http_port >= 0) {
    HttpOptions http_options;
    http_options.host = server_options.listen.substr(0, server_options.listen.rfind(':'));
    if (http_options.host == "[::]" || http_options.host.empty()) http_options.host = "0.0.0.0";
    http_options.port = options_.http_port;
    ASSIGN_OR_RETURN(http_, HttpEndpoint::Start(http_options, &server_->authenticator(),
                                                &server_->status_cache(), &server_->history(),
                                                &server_->metrics()));
    server_->SetHttpPort(http_->port());
  }
  contents_.http_port = http_ ? http_->port() : 0;
  contents_.grpc_address = server_->address();
  absl::Status published = PublishDistFile(dist_file_, contents_);
  if (!published.ok()) {
    return absl::Status(published.code(),
                        absl::StrCat("cannot publish dist_file: ", published.message()));
  }
  if (options_.claim_epoch) {
    const absl::Time now = absl::Now();
    lease_->ServeFrom(now + lease_->period());
    const std::string took =
        absl::StrCat("coordinator epoch ", contents_.epoch, " on ", HostName(), " (node ",
                     options_.node_rank, ") took over",
                     options_.last_answer == absl::InfinitePast()
                         ? std::string()
                         : absl::StrFormat(" %.1f s after the last answer",
                                           absl::ToDoubleSeconds(now - options_.last_answer)));
    job_->Event(took);
    Log(absl::StrCat(took, "; accepting calls from unix time ",
                     absl::StrFormat("%.3f", absl::ToDoubleSeconds(now + lease_->period() -
                                                                   absl::UnixEpoch()))));
  }
  if (options_.resume_from_journal) {
    Log(absl::StrCat("job ", identity.job_id, " generation ", identity.generation,
                     ": restarted from journal ", journal_->path(), " as incarnation ",
                     contents_.incarnation, " (", restored.records, " records",
                     restored.torn_bytes > 0 ? absl::StrCat(", a torn last record of ",
                                                            restored.torn_bytes, " bytes dropped")
                                             : std::string(),
                     ") on ", server_->address(), "; dist_file ", dist_file_));
  } else {
    Log(absl::StrCat("job ", identity.job_id, " generation ", identity.generation, ": waiting for ",
                     options_.world_size, " workers on ", server_->address(), "; dist_file ",
                     dist_file_));
  }
  if (options_.fd_limit) {
    const std::string fds =
        DescribeFdLimit(*options_.fd_limit, CoordinatorFdsWanted(options_.world_size));
    if (!fds.empty()) Log(fds);
  }
  if (options_.heap_reserved_bytes >= (size_t{16} << 20)) {  // a large job: say what it cost
    Log(absl::StrFormat("heap (%s): %d MiB made resident for the rendezvous in %.2f s",
                        AllocatorName(), options_.heap_reserved_bytes >> 20,
                        options_.heap_reserve_seconds));
  }
  if (http_) {
    const std::string host = server_->address().substr(0, server_->address().rfind(':'));
    Log(absl::StrCat("dashboard: http://", host, ":", http_->port(),
                     "/ (view token in the dist_file; `ddpctl dashboard` prints the full URL)"));
  }
  return absl::OkStatus();
}

absl::Status CoordinatorProcess::ResumeJournal(const JobIdentity& identity, JournalState* state) {
  const std::string journal_path = JournalPath(dist_file_);
  absl::StatusOr<DistFileContents> published =
      ReadDistFile(dist_file_, {identity.job_id, identity.generation});
  if (!published.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("cannot resume from journal ", journal_path,
                                                      ": dist_file ", dist_file_, ": ",
                                                      published.status().message()));
  }
  JournalHeader expected;
  expected.job_id = published->job_id;
  expected.generation = published->generation;
  expected.nonce = published->nonce;
  expected.token = published->token;
  expected.view_token = published->view_token;
  expected.control_token = published->control_token;
  expected.world_size = options_.world_size;
  absl::StatusOr<std::unique_ptr<Journal>> journal = Journal::Resume(
      journal_path, expected, [this](const std::string& line) { Log(line); }, state);
  if (!journal.ok()) {
    return absl::Status(journal.status().code(),
                        absl::StrCat("cannot resume: ", journal.status().message(),
                                     "; refusing to take over the job"));
  }
  journal_ = std::move(*journal);
  tls_ = {state->header.tls_key, state->header.tls_cert};
  if (absl::Status st = CheckTlsIdentity(tls_); !st.ok() || tls_.cert_pem != published->tls_cert) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot resume: journal ", journal_path, " does not hold the dist_file's TLS certificate",
        st.ok() ? "" : absl::StrCat(" (", st.message(), ")")));
  }
  if (published->epoch > options_.epoch ||
      (options_.claim_epoch && published->epoch != options_.epoch - 1)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot resume: the dist_file names coordinator epoch ", published->epoch,
                     "; this one would be epoch ", options_.epoch));
  }
  contents_ = *published;
  contents_.incarnation = state->incarnation;
  contents_.epoch = options_.epoch;
  contents_.coordinator_node = options_.epoch > 0 ? options_.node_rank : 0;
  return absl::OkStatus();
}

std::string EpochFilePath(const std::string& dist_file, int64_t epoch) {
  return absl::StrCat(dist_file, ".epoch", epoch);
}

absl::Status CoordinatorProcess::ClaimEpoch(const JobIdentity& identity) {
  const std::string path = EpochFilePath(dist_file_, options_.epoch);
  const std::string job =
      absl::StrCat("job_id=", identity.job_id, "\ngeneration=", identity.generation, "\n");
  const std::string mine = absl::StrCat(job, "host=", HostName(), "\npid=", ::getpid(), "\n");
  for (int attempt = 0;; ++attempt) {
    // O_EXCL creation is atomic on local file systems and on NFS (v3 and later): of two
    // standbys that claim one epoch at once, one fails here.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
      // Not synced: the claim is the O_EXCL creation itself; its text only names the claimant.
      absl::Status st = WriteAll(fd, mine, path);
      ::close(fd);
      RETURN_IF_ERROR(st);
      break;
    }
    if (errno != EEXIST) return ErrnoError("cannot claim the coordinator epoch", path);
    absl::StatusOr<std::string> held = ReadPrivateFile(path, "epoch file", 4096);
    if (attempt > 0 || (held.ok() && absl::StartsWith(*held, job))) {
      return absl::AlreadyExistsError(absl::StrCat(
          "coordinator epoch ", options_.epoch, " is already claimed (", path, ": ",
          held.ok() ? EscapeControlCharacters(*held) : std::string(held.status().message()), ")"));
    }
    ::unlink(path.c_str());  // an earlier job's or generation's: not this job's claim
  }
  // The journal moves to a fresh file: a lost coordinator that comes back still holds the old
  // one open, and what it might append there before it finds itself fenced goes nowhere.
  const std::string journal_path = JournalPath(dist_file_);
  ASSIGN_OR_RETURN(std::string journal, ReadPrivateFile(journal_path, "journal", size_t{1} << 30));
  absl::Status moved = WriteFileAtomically(journal_path, journal, 0600);
  if (!moved.ok()) {
    return absl::Status(moved.code(),
                        absl::StrCat("cannot take over the journal: ", moved.message()));
  }
  Log(absl::StrCat("claimed coordinator epoch ", options_.epoch, " (", path, ")"));
  return absl::OkStatus();
}

void CoordinatorProcess::OnFenced(const Supersession& by) {
  const absl::Time last = lease_ ? lease_->last_accepted() : absl::InfinitePast();
  Log(absl::StrCat("fenced: ", by.why, "; this coordinator (epoch ", contents_.epoch,
                   ") stops serving and exits; last call accepted at unix time ",
                   last == absl::InfinitePast()
                       ? std::string("(none)")
                       : absl::StrFormat("%.3f", absl::ToDoubleSeconds(last - absl::UnixEpoch()))));
  std::_Exit(kExitFailed);
}

void CoordinatorProcess::OnSignal(int sig) {
  if (job_->Finished()) {  // lingering: a signal now means "go"
    if (!end_linger_.HasBeenNotified()) end_linger_.Notify();
    return;
  }
  const JobState state = job_->Status().state;
  if (sig == SIGUSR1) {
    if (state != JobState::kRunning) {  // already stopping, or nothing to save
      // Said all the same: a worker that got the step's signal first may have started the stop.
      Log(absl::StrCat("signal SIGUSR1: nothing more to do, the job is ", JobStateName(state)));
      return;
    }
    Log("signal SIGUSR1: checkpoint and stop");
    (void)job_->Stop(/*graceful=*/true, "SIGUSR1");
    return;
  }
  const bool graceful = interrupts_.fetch_add(1) == 0 && state == JobState::kRunning;
  Log(absl::StrCat("signal ", sig, ": ", graceful ? "checkpoint and stop" : "abort"));
  (void)job_->Stop(graceful, absl::StrCat("signal ", sig));
}

int CoordinatorProcess::RunUntilDone() {
  job_->WaitFinished(absl::InfiniteDuration());
  // The journal stays while the coordinator lingers: restarted now (SIGKILLed while lingering),
  // a coordinator restores the ended job (a failure is recorded, a success or a stop is in the
  // ranks' done records), tells the workers still running, lingers and writes the result. It
  // goes once the result is written.
  absl::Duration linger = options_.linger;
  {
    const JobStatus s = job_->Status();
    // Ranks still running when a job fails or stops learn it from their next heartbeat reply:
    // the coordinator stays for that, whatever --linger says. When every rank has reported its
    // end (a graceful stop: each checkpointed and stopped) nobody is left to tell, and a requeue
    // should not wait for it.
    const bool all_reported = std::all_of(s.ranks.begin(), s.ranks.end(),
                                          [](const RankStatus& r) { return IsFinal(r.state); });
    if (s.state != JobState::kSucceeded && !all_reported) {
      linger = std::max(linger, kOutcomeLinger);
    }
    const std::string reason = OutcomeReason(s);
    Log(absl::StrCat("job finished: ", OutcomeName(s.state), reason.empty() ? "" : ": ", reason,
                     "; lingering ", absl::FormatDuration(linger), " (a signal ends it)"));
  }
  end_linger_.WaitForNotificationWithTimeout(linger);
  // Read again: a late report may have named the failure's root cause while we lingered.
  const JobStatus final_status = job_->Status();
  if (http_) http_->Stop();
  server_->Shutdown(absl::Milliseconds(250));
  const int code = job_->ExitCode();
  // Before the dist_file goes: an older epoch that comes back finds one or the other.
  WriteResult(final_status, code);
  // Nothing is left to resume: a coordinator started on this journal now would restore a job
  // whose result is written. (Refused instead: no journal.)
  if (journal_) ::unlink(journal_->path().c_str());
  auto still_ours = ReadDistFile(dist_file_, {job_->config().job_id, job_->config().generation});
  // Every incarnation shares the nonce: the file is removed only while it is this one's.
  if (still_ours.ok() && still_ours->nonce == contents_.nonce &&
      still_ours->incarnation == contents_.incarnation &&
      still_ours->grpc_address == contents_.grpc_address) {
    ::unlink(dist_file_.c_str());
  }
  if (lock_ && !lock_->adopted()) lock_->Release();  // an adopted lock is task 0's to release
  // The epochs claimed in this job: the next job at this path starts from epoch 0.
  for (int64_t e = 1; e <= contents_.epoch; ++e) ::unlink(EpochFilePath(dist_file_, e).c_str());
  if (code != 0) {
    std::cerr << "ddp-coordinator: job " << OutcomeName(final_status.state) << ": "
              << EscapeControlCharacters(OutcomeReason(final_status)) << "\n";
  }
  return code;
}

void CoordinatorProcess::WriteResult(const JobStatus& status, int exit_code) {
  JobResult result;
  result.job_id = EscapeControlCharacters(job_->config().job_id);
  result.generation = job_->config().generation;
  result.state = IsTerminal(status.state) ? JobStateName(status.state) : "FAILED";
  result.exit_code = exit_code;
  result.epoch = contents_.epoch;
  const std::string path = JobResultPath(dist_file_);
  if (absl::Status st = WriteFileAtomically(path, FormatJobResult(result), 0600); !st.ok()) {
    Log(absl::StrCat("cannot write the result file: ", st.message()));
  }
}

CoordinatorProcess::~CoordinatorProcess() {
  signals_.reset();  // join the watcher before anything its callback uses goes away
  if (http_) http_->Stop();
  if (server_) server_->Shutdown(absl::Seconds(1));
}

void CoordinatorProcess::AppendExclusion(const NodeExclusion& e) {
  const std::string path = ExcludeListPath(dist_file_);
  if (!IsValidExcludeNode(e.node)) {
    Log(absl::StrCat("cannot put node \"", EscapeControlCharacters(e.node), "\" on ", path,
                     ": not a Slurm node name"));
    return;
  }
  ExcludeEntry entry;
  entry.node = e.node;
  entry.section = e.section;
  entry.relative_score = e.relative_score;
  entry.time = absl::ToUnixSeconds(absl::Now());
  entry.job = job_->config().job_id;
  const std::string line = FormatExcludeLine(entry) + "\n";
  // Appended, never rewritten: a requeued job's coordinator adds to what earlier ones named.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  const bool ok = fd >= 0 &&
                  ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
                  ::fsync(fd) == 0;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  Log(ok ? absl::StrCat("exclude list ", path, ": added node ", e.node)
         : absl::StrCat("cannot add node ", e.node, " to the exclude list ", path, ": ",
                        std::strerror(err)));
}

}  // namespace ddp
