// ddp-tlsbench: what one TLS handshake with a job's identity costs OpenSSL alone, per side.
//
// The per-node start-up at 16,384 ranks spends most of its connect in TLS (docs/bench-status.md):
// the simulated node tasks about 1.3 ms of CPU per channel, the coordinator about 0.45 ms per
// connection, against 0.18 and 0.08 ms in plaintext. This program measures the floor under
// those figures: OpenSSL's own work for a handshake with the coordinator's kind of identity
// (coordinator/rpc/tls_identity.h: EC P-256, self-signed), client and server in one thread over
// a memory BIO pair, no sockets and no gRPC, each side's CPU time counted apart. Variants:
//   grpc151        as gRPC 1.51 sets OpenSSL up: the key exchange on P-256 only, OpenSSL's
//                  default session tickets, a new client context per connection with the
//                  trusted certificate parsed into it (gRPC 1.51 builds one per channel)
//   shared_client_context  one client context for every handshake
//   no_tickets     the server sends no session tickets
//   tls12          TLS 1.2 at most
//   x25519         OpenSSL's default key exchange groups (X25519 first)
// One line per variant: `ok variant=... handshakes=N client_context_ms=... client_ms=...
// server_ms=...` (milliseconds of CPU per handshake).
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <ctime>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "common/dist_file.h"
#include "coordinator/rpc/openssl_ptr.h"
#include "coordinator/rpc/tls_identity.h"

namespace {

using ddp::openssl::BioPtr;
using ddp::openssl::PKeyPtr;
using ddp::openssl::X509Ptr;
using CtxPtr = ddp::openssl::Ptr<SSL_CTX, SSL_CTX_free>;
using SslPtr = ddp::openssl::Ptr<SSL, SSL_free>;

// The TLS 1.2 suites both sides offer (ECDHE with AES-GCM); TLS 1.3 uses OpenSSL's own.
constexpr const char* kGrpcCiphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384";

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

struct Variant {
  std::string name;
  bool p256_only = true;
  bool shared_client_context = false;
  bool tickets = true;
  bool tls12 = false;
};

[[noreturn]] void Die(const std::string& what) {
  const unsigned long code = ERR_get_error();
  char text[256] = "";
  if (code != 0) ERR_error_string_n(code, text, sizeof(text));
  std::cerr << "ddp-tlsbench: " << what << (code != 0 ? absl::StrCat(": ", text) : "") << "\n";
  std::exit(1);
}

void SetP256Only(SSL_CTX* ctx) {
  int groups[] = {NID_X9_62_prime256v1};
  if (SSL_CTX_set1_groups(ctx, groups, 1) != 1) Die("set1_groups");
}

CtxPtr ServerContext(const ddp::TlsIdentity& id, const Variant& v) {
  CtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (ctx == nullptr) Die("server context");
  BioPtr cert_bio(BIO_new_mem_buf(id.cert_pem.data(), static_cast<int>(id.cert_pem.size())));
  X509Ptr cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  BioPtr key_bio(BIO_new_mem_buf(id.key_pem.data(), static_cast<int>(id.key_pem.size())));
  PKeyPtr key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr || key == nullptr || SSL_CTX_use_certificate(ctx.get(), cert.get()) != 1 ||
      SSL_CTX_use_PrivateKey(ctx.get(), key.get()) != 1) {
    Die("server identity");
  }
  if (SSL_CTX_set_cipher_list(ctx.get(), kGrpcCiphers) != 1) Die("server ciphers");
  if (v.p256_only) SetP256Only(ctx.get());
  if (!v.tickets) SSL_CTX_set_num_tickets(ctx.get(), 0);
  if (v.tls12) SSL_CTX_set_max_proto_version(ctx.get(), TLS1_2_VERSION);
  return ctx;
}

// A client context that trusts the job's certificate alone, parsed from its PEM as a channel's
// credentials carry it.
CtxPtr ClientContext(const std::string& cert_pem, const Variant& v) {
  CtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (ctx == nullptr) Die("client context");
  if (SSL_CTX_set_cipher_list(ctx.get(), kGrpcCiphers) != 1) Die("client ciphers");
  if (v.p256_only) SetP256Only(ctx.get());
  BioPtr bio(BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())));
  X509Ptr root(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (root == nullptr || X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), root.get()) != 1) {
    Die("trusted certificate");
  }
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  return ctx;
}

