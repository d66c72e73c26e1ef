#include "common/dist_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/dist_file_lock.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace ddp {
namespace {

bool IsHex(absl::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> RandomHex(int bytes) {
  ScopedFd fd(::open("/dev/urandom", O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError("open", "/dev/urandom");
  std::string raw(static_cast<size_t>(bytes), '\0');
  size_t got = 0;
  while (got < raw.size()) {
    ssize_t n = ::read(fd.get(), raw.data() + got, raw.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoError("read", "/dev/urandom");
    got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(raw);
}

absl::Status ValidateJobId(absl::string_view job_id) {
  if (job_id.empty() || job_id.size() > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("job id must have 1..256 bytes (it has ", job_id.size(), ")"));
  }
  if (!IsValidUtf8(job_id)) return absl::InvalidArgumentError("job id is not valid UTF-8");
  for (char ch : job_id) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError("job id contains a control character");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DistFileContents> NewDistFileContents(const std::string& job_id, int64_t generation,
                                                     const std::string& grpc_address,
                                                     int http_port) {
  RETURN_IF_ERROR(ValidateJobId(job_id));
  DistFileContents c;
  c.job_id = job_id;
  c.generation = generation;
  c.grpc_address = grpc_address;
  c.http_port = http_port;
  ASSIGN_OR_RETURN(c.nonce, RandomHex(16));
  ASSIGN_OR_RETURN(c.token, RandomHex(32));
  ASSIGN_OR_RETURN(c.view_token, RandomHex(32));
  ASSIGN_OR_RETURN(c.control_token, RandomHex(32));
  if (c.view_token == c.token || c.control_token == c.token || c.control_token == c.view_token) {
    return absl::InternalError("/dev/urandom returned the same token twice");
  }
  return c;
}

std::string SerializeDistFile(const DistFileContents& c) {
  // Empty role tokens are left out: the file then reads as one token for every role.
  const std::string roles = absl::StrCat(
      c.view_token.empty() ? "" : absl::StrCat("\nview_token=", c.view_token),
      c.control_token.empty() ? "" : absl::StrCat("\ncontrol_token=", c.control_token));
  return absl::StrCat(
      kDistFileHeader, "\njob_id=", c.job_id, "\ngeneration=", c.generation, "\nnonce=", c.nonce,
      "\ntoken=", c.token, roles, "\ngrpc_address=", c.grpc_address, "\nhttp_port=", c.http_port,
      c.incarnation == 0 ? "" : absl::StrCat("\nincarnation=", c.incarnation),
      c.epoch == 0 ? ""
                   : absl::StrCat("\nepoch=", c.epoch, "\ncoordinator_node=", c.coordinator_node),
      c.tls_cert.empty() ? "" : absl::StrCat("\ntls_cert=", absl::Base64Escape(c.tls_cert)),
      "\nend=1\n");
}

absl::StatusOr<DistFileContents> ParseDistFile(absl::string_view text) {
  if (text.empty()) return absl::InvalidArgumentError("dist_file is empty");
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  absl::string_view header = lines[0];
  if (header != kDistFileHeader) {
    if (absl::StartsWith(header, "slurm-ddp-dist-file ")) {
      return absl::InvalidArgumentError(
          absl::StrCat("dist_file has unsupported version '", header.substr(20), "' (want v1)"));
    }
    return absl::InvalidArgumentError("not a slurm-ddp dist_file (bad first line)");
  }
  std::map<std::string, std::string, std::less<>> kv;
  bool ended = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    absl::string_view line = lines[i];
    if (line.empty()) continue;
    if (ended) return absl::InvalidArgumentError("dist_file has data after its end line");
    size_t eq = line.find('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("dist_file line ", i + 1, " is not key=value"));
    }
    std::string key(line.substr(0, eq));
    if (!kv.emplace(key, std::string(line.substr(eq + 1))).second) {
      return absl::InvalidArgumentError(absl::StrCat("dist_file repeats key '", key, "'"));
    }
    if (key == "end") ended = true;
  }
  if (!ended || text.back() != '\n') {
    return absl::InvalidArgumentError("dist_file is truncated (no end line)");
  }
  for (const char* key : {"job_id", "generation", "nonce", "token", "grpc_address", "http_port"}) {
    if (kv.find(key) == kv.end() || kv.find(key)->second.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("dist_file lacks key '", key, "'"));
    }
  }
  DistFileContents c;
  c.job_id = kv["job_id"];
  c.nonce = kv["nonce"];
  c.token = kv["token"];
  c.grpc_address = kv["grpc_address"];
  if (!absl::SimpleAtoi(kv["generation"], &c.generation) || c.generation < 0) {
    return absl::InvalidArgumentError("dist_file has a bad generation");
  }
  if (!absl::SimpleAtoi(kv["http_port"], &c.http_port) || c.http_port < 0 || c.http_port > 65535) {
    return absl::InvalidArgumentError("dist_file has a bad http_port");
  }
  if (kv.count("incarnation") > 0 &&
      (!absl::SimpleAtoi(kv["incarnation"], &c.incarnation) || c.incarnation < 0)) {
    return absl::InvalidArgumentError("dist_file has a bad incarnation");
  }
  if (kv.count("epoch") > 0 && (!absl::SimpleAtoi(kv["epoch"], &c.epoch) || c.epoch < 0)) {
    return absl::InvalidArgumentError("dist_file has a bad epoch");
  }
  if (kv.count("coordinator_node") > 0 &&
      (!absl::SimpleAtoi(kv["coordinator_node"], &c.coordinator_node) || c.coordinator_node < 0)) {
    return absl::InvalidArgumentError("dist_file has a bad coordinator_node");
  }
  if (kv.count("tls_cert") > 0 &&
      (!absl::Base64Unescape(kv["tls_cert"], &c.tls_cert) || c.tls_cert.size() > kMaxTlsCertBytes ||
       !absl::StrContains(c.tls_cert, "-----BEGIN CERTIFICATE-----"))) {
    return absl::InvalidArgumentError("dist_file has a malformed tls_cert (want base64 of a PEM)");
  }
  if (c.nonce.size() != 32 || !IsHex(c.nonce)) {
    return absl::InvalidArgumentError("dist_file has a malformed nonce");
  }
  // The role tokens came later: a file without them has one token for every role.
  c.view_token = kv.count("view_token") > 0 ? kv["view_token"] : c.token;
  c.control_token = kv.count("control_token") > 0 ? kv["control_token"] : c.token;
  for (const auto& [name, token] : {std::pair<const char*, const std::string*>{"token", &c.token},
                                    {"view_token", &c.view_token},
                                    {"control_token", &c.control_token}}) {
    if (token->size() != 64 || !IsHex(*token)) {
      return absl::InvalidArgumentError(absl::StrCat("dist_file has a malformed ", name));
    }
  }
  if (absl::Status st = ValidateJobId(c.job_id); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("dist_file: ", st.message()));
  }
  size_t colon = c.grpc_address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(c.grpc_address.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("dist_file has a bad grpc_address '", c.grpc_address, "'"));
  }
  return c;
}

absl::Status PublishDistFile(const std::string& path, const DistFileContents& contents) {
  return WriteFileAtomically(path, SerializeDistFile(contents), 0600);
}

absl::StatusOr<DistFileContents> ReadDistFile(const std::string& path,
                                              const DistFileExpectation& expect) {
  absl::StatusOr<std::string> text =
      ReadPrivateFile(path, "dist_file", static_cast<size_t>(kMaxDistFileBytes));
  if (!text.ok()) return text.status();
  auto parsed = ParseDistFile(*text);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", parsed.status().message()));
  }
  if (!expect.job_id.empty() && parsed->job_id != expect.job_id) {
    return absl::FailedPreconditionError(absl::StrCat("dist_file ", path, " belongs to job ",
                                                      parsed->job_id, ", not to job ",
                                                      expect.job_id, " (foreign job)"));
  }
  if (parsed->generation < expect.min_generation) {
    return absl::FailedPreconditionError(absl::StrCat("dist_file ", path, " is stale: generation ",
                                                      parsed->generation, " < expected ",
                                                      expect.min_generation));
  }
  return parsed;
}

absl::StatusOr<DistFileContents> WaitForDistFile(const std::string& path,
                                                 const DistFileExpectation& expect,
                                                 absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::mt19937_64 rng(std::random_device{}());
  absl::Duration backoff = absl::Milliseconds(10);
  while (true) {
    auto result = ReadDistFile(path, expect);
    if (result.ok() || absl::IsPermissionDenied(result.status())) return result;
    // Another live job holds the path: this job's own file can never appear there.
    if (!expect.job_id.empty()) {
      if (absl::Status held = CheckNoOtherJobHolds(path, expect.job_id); !held.ok()) return held;
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::Status(result.status().code(),
                          absl::StrCat(result.status().message(), ": gave up after ",
                                       absl::FormatDuration(timeout)));
    }
    std::uniform_real_distribution<double> jitter(0.5, 1.5);
    absl::Duration sleep = std::min(backoff * jitter(rng), deadline - now);
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(sleep));
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
  }
}

std::string DefaultDistFilePath(const std::string& job_id) { return "dist_file." + job_id; }

std::string LocalJobId() { return absl::StrCat("local-", ::getpid()); }

}  // namespace ddp
