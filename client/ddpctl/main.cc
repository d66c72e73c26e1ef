// ddpctl: operator CLI for a slurm-ddp job. Global options say how to find the job; the
// subcommands come from the table in tool.h.
#include <grpc/support/log.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "client/ddpctl/tool.h"
#include "common/dist_file.h"
#include "common/exit_codes.h"
#include "common/mutex_mode.h"

namespace ddp {

std::vector<Tool>& Tools() {
  static auto* tools = new std::vector<Tool>();
  return *tools;
}

int Fail(const std::string& message) {
  std::string line = message;
  for (char& c : line) {
    if (c == '\n') c = ' ';
  }
  std::cerr << "ddpctl: " << line << "\n";
  return kExitFailed;
}

absl::StatusOr<std::unique_ptr<OperatorClient>> ConnectOperator(const GlobalOptions& g,
                                                                TokenRole role) {
  ConnectOptions options;
  options.dist_file = g.dist_file;
  options.address = g.address;
  options.token_file = g.token_file;
  options.token = g.token;
  if (!g.tls_cert_file.empty()) {
    // The certificate is public: no mode check, only a size bound.
    std::ifstream in(g.tls_cert_file);
    std::string cert(kMaxTlsCertBytes + 1, '\0');
    in.read(cert.data(), static_cast<std::streamsize>(cert.size()));
    cert.resize(static_cast<size_t>(in.gcount()));
    if (!in.eof() || cert.size() > kMaxTlsCertBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls-cert ", g.tls_cert_file, ": cannot read it (missing, unreadable or over ",
          kMaxTlsCertBytes, " bytes)"));
    }
    options.tls_cert = std::move(cert);
  }
  options.role = role;
  options.expected_job_id = g.job_id;
  options.dist_file_timeout = absl::ZeroDuration();  // read once: a missing file is an error
  options.rpc_timeout = absl::Seconds(g.timeout_s);
  if (options.dist_file.empty() && options.address.empty()) {
    return absl::InvalidArgumentError(
        "no job given: pass --dist-file (or set DDP_DIST_FILE), or --address with --token-file");
  }
  auto client = OperatorClient::Connect(options);
  if (!client.ok() && absl::IsUnavailable(client.status()) && !options.dist_file.empty()) {
    return absl::UnavailableError(absl::StrCat(client.status().message(), " (dist_file ",
                                               options.dist_file,
                                               " may be stale: is the job still running?)"));
  }
  return client;
}

}  // namespace ddp

int main(int argc, char** argv) {
  ddp::UseReleaseMutexMode();
  // Errors are one line of ours, which carries gRPC's reason (e.g. a failed TLS handshake);
  // gRPC's own log lines only with GRPC_VERBOSITY set.
  if (std::getenv("GRPC_VERBOSITY") == nullptr) gpr_set_log_function([](gpr_log_func_args*) {});
  ddp::GlobalOptions global;
  if (const char* env = std::getenv("DDP_DIST_FILE")) global.dist_file = env;
  CLI::App app{"ddpctl: look at and control a slurm-ddp job"};
  app.require_subcommand(1);
  // Job-finding flags work before or after the subcommand: `ddpctl status --dist-file F`.
  app.fallthrough();
  app.footer(absl::StrCat(
      "Finding the job: --dist-file PATH (or $DDP_DIST_FILE), or --address HOST:PORT with "
      "--token-file FILE (a file of mode 0600 holding a view or control token; status, watch and "
      "dashboard need the view token, stop the control token). `ls` needs no job: it lists yours "
      "from Slurm, or from a folder of dist_files (--dir).\nExit codes (common/exit_codes.h): ",
      ddp::kExitOk, " success; ", ddp::kExitFailed,
      " error, one line on stderr (no job, unreachable or stale coordinator, wrong token; for "
      "watch: the job FAILED); ",
      ddp::kExitUsage, " usage; ", ddp::kExitResumable,
      " the job stopped after a checkpoint, resumable (watch); ", ddp::kExitTimedOut,
      " timed out waiting for the job to acknowledge (stop). Scripts read them by name: eval "
      "\"$(ddpctl exit-codes)\".\nEach subcommand has --help."));
  app.add_option("--dist-file", global.dist_file, "The job's dist_file (default: $DDP_DIST_FILE)");
  app.add_option("--address", global.address, "Coordinator host:port (instead of a dist_file)");
  app.add_option("--token-file", global.token_file,
                 "File holding the bearer token (with --address; mode 0600)");
  app.add_option("--token", global.token,
                 "Bearer token (with --address); every user of the node can read it in ps: "
                 "prefer --token-file");
  app.add_option("--tls-cert", global.tls_cert_file,
                 "File holding the job's TLS certificate (PEM; with --address, when the token "
                 "file does not hold it: `ddpctl dist-file --field tls_cert` prints it)");
  app.add_option("--job-id", global.job_id, "Refuse a dist_file that belongs to another job");
  app.add_option("--timeout", global.timeout_s,
                 "Seconds to wait for each call to the coordinator (default 5)")
      ->check(CLI::PositiveNumber);
  std::vector<std::pair<CLI::App*, ddp::ToolRun>> runs;
  for (const ddp::Tool& tool : ddp::Tools()) {
    CLI::App* sub = app.add_subcommand(tool.name, tool.help);
    runs.emplace_back(sub, tool.setup(sub));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    ddp::Fail(absl::StrCat(e.what(), " (see --help)"));
    return ddp::kExitUsage;
  }
  for (auto& [sub, run] : runs) {
    if (sub->parsed()) return run(global);
  }
  return ddp::Fail("no subcommand");
}
