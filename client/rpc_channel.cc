#include "client/rpc_channel.h"

#include <sys/stat.h>

#include <algorithm>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/tls_credentials.h"
#include "client/token_file.h"
#include "common/job_result.h"
#include "common/signal_free_thread.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "proto/convert.h"
#include "proto/transport_args.h"

namespace ddp {
namespace {

constexpr int kMaxMessageBytes = 16 * 1024 * 1024;  // matches coordinator/rpc/validation.h

const std::string& TokenFor(const DistFileContents& c, TokenRole role) {
  switch (role) {
    case TokenRole::kView:
      return c.view_token;
    case TokenRole::kControl:
      return c.control_token;
    case TokenRole::kWorker:
      break;
  }
  return c.token;
}

// Inode, size and modification time of `path` ("" when it cannot be stat'ed or there is none):
// changes whenever the file is republished (a rename puts a new inode in its place).
std::string FileIdentity(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return std::string();
  return absl::StrCat(st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
}

}  // namespace

std::string WireText(absl::string_view text, size_t max_bytes) {
  const std::string valid = ToValidUtf8(text);
  if (valid.size() <= max_bytes) return valid;
  return absl::StrCat(TruncateUtf8(valid, max_bytes - 3), "...");
}

absl::StatusOr<std::unique_ptr<RpcChannel>> RpcChannel::Open(const ConnectOptions& options) {
  std::unique_ptr<RpcChannel> ch(new RpcChannel());
  ch->rpc_timeout_ = options.rpc_timeout;
  ch->worker_ = options.role == TokenRole::kWorker;
  if (!options.dist_file.empty()) {
    const DistFileExpectation expect{options.expected_job_id, options.min_generation};
    // A zero timeout reads once (operator tools: a missing file is an error at once).
    ASSIGN_OR_RETURN(ch->endpoint_,
                     options.dist_file_timeout <= absl::ZeroDuration()
                         ? ReadDistFile(options.dist_file, expect)
                         : WaitForDistFile(options.dist_file, expect, options.dist_file_timeout));
    ch->token_ = TokenFor(ch->endpoint_, options.role);
    if (ch->endpoint_.tls_cert.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("dist_file ", options.dist_file,
                       " has no tls_cert (a coordinator without TLS): refusing to send a token"));
    }
  } else if (!options.address.empty()) {
    if (!options.token_file.empty()) {
      ASSIGN_OR_RETURN(TokenFileContents file, ReadTokenFile(options.token_file));
      ch->token_ = std::move(file.token);
      ch->endpoint_.tls_cert = std::move(file.tls_cert);
    } else {
      ch->token_ = options.token;
    }
    if (ch->token_.empty()) {
      return absl::InvalidArgumentError("an address needs a token file (or use a dist_file)");
    }
    if (!options.tls_cert.empty()) ch->endpoint_.tls_cert = options.tls_cert;
    if (ch->endpoint_.tls_cert.empty()) {
      return absl::InvalidArgumentError(
          "an address needs the job's TLS certificate: put it after the token in the token file "
          "(ddpctl dist-file --field tls_cert prints it), or use a dist_file");
    }
    ch->endpoint_.grpc_address = options.address;
    ch->endpoint_.job_id = options.expected_job_id;
  } else {
    return absl::InvalidArgumentError("no coordinator given: pass a dist_file or an address");
  }
  ch->dist_file_ = options.dist_file;
  ch->expect_ = {options.expected_job_id, options.min_generation};
  {
    absl::MutexLock lock(&ch->mu_);
    ch->incarnation_ = ch->endpoint_.incarnation;
    ch->epoch_ = ch->endpoint_.epoch;
    ch->newest_epoch_ = ch->endpoint_.epoch;
    ch->Connect(ch->endpoint_.grpc_address);
  }
  if (!ch->dist_file_.empty()) ch->StartWatcher();
  // Hello proves the coordinator is there, the token is right and (with a dist_file's nonce)
  // that the file is not a stale leftover; it also tells an address-only client the job.
  slurm_ddp::v1::HelloRequest req;
  req.set_nonce(ch->endpoint_.nonce);
  slurm_ddp::v1::HelloReply reply;
  RETURN_IF_ERROR(ch->Call("Hello", options.rpc_timeout, [&](grpc::ClientContext* ctx) {
    return ch->stub().Hello(ctx, req, &reply);
  }));
  if (!ch->endpoint_.job_id.empty() && reply.job_id() != ch->endpoint_.job_id) {
    return absl::FailedPreconditionError(absl::StrCat("coordinator at ", ch->endpoint_.grpc_address,
                                                      " serves job ", reply.job_id(), ", not ",
                                                      ch->endpoint_.job_id));
  }
  ch->endpoint_.job_id = reply.job_id();
  ch->endpoint_.generation = reply.generation();
  if (reply.http_port() > 0) ch->endpoint_.http_port = reply.http_port();
  if (!reply.view_token().empty()) ch->endpoint_.view_token = reply.view_token();
  ch->world_size_ = reply.world_size();
  return ch;
}

RpcChannel::~RpcChannel() {
  if (!watcher_.joinable()) return;
  {
    absl::MutexLock lock(&calls_mu_);
    stop_watching_ = true;
  }
  watcher_.join();
}

void RpcChannel::StartWatcher() {
  watcher_ = SignalFreeThread([this] { WatchLoop(); });
}

bool RpcChannel::AwaitWaitingCall() {
  absl::MutexLock lock(&calls_mu_);
  auto busy = [this]() ABSL_SHARED_LOCKS_REQUIRED(calls_mu_) {
    return stop_watching_ || !in_flight_.empty();
  };
  auto stopping = [this]() ABSL_SHARED_LOCKS_REQUIRED(calls_mu_) { return stop_watching_; };
  for (;;) {
    // Asleep while no call is in flight: a channel between calls costs no wake-up.
    calls_mu_.Await(absl::Condition(&busy));
    if (stop_watching_) return false;
    calls_mu_.AwaitWithTimeout(absl::Condition(&stopping), kFollowCheck);
    if (stop_watching_) return false;
    // Only a call that has waited a whole period makes the file worth a stat: a coordinator
    // that answers (every heartbeat, in milliseconds) costs nothing more.
    const absl::Time waited_since = absl::Now() - kFollowCheck;
    if (std::any_of(in_flight_.begin(), in_flight_.end(),
                    [&](const InFlight* c) { return c->since <= waited_since; })) {
      return true;
    }
  }
}

void RpcChannel::WatchLoop() {
  std::string seen = FileIdentity(dist_file_);
  while (AwaitWaitingCall()) {
    const std::string identity = FileIdentity(dist_file_);
    if (identity == seen) continue;
    seen = identity;
    if (!FollowRestart()) continue;
    size_t current = 0;
    {
      absl::MutexLock lock(&mu_);
      current = stubs_.size() - 1;
    }
    absl::MutexLock lock(&calls_mu_);
    for (InFlight* c : in_flight_) {
      if (c->stub_index >= current) continue;  // already on the new coordinator
      c->followed = true;
      c->ctx->TryCancel();
    }
  }
}

void RpcChannel::Track(InFlight* call) const {
  {
    absl::MutexLock lock(&mu_);
    call->stub_index = stubs_.size() - 1;
  }
  absl::MutexLock lock(&calls_mu_);
  in_flight_.insert(call);
}

bool RpcChannel::Untrack(InFlight* call) const {
  absl::MutexLock lock(&calls_mu_);
  in_flight_.erase(call);
  return call->followed;
}

void RpcChannel::Connect(const std::string& address) const {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  if (worker_) {
    SetWorkerChannelArgs(&args);
  } else {
    SetReconnectArgs(&args);  // operator tools: large status replies keep BDP's window growth
  }
  channels_.push_back(
      grpc::CreateCustomChannel(address, JobChannelCredentials(endpoint_.tls_cert, &args), args));
  stubs_.push_back(slurm_ddp::v1::Coordinator::NewStub(channels_.back()));
  address_ = address;
}

slurm_ddp::v1::Coordinator::Stub& RpcChannel::stub() const {
  absl::MutexLock lock(&mu_);
  return *stubs_.back();
}

std::string RpcChannel::address() const {
  absl::MutexLock lock(&mu_);
  return address_;
}

int64_t RpcChannel::incarnation() const {
  absl::MutexLock lock(&mu_);
  return incarnation_;
}

bool RpcChannel::FollowRestart() const {
  if (dist_file_.empty()) return false;
  absl::StatusOr<DistFileContents> now = ReadDistFile(dist_file_, expect_);
  // Only a newer incarnation of the very job this channel was opened for: same job, generation
  // and nonce (a restarted coordinator keeps them); anything else is someone else's file.
  if (!now.ok() || now->job_id != endpoint_.job_id || now->generation != endpoint_.generation ||
      now->nonce != endpoint_.nonce || now->tls_cert != endpoint_.tls_cert) {
    return false;
  }
  absl::MutexLock lock(&mu_);
  // Newer: a later epoch (a standby took over), or a later incarnation of the same epoch.
  if (std::make_pair(now->epoch, now->incarnation) <= std::make_pair(epoch_, incarnation_)) {
    return false;
  }
  epoch_ = now->epoch;
  incarnation_ = now->incarnation;
  newest_epoch_ = std::max(newest_epoch_, now->epoch);
  Connect(now->grpc_address);
  return true;
}

std::optional<std::string> RpcChannel::JobEnded() const {
  if (dist_file_.empty()) return std::nullopt;
  // None yet, or an earlier generation's (a requeue): nullopt.
  const std::optional<JobResult> r =
      ReadJobResultOf(dist_file_, endpoint_.job_id, endpoint_.generation);
  if (!r) return std::nullopt;
  return absl::StrCat("the job has ended (", r->state, ")");
}

bool RpcChannel::StaleEpoch(const grpc::ClientContext& ctx) const {
  const auto& md = ctx.GetServerInitialMetadata();
  auto it = md.find(kEpochHeader);
  int64_t epoch = 0;  // a reply without the header comes from an epoch-0 coordinator
  if (it != md.end() &&
      !absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &epoch)) {
    return false;
  }
  absl::MutexLock lock(&mu_);
  if (epoch < newest_epoch_) return true;
  newest_epoch_ = epoch;
  return false;
}

