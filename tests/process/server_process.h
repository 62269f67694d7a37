// Test helper: starts the real `ebb serve` as a child process on a free
// loopback port, keeps what it prints, and stops it with a signal.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ebb::testing {

class ServerProcess {
 public:
  // Starts `ebb serve --port 0 <args>` (without gRPC unless `args` has
  // --grpc-port) and waits for it to print its URL (and gRPC address). Its
  // stderr goes to `stderr_path` when given.
  bool Start(const std::vector<std::string>& args, const std::string& stderr_path = "") {
    int out[2];
    if (pipe(out) != 0) return false;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      if (!stderr_path.empty()) {
        if (FILE* err = std::fopen(stderr_path.c_str(), "w")) dup2(fileno(err), STDERR_FILENO);
      }
      std::vector<std::string> all = {EBB_BINARY, "serve", "--port", "0", "--device", "cpu"};
      if (std::find(args.begin(), args.end(), "--grpc-port") == args.end()) {
        all.insert(all.end(), {"--grpc-port", "0"});
      }
      // The tests of per-request releases read them right after each reply: operation_end, unless
      // a test chooses (the server's own default is idle, tested in sequence_test.py).
      if (std::find(args.begin(), args.end(), "--release") == args.end()) {
        all.insert(all.end(), {"--release", "operation_end"});
      }
      all.insert(all.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (std::string& a : all) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    stdout_ = fdopen(out[0], "r");
    const auto grpc = std::find(args.begin(), args.end(), "--grpc-port");
    const bool with_grpc = grpc != args.end() && grpc + 1 != args.end() && grpc[1] != "0";
    char line[4096];
    while (fgets(line, sizeof line, stdout_)) {
      std::string s(line);
      Append(s);
      if (auto at = s.find("http://127.0.0.1:"); at != std::string::npos) port_ = std::stoi(s.substr(at + 17));
      if (auto at = s.find("grpc 127.0.0.1:"); at != std::string::npos) grpc_port_ = std::stoi(s.substr(at + 15));
      if (port_ && (!with_grpc || grpc_port_)) {
        // Keep draining stdout so the child never blocks on a full pipe.
        drain_ = std::thread([this, f = stdout_] {
          char buf[4096];
          while (fgets(buf, sizeof buf, f)) Append(buf);
        });
        return true;
      }
    }
    return false;
  }

  // What the server printed on stdout so far, once it holds `until` (or
  // after `timeout`, whatever it holds then).
  std::string Output(const std::string& until, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(output_mu_);
    output_cv_.wait_for(lock, timeout, [&] { return output_.find(until) != std::string::npos; });
    return output_;
  }

  // Sends `sig` and returns the exit code (-1 if it did not exit normally).
  int Stop(int sig = SIGTERM) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    if (drain_.joinable()) drain_.join();
    if (stdout_) fclose(stdout_);
    stdout_ = nullptr;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  ~ServerProcess() {
    if (pid_ > 0) Stop(SIGKILL);
  }

  int port() const { return port_; }
  int grpc_port() const { return grpc_port_; }
  pid_t pid() const { return pid_; }

 private:
  void Append(const std::string& text) {
    {
      std::lock_guard<std::mutex> lock(output_mu_);
      output_ += text;
    }
    output_cv_.notify_all();
  }

  pid_t pid_ = -1;
  int port_ = 0;
  int grpc_port_ = 0;
  FILE* stdout_ = nullptr;
  std::thread drain_;
  std::mutex output_mu_;
  std::condition_variable output_cv_;
  std::string output_;  // stdout so far; guarded by output_mu_
};

}  // namespace ebb::testing
