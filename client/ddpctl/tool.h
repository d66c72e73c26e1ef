// ddpctl's subcommand table (ninja's `struct Tool` style). A subcommand is one file in
// client/ddpctl/ that defines a Tool and registers it with a static ToolRegistrar; CMake globs
// client/ddpctl/*_tool.cc, so adding a subcommand touches nothing else.
//
// Thread safety: the table is filled during static initialization and read by main only.
#ifndef SLURM_DDP_CLIENT_DDPCTL_TOOL_H_
#define SLURM_DDP_CLIENT_DDPCTL_TOOL_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "client/operator_client.h"

namespace ddp {

// Options every subcommand shares (how to find the job).
struct GlobalOptions {
  std::string dist_file;      // --dist-file, else $DDP_DIST_FILE
  std::string address;        // --address host:port (with --token-file)
  std::string token_file;     // --token-file: the token, never on the command line
  std::string token;          // --token (discouraged: visible to every user of the node)
  std::string tls_cert_file;  // --tls-cert: the job's certificate when the token file lacks it
  std::string job_id;         // --job-id: refuse a dist_file of another job
  double timeout_s = 5;       // --timeout: for finding the file and each call
};

// Returns the process exit code (common/exit_codes.h): kExitOk, kExitFailed (one line on stderr),
// or a subcommand's own (watch: the job's outcome; stop: kExitTimedOut).
using ToolRun = std::function<int(const GlobalOptions&)>;

struct Tool {
  const char* name;
  const char* help;
  // Declares the subcommand's own options on `sub`; returns what runs when it is chosen.
  ToolRun (*setup)(CLI::App* sub);
};

std::vector<Tool>& Tools();

struct ToolRegistrar {
  explicit ToolRegistrar(const Tool& tool) { Tools().push_back(tool); }
};

// Connects to the job named by `options`, with the dist_file's token of `role` (kView to look,
// kControl to stop); errors are one line.
absl::StatusOr<std::unique_ptr<OperatorClient>> ConnectOperator(const GlobalOptions& options,
                                                                TokenRole role);

// Prints "ddpctl: <message>" on stderr and returns kExitFailed.
int Fail(const std::string& message);

}  // namespace ddp

#endif  // SLURM_DDP_CLIENT_DDPCTL_TOOL_H_
