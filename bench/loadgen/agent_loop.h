// The agent side of the line protocol (bench/loadgen/agent_line.h): first writes `ok ready` (the
// agent has set itself up; the driver times nothing before it), then reads one command per line
// from stdin, runs its handler and writes the handler's reply line to stdout, until `quit` or
// EOF (the driver is gone). Runs on the calling thread; handlers run on it one at a time.
#ifndef SLURM_DDP_BENCH_LOADGEN_AGENT_LOOP_H_
#define SLURM_DDP_BENCH_LOADGEN_AGENT_LOOP_H_

#include <functional>
#include <map>
#include <string>

namespace ddp::bench {

// A handler returns the whole reply line: ReplyFields::Format() or FormatError().
using AgentHandler = std::function<std::string()>;

// Returns 0 after `quit` or EOF; an unknown command gets an `error` reply and the loop goes on.
int RunAgentLoop(const std::map<std::string, AgentHandler>& handlers);

}  // namespace ddp::bench

#endif  // SLURM_DDP_BENCH_LOADGEN_AGENT_LOOP_H_
