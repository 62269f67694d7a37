#include "spawn_self.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace ebb::cli {

Result<SelfProcess> SpawnSelf(std::vector<std::string> args,
                              const std::vector<std::pair<std::string, std::string>>& env) {
  int out[2];
  if (pipe(out) != 0) return Internal("pipe failed");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    return Internal("fork failed");
  }
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  close(out[1]);
  return SelfProcess{pid, out[0]};
}

Result<std::string> RunSelf(std::vector<std::string> args) {
  auto child = SpawnSelf(std::move(args));
  if (!child.ok()) return child.status();
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(child->stdout_fd, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(child->stdout_fd);
  int status = 0;
  while (waitpid(child->pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return Internal("the child process failed");
  return text;
}

}  // namespace ebb::cli
