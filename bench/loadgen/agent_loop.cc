#include "bench/loadgen/agent_loop.h"

#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "bench/loadgen/agent_line.h"

namespace ddp::bench {

int RunAgentLoop(const std::map<std::string, AgentHandler>& handlers) {
  std::fprintf(stdout, "%s\n", ReplyFields().Add("ready", std::string("yes")).Format().c_str());
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
    const std::string command(absl::StripAsciiWhitespace(line));
    if (command.empty()) continue;
    if (command == kCmdQuit) break;
    auto it = handlers.find(command);
    const std::string reply = it == handlers.end()
                                  ? FormatError(absl::StrCat("unknown command '", command, "'"))
                                  : it->second();
    std::fprintf(stdout, "%s\n", reply.c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace ddp::bench
