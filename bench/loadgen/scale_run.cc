#include "bench/loadgen/scale_run.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/loadgen/host_limits.h"
#include "bench/loadgen/status_probe.h"
#include "common/dist_file.h"
#include "common/status_macros.h"

namespace ddp::bench {
namespace {

// Descriptors a server process needs beside one per connection (listeners, epoll, logs, ...).
constexpr int64_t kFdSlack = 256;
// The kernel counters that show connections queued, dropped or answered with SYN cookies.
constexpr const char* kListenCounters[] = {"ListenOverflows", "ListenDrops", "TCPReqQFullDrop",
                                           "TCPReqQFullDoCookies"};

void Log(const std::string& line) { std::fprintf(stderr, "scalebench: %s\n", line.c_str()); }

double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double load = -1;
  in >> load;
  return load;
}

}  // namespace

ScaleRun::ScaleRun(ScaleOptions options) : options_(std::move(options)) {
  // One agent process per 2,048 connections (at least 2): per rank, one connection per rank; per
  // node, one per 8-rank node, as the TCPStore agents' runs have one per agent.
  const int connections = options_.node_calls ? (options_.ranks + 7) / 8 : options_.ranks;
  procs_ = options_.procs > 0 ? options_.procs : std::max(2, (connections + 2047) / 2048);
  procs_ = std::min(procs_, options_.ranks);
}

ScaleRun::~ScaleRun() {
  agents_.reset();  // agents first: a coordinator killed first would fail their calls
  server_.reset();
}

absl::Status ScaleRun::CheckHost() {
  ASSIGN_OR_RETURN(const FdLimit fds, RaiseFdLimitToHard());
  const uint64_t fd_limit = fds.soft;
  ASSIGN_OR_RETURN(const int64_t ports, EphemeralPortCount());
  const int64_t n = options_.ranks;
  result_.Add("target", options_.target)
      .Add("ranks", n)
      .Add("calls", options_.node_calls ? "node" : "rank")
      .Add("startup_shard", !options_.node_calls           ? "GetShard"
                            : options_.separate_shard_call ? "NodeGetShard"
                                                           : "in NodeRegister")
      .Add("procs", static_cast<int64_t>(procs_))
      .Add("cpus", static_cast<int64_t>(sysconf(_SC_NPROCESSORS_ONLN)))
      .Add("load1_before", LoadAverage())
      .Add("fd_limit", static_cast<int64_t>(fd_limit))
      .Add("ephemeral_ports", ports);
  for (const char* path :
       {"/proc/sys/net/core/somaxconn", "/proc/sys/net/ipv4/tcp_max_syn_backlog"}) {
    auto v = ReadSysctl(path);
    result_.Add(std::string(path).substr(std::string(path).rfind('/') + 1), v.ok() ? *v : -1);
  }
  // The server holds one descriptor per connection: one per rank (and one per node task of 8
  // when it relays their heartbeats), or with node calls one per node task only; every
  // connection takes a local port.
  const bool grpc = options_.target == "grpc";
  const int64_t nodes = (n + 7) / 8;
  const int64_t conns = !grpc                           ? n
                        : options_.node_calls           ? nodes
                        : options_.heartbeats == "node" ? n + nodes
                                                        : n;
  result_.Add("connections", conns);
  // ddp-coordinator's server holds more than a descriptor per connection while a connect storm
  // lasts: a rank whose TLS handshake outlives its connect deadline (20 s) connects again while
  // the server still holds the socket it gave up on. At 16,384 ranks per rank (18,432
  // connections) it went past 19,100 and then ran out at a hard limit of 20,000, and gRPC 1.51
  // stops accepting for good when an accept fails for want of one: ranks then wait out the
  // phase. So the gRPC runs want an eighth more, as CoordinatorFdsWanted (common/fd_limit.h).
  const int64_t fds_wanted =
      (grpc ? static_cast<int64_t>(WithConnectStormMargin(static_cast<uint64_t>(conns))) : conns) +
      kFdSlack;
  if (static_cast<uint64_t>(fds_wanted) > fd_limit) {
    return absl::ResourceExhaustedError(absl::StrCat(
        n, " ranks need ", fds_wanted, " descriptors in the server process (", conns,
        " connections", grpc ? ", an eighth more for a connect storm's handshakes" : "", ", ",
        kFdSlack, " to spare); RLIMIT_NOFILE's hard limit here is ", fd_limit));
  }
  if (conns + 1024 > ports) {
    return absl::ResourceExhaustedError(absl::StrCat(conns, " connections to one address need ",
                                                     conns + 1024,
                                                     " ephemeral ports; the range has ", ports));
  }
  if (options_.target != "grpc") {
    // The TCPStore clients block, so every rank is a thread; threads take ids from pid_max.
    ASSIGN_OR_RETURN(const int64_t pid_max, ReadSysctl("/proc/sys/kernel/pid_max"));
    result_.Add("pid_max", pid_max);
    if (n + 2048 > pid_max) {
      return absl::ResourceExhaustedError(
          absl::StrCat(n, " rank threads leave too few of pid_max ", pid_max, " ids"));
    }
  }
  Log(absl::StrCat(options_.target, ": ", n, " ranks over ", procs_, " agent processes; fd limit ",
                   fd_limit, ", ", ports, " ephemeral ports, load average ", LoadAverage()));
  return absl::OkStatus();
}