int64_t RpcChannel::epoch() const {
  absl::MutexLock lock(&mu_);
  return epoch_;
}

absl::Status RpcChannel::Call(const char* method, absl::Duration timeout,
                              const std::function<grpc::Status(grpc::ClientContext*)>& call) const {
  const absl::Time deadline = absl::Now() + timeout;
  thread_local std::mt19937_64 rng(std::random_device{}());
  absl::Duration backoff = absl::Milliseconds(50);
  const std::string auth = "Bearer " + token_;
  int tries = 0;
  while (true) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(deadline));
    ctx.AddMetadata("authorization", auth);
    InFlight waiting{&ctx, absl::Now(), 0};
    Track(&waiting);
    grpc::Status s = call(&ctx);
    const bool moved = Untrack(&waiting);
    ++tries;
    if (moved) {
      // The dist_file named a newer coordinator while this call waited for the old one: send it
      // there at once, within what is left of its deadline.
      if (absl::Now() < deadline) {
        backoff = absl::Milliseconds(50);
        continue;
      }
      s = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                       "the coordinator did not answer before a newer one took the job over");
    }
    // A coordinator older than the newest epoch this client has seen is fenced: whatever it
    // answered is not obeyed, and the call goes to the newest one (the dist_file names it). A
    // call that ran out of time with no metadata at all got no answer to judge (our own
    // deadline): it is not taken for an epoch-0 reply.
    const bool answered = s.error_code() != grpc::StatusCode::UNAVAILABLE &&
                          !(s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
                            ctx.GetServerInitialMetadata().empty());
    if (answered && StaleEpoch(ctx)) {
      s = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                       "answered by a coordinator of an older epoch (fenced)");
    }
    if (s.ok()) return absl::OkStatus();
    const absl::Time now = absl::Now();
    // Unreachable: UNAVAILABLE, or our own deadline ran out after tries that found no server
    // (a DEADLINE_EXCEEDED the coordinator answered, e.g. a StoreGet timeout, comes before our
    // deadline: blocking calls get slack beyond their own timeout).
    const bool unreachable =
        s.error_code() == grpc::StatusCode::UNAVAILABLE ||
        (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && now >= deadline && tries > 1);
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE && now < deadline && FollowRestart()) {
      backoff = absl::Milliseconds(50);
      continue;  // the coordinator came back elsewhere: try there at once
    }
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
      // A coordinator that is gone because the job is over wrote the result file as it ended:
      // no retry can be answered, so the caller learns it now, not at its deadline (a task's
      // last relayed heartbeat or fence poll kept its step open for the whole deadline).
      if (std::optional<std::string> ended = JobEnded(); ended) {
        return absl::UnavailableError(
            absl::StrCat(method, ": coordinator at ", address(), " is gone: ", *ended));
      }
    }
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE && now + backoff < deadline) {
      std::uniform_real_distribution<double> jitter(0.5, 1.5);
      // The wait is cut short when the dist_file names a newer coordinator meanwhile (a restart
      // or a takeover publishes while this client backs off): checked every kFollowCheck.
      // Only a stat() each time (from the attribute cache on NFS: no load on the server); the file
      // is read when it changed.
      const absl::Time wake = absl::Now() + backoff * jitter(rng);
      const std::string before = FileIdentity(dist_file_);
      bool followed = false;
      for (absl::Time t = absl::Now(); t < wake && !followed; t = absl::Now()) {
        std::this_thread::sleep_for(absl::ToChronoNanoseconds(std::min(wake - t, kFollowCheck)));
        followed = !before.empty() && FileIdentity(dist_file_) != before && FollowRestart();
      }
      backoff = followed ? absl::Milliseconds(50) : std::min(backoff * 2, kMaxBackoff);
      continue;
    }
    if (unreachable) {
      return absl::UnavailableError(
          absl::StrCat(method, ": coordinator at ", address(), " unreachable after ",
                       absl::FormatDuration(timeout), " (", tries, " tries): ", s.error_message()));
    }
    absl::Status st = FromGrpc(s);
    return absl::Status(st.code(), absl::StrCat(method, ": ", st.message()));
  }
}

}  // namespace ddp
