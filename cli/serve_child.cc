#include "serve_child.h"

#include <httplib.h>

#include <cstdio>
#include <sstream>

#include "spawn_self.h"

namespace ebb::cli {

Result<std::unique_ptr<ServeChild>> ServeChild::Start(const std::string& label, const std::vector<std::string>& args) {
  return StartUnder(label, {}, args, {});
}

Result<std::unique_ptr<ServeChild>> ServeChild::StartUnder(const std::string& label, std::vector<std::string> wrapper,
                                                           const std::vector<std::string>& args,
                                                           const std::vector<std::pair<std::string, std::string>>& env) {
  std::vector<std::string> command = {wrapper.empty() ? "ebb" : port::ExecutablePath(), "serve", "--port", "0",
                                      "--device", "cpu"};
  command.insert(command.end(), args.begin(), args.end());
  if (!wrapper.empty()) command.insert(command.begin(), wrapper.begin(), wrapper.end());
  auto spawned = wrapper.empty() ? SpawnSelf(std::move(command), env) : port::Child::Spawn(command[0], command, env);
  if (!spawned.ok()) return spawned.status();
  std::unique_ptr<ServeChild> child(new ServeChild(label, std::move(spawned).value()));
  std::string line;
  while (child->process_.ReadStdoutLine(&line)) {
    if (std::sscanf(line.c_str(), "ebb serve: http://127.0.0.1:%d", &child->port_) == 1) break;
  }
  if (child->port_ == 0) return Internal("ebb serve (" + label + ") did not start");
  // Drain its stdout so that it never blocks on a full pipe (the only reader from now on).
  child->drain_ = std::thread([process = &child->process_] {
    std::string rest;
    while (process->ReadStdoutLine(&rest)) {
    }
  });
  return child;
}

ServeChild::~ServeChild() {
  process_.Stop();  // its stdout ends: the drain returns
  if (drain_.joinable()) drain_.join();
  process_.Wait();
}

double ServeChild::Metric(const std::string& sample) const {
  httplib::Client client("127.0.0.1", port_);
  auto res = client.Get("/metrics");
  if (!res || res->status != 200) return -1;
  std::istringstream lines(res->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(sample + " ", 0) == 0) return std::stod(line.substr(sample.size() + 1));
  }
  return 0;
}

double ServeChild::MetricSum(const std::string& family) const {
  httplib::Client client("127.0.0.1", port_);
  auto res = client.Get("/metrics");
  if (!res || res->status != 200) return -1;
  std::istringstream lines(res->body);
  double sum = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(family, 0) != 0 || line.size() <= family.size()) continue;
    const char next = line[family.size()];
    if (next != ' ' && next != '{') continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

int64_t ServeChild::Arena() const {
  return static_cast<int64_t>(Metric("ebb_arena_reserved_bytes{arena=\"cpu:shared\"}"));
}

double ServeChild::Releases(const std::string& model) const {
  return Metric("ebb_releases_total{model=\"" + model + "\"}");
}

}  // namespace ebb::cli
