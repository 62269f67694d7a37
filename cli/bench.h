// The `ebb bench ...` commands. Each prints one JSON document on stdout and
// returns the process exit code.
#pragma once

#include <string>

#include "common.h"

namespace ebb::cli {

struct BenchOptions {
  CommonOptions common;
  std::string model;              // as ResolveModel takes it; "" = the benchmark's default
  int64_t size = 0;               // input side in pixels; 0 = the benchmark's default
  int iterations = 0;             // 0 = the benchmark's default (quick)
  bool json = true;               // --json (JSON is the only output)
};

// `options` with `fallback` as its model when none was given.
inline BenchOptions WithModel(BenchOptions options, const char* fallback) {
  if (options.model.empty()) options.model = fallback;
  return options;
}

int BenchOverhead(const BenchOptions& options);
int BenchFloor(const BenchOptions& options);
int BenchRelease(const BenchOptions& options);
int BenchHttp(const BenchOptions& options);
int BenchGrpc(const BenchOptions& options);
int BenchSwitch(const BenchOptions& options);
int BenchSessions(const BenchOptions& options);

}  // namespace ebb::cli
