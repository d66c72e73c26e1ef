// Runs a shell command for a test and captures what it prints.
//
// Thread safety: reentrant (popen per call).
#ifndef SLURM_DDP_TESTS_TESTING_RUN_SHELL_H_
#define SLURM_DDP_TESTS_TESTING_RUN_SHELL_H_

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace ddp::testing {

// Runs `cmd` with stderr folded into stdout; returns its exit code (-1 if it could not run or
// was killed) and stores the output in `*out`.
inline int RunShell(const std::string& cmd, std::string* out) {
  out->clear();
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  const int rc = ::pclose(p);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace ddp::testing

#endif  // SLURM_DDP_TESTS_TESTING_RUN_SHELL_H_
