// Reading a bearer token from a file (`ddpctl --token-file`), so no token ever has to appear on a
// command line, where every user of the node can read it (ps, /proc/<pid>/cmdline). The file
// holds the token on its first line (surrounding whitespace ignored) and, after it, the job's TLS
// certificate in PEM (what `ddpctl dist-file --field tls_cert` prints), which the client then
// trusts alone (client/rpc_channel.h):
//
//   <token>
//   -----BEGIN CERTIFICATE-----
//   ...
//   -----END CERTIFICATE-----
//
// Like the dist_file it must be a regular file of this user that group and others cannot read or
// write (mode 0600 or stricter), and at most 16 KiB.
//
// Thread safety: a free function without shared state.
#ifndef SLURM_DDP_CLIENT_TOKEN_FILE_H_
#define SLURM_DDP_CLIENT_TOKEN_FILE_H_

#include <string>

#include "absl/status/statusor.h"

namespace ddp {

struct TokenFileContents {
  std::string token;
  std::string tls_cert;  // PEM; empty when the file holds only the token
};

// The token (and certificate) in `path`. NOT_FOUND when missing; PERMISSION_DENIED for a symlink,
// a non-regular file, a foreign owner or a mode open to group/others; INVALID_ARGUMENT when
// empty, too large, not a printable token, or followed by something other than a certificate.
absl::StatusOr<TokenFileContents> ReadTokenFile(const std::string& path);

}  // namespace ddp

#endif  // SLURM_DDP_CLIENT_TOKEN_FILE_H_
