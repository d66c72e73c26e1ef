// Owning pointers for the libcrypto objects the coordinator's TLS identity builds and reads
// (tls_identity.cc), also used by the handshake benchmark (bench/loadgen/tls_handshake_main.cc):
// each frees its object with OpenSSL's own function.
//
// Thread safety: types only.
#ifndef SLURM_DDP_COORDINATOR_RPC_OPENSSL_PTR_H_
#define SLURM_DDP_COORDINATOR_RPC_OPENSSL_PTR_H_

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

namespace ddp::openssl {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
template <typename T, void (*Free)(T*)>
using Ptr = std::unique_ptr<T, Deleter<T, Free>>;

using PKeyPtr = Ptr<EVP_PKEY, EVP_PKEY_free>;
using X509Ptr = Ptr<X509, X509_free>;
using BioPtr = Ptr<BIO, BIO_free_all>;
using BnPtr = Ptr<BIGNUM, BN_free>;
using ExtPtr = Ptr<X509_EXTENSION, X509_EXTENSION_free>;

}  // namespace ddp::openssl

#endif  // SLURM_DDP_COORDINATOR_RPC_OPENSSL_PTR_H_
