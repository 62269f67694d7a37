// The `ebb` subcommands other than `bench` (see bench.h).
#pragma once

#include "common.h"

namespace ebb::cli {

struct DemoOptions {
  CommonOptions common;
  int64_t size = 1536;
};
int RunDemo(const DemoOptions& options);


}  // namespace ebb::cli
