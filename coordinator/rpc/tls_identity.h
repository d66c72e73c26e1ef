// The coordinator's TLS identity: a private key and a self-signed certificate made fresh for each
// job (OpenSSL: an EC P-256 key, a certificate whose only name is kTlsServerName, valid from an
// hour ago for ten years so that neither clock skew nor a long job ever expires it). Clients trust
// this one certificate and nothing else (client/rpc_channel.h): the dist_file and token files
// carry it, the key stays in the coordinator's memory and its journal (both private to the user),
// so a process that binds the port of a dead coordinator cannot complete a handshake with them.
//
// Thread safety: free functions without shared state.
#ifndef SLURM_DDP_COORDINATOR_RPC_TLS_IDENTITY_H_
#define SLURM_DDP_COORDINATOR_RPC_TLS_IDENTITY_H_

#include <string>

#include "absl/status/statusor.h"

namespace ddp {

struct TlsIdentity {
  std::string key_pem;   // PKCS#8 "PRIVATE KEY"
  std::string cert_pem;  // "CERTIFICATE"
};

// A fresh key and certificate. INTERNAL when OpenSSL fails (its first error named).
absl::StatusOr<TlsIdentity> NewTlsIdentity();

// OK when `identity` is a certificate and the private key that belongs to it (a journal's, before
// a restarted coordinator serves it). INVALID_ARGUMENT naming what does not parse or match.
absl::Status CheckTlsIdentity(const TlsIdentity& identity);

}  // namespace ddp

#endif  // SLURM_DDP_COORDINATOR_RPC_TLS_IDENTITY_H_
