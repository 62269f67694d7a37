// Internal: release when idle (ReleaseMode::kIdle), off the request path.
//
// IdleTimer is the clock: it calls an action on a thread of its own once
// `debounce` has passed since the last Touch() and no hold is out. Runs touch
// it as they end; a burst of runs keeps pushing the moment away, so the
// action runs once, after the burst. The action may answer "not now" (a run
// is in flight on the arena): the timer then tries again after another
// debounce. A Touch during the action arms the timer again.
//
// IdleReleaser is what the Runtime's context owns under kIdle: an IdleTimer
// whose action shrinks the shared CPU arena (through its ArenaGate, so never
// under a run), frees the output buffers kept for the next run
// (OutputBuffers::Drop, as a run's release does) and trims the heap, and which counts the release for every
// session that ran since the previous one (Session::release_count, the
// Runtime's listener: the server's ebb_releases_total). A release made by
// other means (a run at its operation's end, Runtime::Trim) covers the runs
// that ended before it began (Mark, Covered): the releaser then neither
// releases again for them nor counts them, and a timer that fires with
// nothing run since the last release does nothing.
//
// Thread safety: every method may be called concurrently. The action and the
// listener are called on the timer's thread, never on a caller's.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ebb/status.h"

namespace ebb::detail {

struct SessionState;
class RuntimeContext;

class IdleTimer {
 public:
  using Clock = std::chrono::steady_clock;
  // Returns true when it did its work, false to be tried again after another debounce.
  using Action = std::function<bool()>;

  IdleTimer(std::chrono::milliseconds debounce, Action action);
  // Stops (see Stop).
  ~IdleTimer();
  IdleTimer(const IdleTimer&) = delete;
  IdleTimer& operator=(const IdleTimer&) = delete;

  // Activity: the action is due `debounce` from now. The thread starts on the first call.
  void Touch();
  // Ends the thread (an action in progress finishes first); later Touches do
  // nothing. REQUIRES: not called from the action.
  void Stop();
  // While at least one hold is out, the action waits (the server's open sequences).
  void Hold();
  void Unhold();

  std::chrono::milliseconds debounce() const { return debounce_; }
  // Actions that did their work so far.
  uint64_t fired() const;
  // Whether the action is due at some point (touched since it last did its work).
  bool armed() const;

 private:
  void Loop();

  const std::chrono::milliseconds debounce_;
  const Action action_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;          // guarded by mu_
  bool stop_ = false;           // guarded by mu_
  int holds_ = 0;               // guarded by mu_
  uint64_t fired_ = 0;          // guarded by mu_
  Clock::time_point last_touch_;  // guarded by mu_
  std::thread thread_;          // started by the first Touch, under mu_
};

class IdleReleaser {
 public:
  // REQUIRES: `ctx` outlives the releaser (the context owns it).
  IdleReleaser(RuntimeContext* ctx, std::chrono::milliseconds debounce);

  // A run of `session` ended: it is counted in the next release, which is due a debounce from now.
  void RanOn(const std::shared_ptr<SessionState>& session);
  // For a release made by other means: Mark() before it begins (with nothing on the shared CPU
  // arena that is not ended, such as a run that entered its gate alone), Covered(mark) once it gave
  // the shared CPU arena back. The runs that ended before the mark then need no idle release.
  uint64_t Mark() const { return runs_.load(); }
  void Covered(uint64_t mark);
  void Hold() { timer_.Hold(); }
  // No release after this returns (the Runtime stops it as it goes, so that a
  // release never drops the last reference to the context on its own thread).
  void Stop() { timer_.Stop(); }
  void Unhold() { timer_.Unhold(); }

  // Called on the timer's thread with the name of each session a release gave
  // memory back for. Setting another (or none) waits for a call in progress.
  void set_listener(std::function<void(const std::string& name)> listener);
  // Idle releases made (a timer that fired with nothing to release is not one).
  uint64_t releases() const { return released_.load(); }
  std::chrono::milliseconds debounce() const { return timer_.debounce(); }

 private:
  bool Release();

  RuntimeContext* const ctx_;
  std::mutex mu_;
  std::vector<std::weak_ptr<SessionState>> ran_;      // guarded by mu_: sessions run since the last release
  std::atomic<uint64_t> runs_{0};                      // runs ended so far (RanOn)
  uint64_t covered_ = 0;                               // guarded by mu_: runs_ up to which memory went back
  std::atomic<uint64_t> released_{0};
  std::mutex listener_mu_;                             // held while the listener is called
  std::function<void(const std::string&)> listener_;  // guarded by listener_mu_
  IdleTimer timer_;  // last: its thread stops before the members above go
};

}  // namespace ebb::detail
