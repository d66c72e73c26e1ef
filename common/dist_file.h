// The dist_file: how workers and operators find a job's coordinator. A small, versioned,
// human-readable file (mode 0600) that the coordinator publishes atomically and readers verify:
//
//   slurm-ddp-dist-file v1
//   job_id=<id>
//   generation=<Slurm restart count>
//   nonce=<32 hex digits, fresh per coordinator start>
//   token=<64 hex digits: the worker token, for the job's own RPCs>
//   view_token=<64 hex digits: status, watch, dashboard, /metrics>
//   control_token=<64 hex digits: stop and abort, and everything the view token allows>
//   grpc_address=<host:port>
//   http_port=<port, 0 = none>
//   incarnation=<N: 0 for the job's first coordinator, +1 per restart from its journal>
//   epoch=<E: 0 for task 0's coordinator, +1 per takeover by a standby on another node>
//   coordinator_node=<the node whose task runs the coordinator of that epoch>
//   tls_cert=<base64 of the coordinator's self-signed certificate, PEM>
//   end=1
//
// Tokens by role (coordinator/rpc/auth.h). The two role tokens were added to v1 compatibly:
// readers ignore keys they do not know, and a file without them (an older coordinator's, which
// had one token for everything) reads as if both equalled `token`. The job id is 1..256 bytes of
// valid UTF-8 without control characters. `incarnation` was added the same way: a file without it
// reads as incarnation 0, and it is written only when non-zero, so a reader that predates it
// parses every file a first coordinator publishes, and ignores the key in a restarted one's.
// A restarted coordinator (ddp-coordinator --resume-from-journal) republishes the same job,
// generation, nonce and tokens with a new address and a higher incarnation: clients that lose
// their coordinator re-read the file and move to a newer incarnation (client/rpc_channel.h).
// `epoch` and `coordinator_node` (added the same way, written only when the epoch is non-zero: a
// file without them is epoch 0 on node 0) say which coordinator owns the job after a standby took
// it over (trainer/launcher/standby.h): clients follow the newest (epoch, incarnation) and never
// obey an older epoch (client/rpc_channel.h); a coordinator that finds a newer epoch here stops
// serving (coordinator/epoch_lease.h).
// `tls_cert` (added the same way: older readers ignore it) is the public certificate of the job's
// coordinator; every client's TLS channel trusts it and nothing else, with kTlsServerName as the
// name it checks (the key stays with the coordinator and its journal). A restarted coordinator
// keeps it. A file without it parses (tls_cert empty), but clients refuse to connect with it.
//
// Publishing writes a temp file in the same folder (O_EXCL, 0600), fsyncs it, renames it over the
// target and fsyncs the folder, so a reader sees the old file, no file, or the whole new file.
// Readers poll (no inotify: it does not work on NFS) with a deadline and jittered backoff, and
// return only a fully parsed file of the expected job and generation. The caller then confirms
// the nonce with the coordinator (client/), which proves the file is not a stale leftover.
//
// Thread safety: free functions without shared state; safe from any thread.
#ifndef SLURM_DDP_COMMON_DIST_FILE_H_
#define SLURM_DDP_COMMON_DIST_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ddp {

inline constexpr char kDistFileHeader[] = "slurm-ddp-dist-file v1";
inline constexpr int64_t kMaxDistFileBytes = 64 * 1024;
// The only name in the coordinator's certificate; clients check it (the address is not a name).
inline constexpr char kTlsServerName[] = "slurm-ddp-coordinator";
inline constexpr size_t kMaxTlsCertBytes = 16 * 1024;

struct DistFileContents {
  std::string job_id;
  int64_t generation = 0;
  std::string nonce;
  std::string token;          // the worker token (register, store, shards, heartbeats, ...)
  std::string view_token;     // status, watch, dashboard, /api/*, /metrics
  std::string control_token;  // stop and abort (and everything view_token allows)
  std::string grpc_address;   // host:port
  int http_port = 0;
  int64_t incarnation = 0;   // restarts of the job's coordinator from its journal
  int64_t epoch = 0;         // takeovers by a standby coordinator (fencing: newest wins)
  int coordinator_node = 0;  // the node running this epoch's coordinator
  std::string tls_cert;      // the coordinator's certificate (PEM); empty in an older file
};

// What a reader insists on. An empty job_id accepts any job (operator tools given a path).
struct DistFileExpectation {
  std::string job_id;
  int64_t min_generation = 0;  // files of an older generation are stale
};

// `bytes` random bytes from /dev/urandom as lowercase hex.
absl::StatusOr<std::string> RandomHex(int bytes);

// Fresh contents for a coordinator start: a random nonce (16 bytes) and three distinct random
// tokens (32 bytes each). INVALID_ARGUMENT for a job id the file cannot carry.
absl::StatusOr<DistFileContents> NewDistFileContents(const std::string& job_id, int64_t generation,
                                                     const std::string& grpc_address,
                                                     int http_port);

std::string SerializeDistFile(const DistFileContents& contents);
// Parses the text of a dist_file; errors name what is wrong (version, missing key, garbage).
absl::StatusOr<DistFileContents> ParseDistFile(absl::string_view text);

// Atomically publishes `contents` at `path` (temp + fsync + rename + fsync dir), mode 0600.
absl::Status PublishDistFile(const std::string& path, const DistFileContents& contents);

// One verified read. NOT_FOUND when missing; PERMISSION_DENIED for a symlink, non-regular file,
// foreign owner or group/other-readable mode; FAILED_PRECONDITION for a foreign job or a stale
// generation; INVALID_ARGUMENT for an empty, truncated, oversized or garbage file.
absl::StatusOr<DistFileContents> ReadDistFile(const std::string& path,
                                              const DistFileExpectation& expect);

// Polls ReadDistFile until it succeeds or `timeout` passes. Permission problems fail at once (a
// new publish cannot fix them), and so does a path whose lock another live job holds
// (ALREADY_EXISTS, common/dist_file_lock.h); anything else is retried with jittered backoff, and
// the last error is returned at the deadline ("...: gave up after 30s").
absl::StatusOr<DistFileContents> WaitForDistFile(const std::string& path,
                                                 const DistFileExpectation& expect,
                                                 absl::Duration timeout);

// OK when `job_id` can be published: 1..256 bytes of valid UTF-8, no control characters.
absl::Status ValidateJobId(absl::string_view job_id);

// "dist_file.<job_id>" (relative: in the current folder).
std::string DefaultDistFilePath(const std::string& job_id);
// Job id used without Slurm: "local-<pid>".
std::string LocalJobId();

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_DIST_FILE_H_
