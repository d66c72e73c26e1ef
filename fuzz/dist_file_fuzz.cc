// Fuzzes the dist_file parser (common/dist_file.h). Invariants: a refusal is one INVALID_ARGUMENT
// line; an accepted file has fields that keep their contracts (hex nonce and token of the right
// length, a port in range, host:port) and survives Serialize -> Parse unchanged.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/dist_file.h"
#include "fuzz/fuzz_check.h"

namespace {

bool IsLowerHex(const std::string& s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<ddp::DistFileContents> parsed = ddp::ParseDistFile(text);
  if (!parsed.ok()) {
    const std::string message(parsed.status().message());
    FUZZ_CHECK(absl::IsInvalidArgument(parsed.status()), parsed.status().ToString());
    FUZZ_CHECK(!message.empty() && message.find('\n') == std::string::npos, message);
    return 0;
  }
  const ddp::DistFileContents& c = *parsed;
  FUZZ_CHECK(!c.job_id.empty(), "empty job id accepted");
  FUZZ_CHECK(c.generation >= 0, "negative generation");
  FUZZ_CHECK(c.nonce.size() == 32 && IsLowerHex(c.nonce), c.nonce);
  FUZZ_CHECK(c.token.size() == 64 && IsLowerHex(c.token), c.token);
  FUZZ_CHECK(c.http_port >= 0 && c.http_port <= 65535, std::to_string(c.http_port));
  const size_t colon = c.grpc_address.rfind(':');
  FUZZ_CHECK(colon != std::string::npos && colon > 0, c.grpc_address);

  const std::string again = ddp::SerializeDistFile(c);
  const absl::StatusOr<ddp::DistFileContents> reparsed = ddp::ParseDistFile(again);
  FUZZ_CHECK(reparsed.ok(), reparsed.status().ToString() + " for " + again);
  FUZZ_CHECK(reparsed->job_id == c.job_id && reparsed->generation == c.generation &&
                 reparsed->nonce == c.nonce && reparsed->token == c.token &&
                 reparsed->grpc_address == c.grpc_address && reparsed->http_port == c.http_port,
             again);
  FUZZ_CHECK(ddp::SerializeDistFile(*reparsed) == again, again);
  return 0;
}
