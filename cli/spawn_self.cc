#include "spawn_self.h"

namespace ebb::cli {

Result<port::Child> SpawnSelf(std::vector<std::string> args,
                              const std::vector<std::pair<std::string, std::string>>& env) {
  return port::Child::SpawnSelf(args, env);
}

Result<std::string> RunSelf(std::vector<std::string> args) {
  auto child = SpawnSelf(std::move(args));
  if (!child.ok()) return child.status();
  std::string text;
  char buf[4096];
  for (size_t n; (n = child->ReadStdout(buf, sizeof buf)) != 0;) text.append(buf, n);
  if (child->Wait() != 0) return Internal("the child process failed");
  return text;
}

}  // namespace ebb::cli
