// `ddpctl watch`: follows the job (WatchStatus stream) until it ends. On a terminal the view is
// redrawn in place; into a pipe or file it prints one line per change (and each new event).
// The exit code is the job's outcome.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/ddpctl/status_view.h"
#include "client/ddpctl/tool.h"

namespace ddp {
namespace {

struct WatchFlags {
  double interval_s = 1;
  bool all = false;
};

ToolRun Setup(CLI::App* sub) {
  auto flags = std::make_shared<WatchFlags>();
  sub->add_option("--interval", flags->interval_s, "Seconds between updates (>= 0.1)")
      ->check(CLI::Range(0.1, 3600.0));
  sub->add_flag("--all", flags->all, "List every rank on a terminal (default: 32)");
  sub->footer(absl::StrCat("Exit codes: ", kExitOk, " the job SUCCEEDED, ", kExitResumable,
                           " the job stopped after a checkpoint (resumable, requeue), ",
                           kExitFailed,
                           " the job FAILED or the coordinator could not be reached / went away, ",
                           kExitUsage, " usage."));
  return [flags](const GlobalOptions& global) {
    auto client = ConnectOperator(global, TokenRole::kView);
    if (!client.ok()) return Fail(std::string(client.status().message()));
    const bool tty = ::isatty(STDOUT_FILENO) == 1;
    ViewOptions view;
    view.max_ranks = flags->all ? 0 : 32;
    std::string last_line;
    std::string last_event;
    JobStatus final_status;
    bool finished = false;
    absl::Status st = (*client)->Watch(
        absl::Milliseconds(static_cast<int64_t>(flags->interval_s * 1000)),
        [&](const JobStatus& received) {
          JobStatus s = received;
          DecideStatus(&s);  // GetStatus's protobuf carries no decided fields
          if (tty) {
            std::cout << "\033[H\033[2J" << FormatStatus(s, view)
                      << (s.finished ? "" : "\n(watching; Ctrl-C to quit)\n") << std::flush;
          } else {
            // New events since the last one printed, then the summary line if it changed.
            auto it = std::find(s.events.begin(), s.events.end(), last_event);
            for (it = it == s.events.end() ? s.events.begin() : it + 1; it != s.events.end();
                 ++it) {
              std::cout << "event " << *it << "\n";
            }
            if (!s.events.empty()) last_event = s.events.back();
            std::string line = FormatLine(s);
            if (line != last_line) {
              std::cout << absl::FormatTime("%H:%M:%S ", absl::Now(), absl::LocalTimeZone()) << line
                        << "\n";
              last_line = line;
            }
            std::cout << std::flush;
          }
          if (s.finished) {
            final_status = std::move(s);
            finished = true;
            return false;
          }
          return true;
        });
    if (!st.ok()) return Fail(std::string(st.message()));
    if (!finished) return Fail("the status stream ended before the job finished");
    const int code = final_status.exit_code >= 0 ? final_status.exit_code : kExitFailed;
    std::cerr << "ddpctl: job " << final_status.job_id << " "
              << (code == kExitResumable ? "STOPPED (resumable)" : JobStateName(final_status.state))
              << (final_status.state == JobState::kFailed
                      ? absl::StrCat(": ", final_status.failure.text)
                      : std::string())
              << " (exit " << code << ")\n";
    return code;
  };
}

const ToolRegistrar registrar({"watch",
                               "Follow the job until it ends; the exit code is its outcome",
                               &Setup});

}  // namespace
}  // namespace ddp
