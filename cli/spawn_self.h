// This binary run again as a child process, for the benchmarks that measure in
// a fresh process: `bench footprint`'s workers, `bench modelmesh`'s server.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "ebb/status.h"

namespace ebb::cli {

struct SelfProcess {
  pid_t pid = -1;
  int stdout_fd = -1;  // the read end of the child's stdout; the caller closes it
};

// Starts /proc/self/exe with `args` (args[0] is its name), its stdout a pipe,
// its stderr and environment this process's, plus `env` set in the child.
Result<SelfProcess> SpawnSelf(std::vector<std::string> args,
                              const std::vector<std::pair<std::string, std::string>>& env = {});

// SpawnSelf, then everything the child printed on stdout once it exited; an
// error when it did not exit with 0.
Result<std::string> RunSelf(std::vector<std::string> args);

}  // namespace ebb::cli
