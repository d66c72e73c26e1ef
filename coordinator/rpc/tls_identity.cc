#include "coordinator/rpc/tls_identity.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/dist_file.h"
#include "coordinator/rpc/openssl_ptr.h"

namespace ddp {
namespace {

using openssl::BioPtr;
using openssl::BnPtr;
using openssl::ExtPtr;
using openssl::PKeyPtr;
using openssl::X509Ptr;

constexpr long kNotBeforeSeconds = -3600;                 // clocks of other nodes may lag
constexpr long kLifetimeSeconds = 10L * 365 * 24 * 3600;  // longer than any job

// "what: <OpenSSL's first queued error>", the queue cleared.
absl::Status SslError(absl::string_view what) {
  const unsigned long code = ERR_get_error();
  char text[256] = "unknown error";
  if (code != 0) ERR_error_string_n(code, text, sizeof(text));
  ERR_clear_error();
  return absl::InternalError(absl::StrCat("TLS identity: ", what, ": ", text));
}

absl::Status AddExtension(X509* cert, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  ExtPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  if (ext == nullptr || X509_add_ext(cert, ext.get(), -1) != 1) {
    return SslError(absl::StrCat("extension ", value));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> BioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  if (n <= 0 || data == nullptr) return SslError("empty PEM");
  return std::string(data, static_cast<size_t>(n));
}

}  // namespace

absl::StatusOr<TlsIdentity> NewTlsIdentity() {
  PKeyPtr key(EVP_EC_gen("P-256"));
  if (key == nullptr) return SslError("key generation");
  X509Ptr cert(X509_new());
  if (cert == nullptr || X509_set_version(cert.get(), 2) != 1) return SslError("certificate");
  // A random 127-bit serial (positive).
  BnPtr serial(BN_new());
  if (serial == nullptr || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return SslError("serial");
  }
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), kNotBeforeSeconds) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), kLifetimeSeconds) == nullptr) {
    return SslError("validity");
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(kTlsServerName), -1, -1,
                                 0) != 1 ||
      X509_set_issuer_name(cert.get(), name) != 1 || X509_set_pubkey(cert.get(), key.get()) != 1) {
    return SslError("subject");
  }
  // Its own issuer: a CA that signs only itself, for the one name clients check.
  const std::string san = absl::StrCat("DNS:", kTlsServerName);
  for (const auto& [nid, value] :
       {std::pair<int, const char*>{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
        {NID_key_usage, "critical,digitalSignature,keyCertSign"},
        {NID_ext_key_usage, "serverAuth"},
        {NID_subject_key_identifier, "hash"},
        {NID_subject_alt_name, san.c_str()}}) {
    if (absl::Status st = AddExtension(cert.get(), nid, value); !st.ok()) return st;
  }
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) return SslError("signing");

  TlsIdentity identity;
  BioPtr key_bio(BIO_new(BIO_s_mem()));
  if (key_bio == nullptr || PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0,
                                                     nullptr, nullptr) != 1) {
    return SslError("key PEM");
  }
  absl::StatusOr<std::string> key_pem = BioText(key_bio.get());
  if (!key_pem.ok()) return key_pem.status();
  identity.key_pem = *std::move(key_pem);
  BioPtr cert_bio(BIO_new(BIO_s_mem()));
  if (cert_bio == nullptr || PEM_write_bio_X509(cert_bio.get(), cert.get()) != 1) {
    return SslError("certificate PEM");
  }
  absl::StatusOr<std::string> cert_pem = BioText(cert_bio.get());
  if (!cert_pem.ok()) return cert_pem.status();
  identity.cert_pem = *std::move(cert_pem);
  return identity;
}

absl::Status CheckTlsIdentity(const TlsIdentity& identity) {
  BioPtr cert_bio(
      BIO_new_mem_buf(identity.cert_pem.data(), static_cast<int>(identity.cert_pem.size())));
  X509Ptr cert(cert_bio ? PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (cert == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError("TLS certificate does not parse");
  }
  BioPtr key_bio(
      BIO_new_mem_buf(identity.key_pem.data(), static_cast<int>(identity.key_pem.size())));
  PKeyPtr key(key_bio ? PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr)
                      : nullptr);
  if (key == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError("TLS private key does not parse");
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("TLS private key does not belong to the certificate");
  }
  return absl::OkStatus();
}

}  // namespace ddp
