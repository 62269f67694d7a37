// server/grpc/call_support.h — what the gRPC front end's calls run on:
// worker threads for their work, and write deadlines for their replies.
//
// WorkerThreads: the server's completion-queue thread (async_call.h) must
// never block, and inference
// does (admission, the run), so a call's work is posted to one of at most
// `threads` workers; work posted while all are busy waits its turn in order
// (what it holds is charged to the request byte budget, core/byte_budget.h).
// A worker is started only when work finds none idle, so calls one after
// another run on one thread (and touch one malloc arena), not on each in turn.
//
// WriteDeadlines: a reply a client does not take — it grants no HTTP/2
// flow-control window, or stops reading — stays in the server's memory for as
// long as the call lasts, and gRPC has no send timeout of its own. Watch()
// arms a deadline for a call whose reply is being sent; when it passes before
// Forget() is called for it, the call is cancelled (RST_STREAM), which makes
// gRPC drop the reply's bytes and end the call. The watcher holds a reference
// to the grpc_call (grpc_call_ref), so it never touches a call gRPC has
// freed, and never locks anything while cancelling.
//
// Thread safety: every method may be called from any thread. Destroying
// either object joins its threads (work still queued runs first).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

struct grpc_call;

namespace ebb::server {

class WorkerThreads {
 public:
  explicit WorkerThreads(size_t max_threads);
  ~WorkerThreads();
  WorkerThreads(const WorkerThreads&) = delete;
  WorkerThreads& operator=(const WorkerThreads&) = delete;

  void Post(std::function<void()> work);

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable ready_;
  const size_t max_threads_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  size_t idle_ = 0;                          // guarded by mu_: workers waiting for work, or starting
  bool stopping_ = false;                    // guarded by mu_
  std::vector<std::thread> threads_;         // guarded by mu_
};

class WriteDeadlines {
 public:
  using Clock = std::chrono::steady_clock;
  WriteDeadlines();
  ~WriteDeadlines();
  WriteDeadlines(const WriteDeadlines&) = delete;
  WriteDeadlines& operator=(const WriteDeadlines&) = delete;

  // Cancels `call` at `when` unless Forget(id) comes first. Returns the id.
  uint64_t Watch(grpc_call* call, Clock::time_point when);
  // Disarms a deadline (nothing when it has fired already).
  void Forget(uint64_t id);
  // Deadlines that fired so far (for tests and logs).
  uint64_t fired() const;

 private:
  struct Entry {
    grpc_call* call;
    Clock::time_point when;
  };
  void Loop();

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::map<uint64_t, Entry> entries_;                   // guarded by mu_
  std::multimap<Clock::time_point, uint64_t> by_time_;  // guarded by mu_
  uint64_t next_id_ = 1;                                // guarded by mu_
  uint64_t fired_ = 0;                                  // guarded by mu_
  bool stopping_ = false;                               // guarded by mu_
  // When the watching thread wakes next (max: not before it is notified); guarded by mu_.
  Clock::time_point wake_at_ = Clock::time_point::min();
  std::thread thread_;
};

}  // namespace ebb::server