absl::Status ScaleRun::StartCoordinator() {
  const std::string dist_file = absl::StrCat(options_.work_dir, "/dist_file");
  const int64_t timeout_s = absl::ToInt64Seconds(options_.phase_timeout);
  AgentProcess::Options o;
  o.argv = {absl::StrCat(options_.bin_dir, "/ddp-coordinator"),
            "--world-size",
            absl::StrCat(options_.ranks),
            "--job-id",
            absl::StrCat("scale-", options_.ranks),
            "--dist-file",
            dist_file,
            "--listen",
            "127.0.0.1:0",
            "--registration-timeout",
            absl::StrCat(timeout_s),
            "--linger",
            "3600"};  // status stays readable after a failure; the driver kills it
  if (options_.plaintext) o.argv.push_back("--bench-plaintext");
  if (options_.lost_rank >= 0) {
    for (const char* a : {"--max-restarts", "1"}) o.argv.push_back(a);
  }
  o.log_path = absl::StrCat(options_.work_dir, "/coordinator.log");
  o.stdout_to_log = true;
  ASSIGN_OR_RETURN(server_, AgentProcess::Start(o));
  auto file = WaitForDistFile(dist_file, {"", 0}, absl::Seconds(30));
  if (!file.ok()) {
    return absl::Status(file.status().code(),
                        absl::StrCat("coordinator (", server_->State(), "; log ", o.log_path,
                                     "): ", file.status().message()));
  }
  address_ = file->grpc_address;
  token_ = file->view_token;  // the status probe reads with the view token
  tls_cert_ = file->tls_cert;
  std::vector<std::string> agent = {absl::StrCat(options_.bin_dir, "/ddp-rankgen"),
                                    "--dist-file",
                                    dist_file,
                                    "--heartbeat",
                                    absl::StrCat(absl::ToDoubleSeconds(options_.heartbeat)),
                                    "--heartbeats",
                                    options_.heartbeats,
                                    "--phase-timeout",
                                    absl::StrCat(timeout_s)};
  if (options_.lost_rank >= 0) {
    agent.push_back("--lost-rank");
    agent.push_back(absl::StrCat(options_.lost_rank));
    if (options_.reform_all_shards) agent.push_back("--reform-all-shards");
  }
  if (options_.node_calls) agent.push_back("--node-calls");
  if (options_.separate_shard_call) agent.push_back("--separate-shard-call");
  return StartAgents(agent);
}

