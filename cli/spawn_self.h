// This binary run again as a child process, for the benchmarks that measure in
// a fresh process: `bench footprint`'s workers, `bench modelmesh`'s server.
// The process calls are the port layer's (port::Child).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ebb/status.h"
#include "port.h"

namespace ebb::cli {

// Starts this program again with `args` (args[0] is its name), its stdout a
// pipe, its stderr and environment this process's, plus `env` set in the
// child. The child is stopped and waited for when the object goes.
Result<port::Child> SpawnSelf(std::vector<std::string> args,
                              const std::vector<std::pair<std::string, std::string>>& env = {});

// SpawnSelf, then everything the child printed on stdout once it exited; an
// error when it did not exit with 0.
Result<std::string> RunSelf(std::vector<std::string> args);

}  // namespace ebb::cli
