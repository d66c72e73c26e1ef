// The job's TLS identity (coordinator/rpc/tls_identity.h): each call makes a key and certificate
// of their own that belong together, and CheckTlsIdentity refuses what does not parse or does
// not match. In the ASan builds this is the one test that runs without the LeakSanitizer
// suppression of OpenSSL's per-thread state (tests/build/lsan_suppressions.txt), so that a leak in
// our own OpenSSL calls is reported: the test checks that it does run so.
#include "coordinator/rpc/tls_identity.h"

#include <cstdlib>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

TEST(TlsIdentityTest, EachIdentityIsFreshAndItsKeyBelongsToItsCertificate) {
  std::set<std::string> certs;
  std::set<std::string> keys;
  for (int i = 0; i < 8; ++i) {
    absl::StatusOr<TlsIdentity> id = NewTlsIdentity();
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_TRUE(absl::StartsWith(id->cert_pem, "-----BEGIN CERTIFICATE-----")) << id->cert_pem;
    EXPECT_TRUE(absl::StartsWith(id->key_pem, "-----BEGIN PRIVATE KEY-----"));
    EXPECT_TRUE(CheckTlsIdentity(*id).ok()) << CheckTlsIdentity(*id);
    certs.insert(id->cert_pem);
    keys.insert(id->key_pem);
  }
  EXPECT_EQ(certs.size(), 8u);
  EXPECT_EQ(keys.size(), 8u);
}

TEST(TlsIdentityTest, RefusesWhatDoesNotParseOrMatch) {
  const TlsIdentity a = *NewTlsIdentity();
  const TlsIdentity b = *NewTlsIdentity();
  struct Case {
    const char* name;
    TlsIdentity identity;
    const char* want;
  };
  std::string torn = a.cert_pem;
  torn.resize(torn.size() / 2);
  const Case cases[] = {
      {"another key", {b.key_pem, a.cert_pem}, "does not belong"},
      {"empty certificate", {a.key_pem, ""}, "certificate does not parse"},
      {"torn certificate", {a.key_pem, torn}, "certificate does not parse"},
      {"key in the certificate's place", {a.key_pem, a.key_pem}, "certificate does not parse"},
      {"empty key", {"", a.cert_pem}, "private key does not parse"},
      {"certificate in the key's place", {a.cert_pem, a.cert_pem}, "private key does not parse"},
  };
  for (const Case& c : cases) {
    const absl::Status st = CheckTlsIdentity(c.identity);
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << c.name << ": " << st;
    EXPECT_TRUE(absl::StrContains(st.message(), c.want)) << c.name << ": " << st;
  }
}

// In an ASan build LSAN_OPTIONS names the suppression file for every other test; this one must
// run without it (elsewhere LeakSanitizer does not run and the variable is unset).
TEST(TlsIdentityTest, RunsWithoutTheOpenSslLeakSuppression) {
  const char* lsan = std::getenv("LSAN_OPTIONS");
  EXPECT_FALSE(lsan != nullptr && absl::StrContains(lsan, "suppressions"))
      << "LSAN_OPTIONS=" << lsan;
}

}  // namespace
}  // namespace ddp
