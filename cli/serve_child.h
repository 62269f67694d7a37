// `ebb serve` as a child process on a free loopback port, for the benchmarks
// that measure a server in its own process (`bench stream`, `bench ocr`'s
// switching): started through SpawnSelf, its stdout drained so that it never
// blocks, stopped and waited for when the object goes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ebb/status.h"
#include "port.h"

namespace ebb::cli {

class ServeChild {
 public:
  // Runs `ebb serve --port 0 --device cpu ARGS...` (ARGS: the repository, a
  // policy, a budget, --grpc-port ...) and waits for the line naming its HTTP
  // port. `label` names it in errors.
  static Result<std::unique_ptr<ServeChild>> Start(const std::string& label, const std::vector<std::string>& args);
  // Start, with the server run by `wrapper` (a program, looked up on PATH, and its options; this
  // binary's path and `serve ...` follow them), `env` set in it: `bench instructions` runs it under
  // valgrind. pid() is then the wrapper's process.
  static Result<std::unique_ptr<ServeChild>> StartUnder(const std::string& label, std::vector<std::string> wrapper,
                                                        const std::vector<std::string>& args,
                                                        const std::vector<std::pair<std::string, std::string>>& env);
  ~ServeChild();
  ServeChild(const ServeChild&) = delete;
  ServeChild& operator=(const ServeChild&) = delete;

  const std::string& label() const { return label_; }
  int port() const { return port_; }
  int64_t pid() const { return process_.id(); }

  // One /metrics sample's value, as `name{labels}` (0 when absent, -1 when /metrics did not answer).
  double Metric(const std::string& sample) const;
  // The shared CPU arena's reserved bytes, and a model's releases, from /metrics.
  int64_t Arena() const;
  // The sum of every sample of a metric family (`name` and `name{...}`); -1 when /metrics did not answer.
  double MetricSum(const std::string& family) const;
  double Releases(const std::string& model) const;

 private:
  ServeChild(std::string label, port::Child process) : label_(std::move(label)), process_(std::move(process)) {}
  std::string label_;
  port::Child process_;
  int port_ = 0;
  std::thread drain_;
};

}  // namespace ebb::cli
