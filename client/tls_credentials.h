// Internal to client/ (and the load generators in bench/): the credentials of every channel to a
// job's coordinator. TLS that trusts the job's own certificate and nothing else (the dist_file's
// or token file's `tls_cert`), checked under the one name it carries (kTlsServerName,
// common/dist_file.h), whatever host or address the channel dials. Includes gRPC.
//
// Thread safety: a free function without shared state.
#ifndef SLURM_DDP_CLIENT_TLS_CREDENTIALS_H_
#define SLURM_DDP_CLIENT_TLS_CREDENTIALS_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/dist_file.h"

namespace ddp {

// Sets the name to check on `args` and returns credentials that trust `tls_cert` (PEM) alone.
inline std::shared_ptr<grpc::ChannelCredentials> JobChannelCredentials(
    const std::string& tls_cert, grpc::ChannelArguments* args) {
  args->SetSslTargetNameOverride(kTlsServerName);
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = tls_cert;
  return grpc::SslCredentials(ssl);
}

}  // namespace ddp

#endif  // SLURM_DDP_CLIENT_TLS_CREDENTIALS_H_
