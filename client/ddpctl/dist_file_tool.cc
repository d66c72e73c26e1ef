// `ddpctl dist-file [--field NAME] [--with-token] [--wait S]`: the fields of a job's dist_file
// for shell scripts, read and verified as workers read it (common/dist_file.h), so no script
// parses the file itself. Without --field: NAME=VALUE lines (shell-quoted where needed, so
// `eval` defines them); with --field: the bare value. The token is printed only when asked for
// (--field token / view_token / control_token, or --with-token). The job's TLS certificate (PEM,
// several lines: public) only with --field tls_cert, e.g. to append it to a token file.
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "client/ddpctl/tool.h"
#include "common/dist_file.h"
#include "common/exit_codes.h"

namespace ddp {
namespace {

struct DistFileFlags {
  std::string field;
  bool with_token = false;
  double wait_s = 0;
};

// The fields in the file's order; the tokens last, and only on request.
std::vector<std::pair<std::string, std::string>> Fields(const DistFileContents& c,
                                                        bool with_token) {
  std::vector<std::pair<std::string, std::string>> fields = {
      {"job_id", c.job_id},
      {"generation", absl::StrCat(c.generation)},
      {"nonce", c.nonce},
      {"grpc_address", c.grpc_address},
      {"http_port", absl::StrCat(c.http_port)},
  };
  if (with_token) {
    fields.emplace_back("token", c.token);
    fields.emplace_back("view_token", c.view_token);
    fields.emplace_back("control_token", c.control_token);
  }
  return fields;
}

// Every field, for --field: the tokens and the certificate (without its last newline) included.
std::vector<std::pair<std::string, std::string>> AllFields(const DistFileContents& c) {
  std::vector<std::pair<std::string, std::string>> fields = Fields(c, /*with_token=*/true);
  std::string cert = c.tls_cert;
  if (!cert.empty() && cert.back() == '\n') cert.pop_back();
  fields.emplace_back("tls_cert", cert);
  return fields;
}

// Single-quotes `value` unless it is made of characters a shell leaves alone.
std::string ShellQuote(const std::string& value) {
  const bool plain = !value.empty() && value.find_first_not_of(
                                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV"
                                           "WXYZ0123456789_-.:/@%+,[]") == std::string::npos;
  if (plain) return value;
  return absl::StrCat("'", absl::StrReplaceAll(value, {{"'", "'\\''"}}), "'");
}

ToolRun Setup(CLI::App* sub) {
  auto flags = std::make_shared<DistFileFlags>();
  sub->add_option(
      "--field", flags->field,
      "Print only this field's value: job_id, generation, nonce, grpc_address, "
      "http_port, token, view_token, control_token, tls_cert (the job's certificate, PEM: "
      "append it to a token file)");
  sub->add_flag("--with-token", flags->with_token, "Also list the tokens (secrets)");
  sub->add_option("--wait", flags->wait_s,
                  "Seconds to wait for the file to appear (default 0: read once)")
      ->check(CLI::NonNegativeNumber);
  sub->footer(
      "Reads the dist_file given by --dist-file (or $DDP_DIST_FILE) and checks it as workers "
      "do: mode 0600, owner, format, --job-id if given. Does not contact the coordinator.\n"
      "Exit codes: 0 printed, 1 error (missing, unreadable or malformed file, unknown field), "
      "2 usage.");
  return [flags](const GlobalOptions& global) {
    if (global.dist_file.empty()) {
      return Fail("no dist_file given: pass --dist-file (or set DDP_DIST_FILE)");
    }
    const DistFileExpectation expect{global.job_id, 0};
    auto contents = flags->wait_s > 0
                        ? WaitForDistFile(global.dist_file, expect, absl::Seconds(flags->wait_s))
                        : ReadDistFile(global.dist_file, expect);
    if (!contents.ok()) return Fail(std::string(contents.status().message()));
    if (!flags->field.empty()) {
      for (const auto& [name, value] : AllFields(*contents)) {
        if (name == flags->field) {
          std::cout << value << "\n";
          return kExitOk;
        }
      }
      std::vector<std::string> names;
      for (const auto& field : AllFields(*contents)) names.push_back(field.first);
      return Fail(absl::StrCat("unknown field '", flags->field,
                               "' (one of: ", absl::StrJoin(names, ", "), ")"));
    }
    for (const auto& [name, value] : Fields(*contents, flags->with_token)) {
      std::cout << name << "=" << ShellQuote(value) << "\n";
    }
    return kExitOk;
  };
}

const ToolRegistrar registrar({"dist-file", "Print the fields of a job's dist_file (for scripts)",
                               &Setup});

}  // namespace
}  // namespace ddp