absl::Status ScaleRun::StartTcpStoreServer(const std::vector<std::string>& command) {
  AgentProcess::Options o;
  o.argv = command;
  for (const std::string& a :
       {std::string("--serve"), std::string("--world"), absl::StrCat(options_.ranks)}) {
    o.argv.push_back(a);
  }
  o.log_path = absl::StrCat(options_.work_dir, "/tcpstore-server.log");
  ASSIGN_OR_RETURN(server_, AgentProcess::Start(o));
  ASSIGN_OR_RETURN(const AgentReply reply, server_->ReadReply(absl::Now() + absl::Seconds(60)));
  ASSIGN_OR_RETURN(const int64_t port, reply.Int("port"));
  RETURN_IF_ERROR(server_->ReadReply(absl::Now() + absl::Seconds(10)).status());  // ready
  std::vector<std::string> agent = command;
  for (const std::string& a :
       {std::string("--port"), absl::StrCat(port), std::string("--phase-timeout"),
        absl::StrCat(absl::ToInt64Seconds(options_.phase_timeout))}) {
    agent.push_back(a);
  }
  return StartAgents(agent);
}

absl::Status ScaleRun::StartAgents(const std::vector<std::string>& base_argv) {
  std::vector<std::vector<std::string>> argvs;
  for (int i = 0; i < procs_; ++i) {
    const int64_t first = static_cast<int64_t>(options_.ranks) * i / procs_;
    const int64_t next = static_cast<int64_t>(options_.ranks) * (i + 1) / procs_;
    std::vector<std::string> argv = base_argv;
    for (const std::string& a :
         {std::string("--world"), absl::StrCat(options_.ranks), std::string("--first"),
          absl::StrCat(first), std::string("--count"), absl::StrCat(next - first)}) {
      argv.push_back(a);
    }
    argvs.push_back(std::move(argv));
  }
  // Agents set themselves up (load libraries, create channels) before they say they are ready.
  ASSIGN_OR_RETURN(AgentGroup group,
                   AgentGroup::Start(argvs, absl::StrCat(options_.work_dir, "/agent-"),
                                     absl::Now() + absl::Seconds(120)));
  agents_ = std::make_unique<AgentGroup>(std::move(group));
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, int64_t>> ScaleRun::TcpExtDelta(
    const std::map<std::string, int64_t>& before) {
  ASSIGN_OR_RETURN(auto after, TcpExtCounters());
  std::map<std::string, int64_t> delta;
  for (const char* key : kListenCounters) {
    if (after.count(key) && before.count(key)) delta[key] = after.at(key) - before.at(key);
  }
  return delta;
}

absl::Status ScaleRun::TimedPhase(const std::string& command, const std::string& name) {
  ASSIGN_OR_RETURN(const auto tcp_before, TcpExtCounters());
  ASSIGN_OR_RETURN(const double cpu_before, ProcessCpuSeconds(server_->pid()));
  ASSIGN_OR_RETURN(const double agents_before, agents_->CpuSeconds());
  ASSIGN_OR_RETURN(const HostCpuTimes host_before, HostCpuSeconds());
  // Agents reply once their last rank is done, or with an error after phase_timeout.
  const absl::Time deadline = absl::Now() + options_.phase_timeout + absl::Seconds(30);
  auto phase = agents_->TimedPhase(command, deadline);
  if (!phase.ok()) {
    return absl::Status(phase.status().code(), absl::StrCat(name, " (server ", server_->State(),
                                                            "): ", phase.status().message()));
  }
  ASSIGN_OR_RETURN(const double cpu_after, ProcessCpuSeconds(server_->pid()));
  ASSIGN_OR_RETURN(const double agents_after, agents_->CpuSeconds());
  ASSIGN_OR_RETURN(const HostCpuTimes host_after, HostCpuSeconds());
  ASSIGN_OR_RETURN(const auto tcp_delta, TcpExtDelta(tcp_before));
  // The clients' CPU too: on one machine they share its cores with the server. The host's idle
  // time says whether the phase was CPU-bound; its steal time, whether the host's neighbours
  // took part of the machine meanwhile (a figure from such a run is not comparable).
  if (phase->ranked_seconds >= 0) result_.Add(name + "_ranked_s", phase->ranked_seconds);
  result_.Add(name + "_s", phase->seconds)
      .Add(name + "_rank", phase->latency)
      .Add(name + "_server_cpu_s", cpu_after - cpu_before)
      .Add(name + "_clients_cpu_s", agents_after - agents_before)
      .Add(name + "_host_idle_s", host_after.idle - host_before.idle)
      .Add(name + "_host_steal_s", host_after.steal - host_before.steal);
  std::string counters;
  for (const auto& [k, v] : tcp_delta) {
    result_.Add(name + "_" + k, v);
    absl::StrAppend(&counters, " ", k, "=", v);
  }
  Log(absl::StrCat(name, ": ", options_.ranks, " ranks in ", phase->seconds, " s (slowest rank ",
                   phase->latency.max, " ms); kernel:", counters));
  return absl::OkStatus();
}

absl::Status ScaleRun::HeartbeatWindows() {
  ASSIGN_OR_RETURN(auto probe, StatusProbe::Open(address_, token_, tls_cert_));
  ASSIGN_OR_RETURN(const JobSnapshot start, probe->Once());
  if (start.state != "RUNNING" || start.registered != options_.ranks) {
    return absl::FailedPreconditionError(absl::StrCat("after the rendezvous the job is ",
                                                      start.state, " with ", start.registered,
                                                      " of ", options_.ranks, " registered"));
  }
  const absl::Time deadline_slack = absl::Now() + absl::Seconds(60);
  RETURN_IF_ERROR(agents_->Broadcast(kCmdBeat, deadline_slack).status());
  absl::SleepFor(options_.warmup);

  // Window 1: heartbeats only. The coordinator's CPU per heartbeat rate.
  auto snapshot = [&]() -> absl::StatusOr<std::pair<int64_t, double>> {
    ASSIGN_OR_RETURN(const auto replies,
                     agents_->Broadcast(kCmdCount, absl::Now() + absl::Seconds(30)));
    ASSIGN_OR_RETURN(const int64_t ok, AgentGroup::Sum(replies, "ok_beats"));
    return std::make_pair(ok, static_cast<double>(MonotonicNanos()) / 1e9);
  };
  ASSIGN_OR_RETURN(const auto a0, snapshot());
  ASSIGN_OR_RETURN(const double cpu0, ProcessCpuSeconds(server_->pid()));
  ASSIGN_OR_RETURN(const double agents0, agents_->CpuSeconds());
  absl::SleepFor(options_.window);
  ASSIGN_OR_RETURN(const auto a1, snapshot());
  ASSIGN_OR_RETURN(const double cpu1, ProcessCpuSeconds(server_->pid()));
  ASSIGN_OR_RETURN(const double agents1, agents_->CpuSeconds());
  const double span = a1.second - a0.second;
  const double rate = static_cast<double>(a1.first - a0.first) / span;
  const double cores = (cpu1 - cpu0) / span;
  // Percent of one core per 1,000 heartbeats a second.
  const double pct_per_1k = rate > 0 ? 100.0 * cores / (rate / 1000.0) : -1;
  result_.Add("heartbeats", options_.heartbeats)
      .Add("hb_per_s", rate)
      .Add("coord_cores", cores)
      .Add("coord_pct_core_per_1k_hbps", pct_per_1k)
      .Add("agents_cores", (agents1 - agents0) / span);
  Log(absl::StrCat("heartbeats: ", rate, "/s; coordinator ", cores, " cores = ", pct_per_1k,
                   "% of a core per 1,000 heartbeats/s; agents ", (agents1 - agents0) / span,
                   " cores"));

  // Window 2: status latency while every rank heartbeats.
  const StatusSeries status = probe->Measure(options_.window, options_.status_pause);
  result_.Add("status", status.latency).Add("status_errors", static_cast<int64_t>(status.errors));
  Log(absl::StrCat("GetStatus: p50 ", status.latency.p50, " ms, p99 ", status.latency.p99,
                   " ms, max ", status.latency.max, " ms over ", status.latency.count, " calls, ",
                   status.errors, " errors"));

  ASSIGN_OR_RETURN(const auto stopped,
                   agents_->Broadcast(kCmdStop, absl::Now() + absl::Seconds(60)));
  ASSIGN_OR_RETURN(const int64_t ok, AgentGroup::Sum(stopped, "ok_beats"));
  ASSIGN_OR_RETURN(const int64_t failed, AgentGroup::Sum(stopped, "failed_beats"));
  ASSIGN_OR_RETURN(const int64_t aborted, AgentGroup::Sum(stopped, "aborted"));
  ASSIGN_OR_RETURN(const int64_t late, AgentGroup::Sum(stopped, "late"));
  ASSIGN_OR_RETURN(const Quantiles hb, AgentGroup::WorstOf(stopped, "hb"));
  ASSIGN_OR_RETURN(const JobSnapshot end, probe->Once());
  result_.Add("hb_ok", ok)
      .Add("hb_failed", failed)
      .Add("hb_aborted", aborted)
      .Add("hb_late", late)
      .Add("hb", hb)
      .Add("job_state", end.state)
      .Add("unhealthy_ranks", static_cast<int64_t>(end.unhealthy_ranks))
      .Add("status_bytes", static_cast<int64_t>(end.bytes));
  if (!end.failure.empty()) result_.Add("job_failure", end.failure);
  healthy_ = end.state == "RUNNING" && failed == 0 && aborted == 0 && end.unhealthy_ranks == 0;
  for (const AgentReply& r : stopped) {
    auto e = r.String("first_error");
    if (e.ok() && *e != "-") {
      result_.Add("hb_first_error", *e);
      break;
    }
  }
  Log(absl::StrCat("heartbeats: ", ok, " ok, ", failed, " failed, ", late, " late (worst p99 ",
                   hb.p99, " ms); job ", end.state, ", ", end.unhealthy_ranks,
                   " ranks lost/stalled/failed", end.failure.empty() ? "" : ": ", end.failure));
  return absl::OkStatus();
}

absl::Status ScaleRun::Reformation() {
  if (options_.lost_rank >= options_.ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lost-rank ", options_.lost_rank, " is outside ", options_.ranks, " ranks"));
  }
  ASSIGN_OR_RETURN(auto probe, StatusProbe::Open(address_, token_, tls_cert_));
  // Every rank heartbeats through the re-formation, as a running job's do.
  RETURN_IF_ERROR(agents_->Broadcast(kCmdBeat, absl::Now() + absl::Seconds(60)).status());
  absl::SleepFor(options_.warmup);
  // The simulated calls' contexts and requests are made first, untimed: each real worker or node
  // task makes its own on its own CPU.
  RETURN_IF_ERROR(agents_->Broadcast(kCmdPrepareReform, absl::Now() + absl::Seconds(60)).status());
  RETURN_IF_ERROR(TimedPhase(kCmdReform, "reformation"));
  ASSIGN_OR_RETURN(const JobSnapshot formed, probe->Once());
  // A heartbeat period or two in the new generation, the replacement's included.
  absl::SleepFor(options_.warmup);
  ASSIGN_OR_RETURN(const auto stopped,
                   agents_->Broadcast(kCmdStop, absl::Now() + absl::Seconds(60)));
  ASSIGN_OR_RETURN(const int64_t failed, AgentGroup::Sum(stopped, "failed_beats"));
  ASSIGN_OR_RETURN(const int64_t aborted, AgentGroup::Sum(stopped, "aborted"));
  ASSIGN_OR_RETURN(const JobSnapshot end, probe->Once());
  result_.Add("reformation_shards", options_.reform_all_shards ? "all" : "changed")
      .Add("reformation_lost_rank", static_cast<int64_t>(options_.lost_rank))
      .Add("reformation_generation", formed.membership_generation)
      .Add("reformation_restarts", static_cast<int64_t>(formed.restarts))
      .Add("reformation_hb_failed", failed)
      .Add("reformation_job_state", end.state)
      .Add("reformation_unhealthy_ranks", static_cast<int64_t>(end.unhealthy_ranks));
  Log(absl::StrCat("re-formation: generation ", formed.membership_generation, ", restarts ",
                   formed.restarts, "; job ", end.state, " with ", end.registered, " of ",
                   options_.ranks, " registered, ", end.unhealthy_ranks,
                   " ranks lost/stalled/failed; heartbeats failed ", failed));
  if (formed.membership_generation != 1 || formed.restarts != 1 || end.state != "RUNNING" ||
      end.registered != options_.ranks || end.unhealthy_ranks != 0 || failed != 0 || aborted != 0) {
    healthy_ = false;
    if (!end.failure.empty()) result_.Add("job_failure", end.failure);
    return absl::InternalError(absl::StrCat(
        "after the re-formation: generation ", formed.membership_generation, ", restarts ",
        formed.restarts, ", job ", end.state, ", ", end.registered, " registered, ",
        end.unhealthy_ranks, " unhealthy, ", failed, " heartbeats failed, ", aborted, " aborted"));
  }
  return absl::OkStatus();
}

absl::Status ScaleRun::RunPhases() {
  if (options_.target == "grpc") {
    RETURN_IF_ERROR(StartCoordinator());
  } else if (options_.target == "tcpstore") {
    RETURN_IF_ERROR(StartTcpStoreServer({absl::StrCat(options_.bin_dir, "/ddp-tcpstore-bench")}));
  } else if (options_.target == "tcpstore-py") {
    if (options_.python.empty() || options_.tcpstore_script.empty()) {
      return absl::InvalidArgumentError("tcpstore-py needs --python and --tcpstore-py");
    }
    RETURN_IF_ERROR(StartTcpStoreServer({options_.python, options_.tcpstore_script}));
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown target ", options_.target));
  }
  RETURN_IF_ERROR(TimedPhase(kCmdConnect, "connect"));
  RETURN_IF_ERROR(TimedPhase(kCmdRendezvous, "rendezvous"));
  if (options_.target == "grpc") RETURN_IF_ERROR(HeartbeatWindows());
  if (options_.target == "grpc" && options_.lost_rank >= 0) RETURN_IF_ERROR(Reformation());
  return absl::OkStatus();
}

void ScaleRun::NoteJobState() {
  if (address_.empty()) return;
  auto probe = StatusProbe::Open(address_, token_, tls_cert_);
  if (!probe.ok()) return;
  auto snap = (*probe)->Once();
  if (!snap.ok()) return;
  result_.Add("job_state", snap->state);
  if (!snap->failure.empty()) result_.Add("job_failure", snap->failure);
}

absl::StatusOr<ReplyFields> ScaleRun::Run() {
  RETURN_IF_ERROR(CheckHost());
  healthy_ = true;
  const absl::Status s = RunPhases();
  if (!s.ok()) {
    // What was measured so far still goes out, with the error and (for the coordinator) the
    // job's own account of it.
    healthy_ = false;
    error_ = std::string(s.message());
    result_.Add("error", error_);
    NoteJobState();
  }
  if (server_ != nullptr) {
    auto peak = ProcessPeakRssKib(server_->pid());
    if (peak.ok()) result_.Add("server_peak_rss_mib", *peak / 1024);
  }
  result_.Add("load1_after", LoadAverage());
  return result_;
}

}  // namespace ddp::bench