struct Costs {
  double client_context = 0, client = 0, server = 0;
};

// One handshake, then one application byte each way, so that the client reads the server's
// session tickets as a real connection's first read does.
void Handshake(SSL_CTX* client_ctx, SSL_CTX* server_ctx, Costs* costs) {
  SslPtr client(SSL_new(client_ctx)), server(SSL_new(server_ctx));
  BIO *a = nullptr, *b = nullptr;
  if (client == nullptr || server == nullptr || BIO_new_bio_pair(&a, 0, &b, 0) != 1) Die("SSL");
  SSL_set_bio(client.get(), a, a);
  SSL_set_bio(server.get(), b, b);
  SSL_set_connect_state(client.get());
  SSL_set_accept_state(server.get());
  SSL_set_tlsext_host_name(client.get(), ddp::kTlsServerName);
  if (SSL_set1_host(client.get(), ddp::kTlsServerName) != 1) Die("host name");
  bool client_done = false, server_done = false;
  for (int round = 0; round < 16 && !(client_done && server_done); ++round) {
    double t0 = ThreadCpuSeconds();
    if (!client_done) client_done = SSL_do_handshake(client.get()) == 1;
    double t1 = ThreadCpuSeconds();
    if (!server_done) server_done = SSL_do_handshake(server.get()) == 1;
    double t2 = ThreadCpuSeconds();
    costs->client += t1 - t0;
    costs->server += t2 - t1;
  }
  if (!client_done || !server_done) Die("handshake did not complete");
  if (SSL_get_verify_result(client.get()) != X509_V_OK) Die("the server's certificate");
  char byte = 'x';
  double t0 = ThreadCpuSeconds();
  if (SSL_write(server.get(), &byte, 1) != 1) Die("server write");
  double t1 = ThreadCpuSeconds();
  if (SSL_read(client.get(), &byte, 1) != 1) Die("client read");
  if (SSL_write(client.get(), &byte, 1) != 1) Die("client write");
  double t2 = ThreadCpuSeconds();
  if (SSL_read(server.get(), &byte, 1) != 1) Die("server read");
  double t3 = ThreadCpuSeconds();
  costs->server += (t1 - t0) + (t3 - t2);
  costs->client += t2 - t1;
  double t4 = ThreadCpuSeconds();
  client.reset();
  costs->client += ThreadCpuSeconds() - t4;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ddp-tlsbench: OpenSSL's CPU per TLS handshake with a job's identity, per side"};
  int handshakes = 2000;
  int warmup = 100;
  app.add_option("--handshakes", handshakes, "Handshakes per variant")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "Untimed handshakes first")->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<ddp::TlsIdentity> id = ddp::NewTlsIdentity();
  if (!id.ok()) Die(std::string(id.status().message()));
  std::vector<Variant> variants(5);
  variants[0].name = "grpc151";
  variants[1].name = "shared_client_context";
  variants[1].shared_client_context = true;
  variants[2].name = "no_tickets";
  variants[2].tickets = false;
  variants[3].name = "tls12";
  variants[3].tls12 = true;
  variants[4].name = "x25519";
  variants[4].p256_only = false;
  for (const Variant& v : variants) {
    CtxPtr server_ctx = ServerContext(*id, v);
    CtxPtr shared = v.shared_client_context ? ClientContext(id->cert_pem, v) : nullptr;
    Costs costs;
    for (int i = 0; i < warmup + handshakes; ++i) {
      if (i == warmup) costs = Costs{};
      double t0 = ThreadCpuSeconds();
      CtxPtr own = shared ? nullptr : ClientContext(id->cert_pem, v);
      costs.client_context += ThreadCpuSeconds() - t0;
      Handshake(shared ? shared.get() : own.get(), server_ctx.get(), &costs);
      double t1 = ThreadCpuSeconds();
      own.reset();
      costs.client_context += ThreadCpuSeconds() - t1;
    }
    const double per = 1e3 / handshakes;
    std::cout << absl::StrCat("ok variant=", v.name, " handshakes=", handshakes,
                              " client_context_ms=", costs.client_context * per,
                              " client_ms=", costs.client * per, " server_ms=", costs.server * per,
                              " client_total_ms=", (costs.client_context + costs.client) * per)
              << "\n";
  }
  return 0;
}
