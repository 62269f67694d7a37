// Internal: tracks the runs in flight on one ORT arena and decides who
// releases it.
//
// Rules (see ebb/session.h):
//   * a run that wants a release carries the shrink request only when it is
//     the only run on the arena as it starts; otherwise the release is left
//     pending;
//   * a run that leaves the arena last, with a release pending, performs it
//     through the arena's trim function (when the arena has one);
//   * an arena without a trim function (a per-session arena) hands a pending
//     release to its next run that starts alone.
//   * a run that ran out of memory while other runs were on the arena (it may
//     fit alone: the others took the memory) waits for those runs to leave
//     and runs again ALONE (EnterAlone): runs that arrive meanwhile wait
//     behind it, so the arena drains. Every run of every session goes
//     through here, plain Session::Run and a ModelPool's admitted runs alike.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace ebb::detail {

class ArenaGate {
 public:
  // `spec` is the arena's entry in ORT's shrink list ("cpu:0", "gpu:1").
  // `can_trim`: whether Trim can be performed without one of this arena's
  // sessions running (true only for the env-shared CPU arena).
  ArenaGate(std::string spec, bool can_trim) : spec_(std::move(spec)), can_trim_(can_trim) {}

  const std::string& spec() const { return spec_; }
  bool can_trim() const { return can_trim_; }

  // What a run saw as it entered, for Overlapped().
  struct Entry {
    uint64_t entries = 0;  // runs entered so far, this one included
    bool others = false;   // other runs were in
  };

  // A run enters (after any run waiting to go alone). Returns whether it
  // should carry this arena's shrink entry.
  bool Enter(bool wants_release, Entry* entry = nullptr) {
    std::unique_lock<std::mutex> lock(mu_);
    drained_.wait(lock, [this] { return lone_waiting_ == 0 && !lone_; });
    ++entries_;
    if (entry) *entry = {entries_, in_flight_ > 0};
    return EnterLocked(wants_release);
  }

  // Whether another run was on the arena at any moment since `entry` (this
  // run is still in).
  bool Overlapped(const Entry& entry) const {
    std::lock_guard<std::mutex> lock(mu_);
    return entry.others || entry.entries != entries_ || in_flight_ > 1;
  }

  // Waits until no run is on the arena, then enters alone: no other run
  // enters until Exit. False (nothing entered) when `deadline` passed first.
  // Returns through `*carry` whether it carries the shrink entry.
  bool EnterAlone(bool wants_release, std::chrono::steady_clock::time_point deadline, bool* carry) {
    std::unique_lock<std::mutex> lock(mu_);
    ++lone_waiting_;
    const bool drained = drained_.wait_until(lock, deadline, [this] { return in_flight_ == 0 && !lone_; });
    --lone_waiting_;
    if (!drained) {
      drained_.notify_all();  // runs held back by this waiter may go
      return false;
    }
    lone_ = true;
    ++entries_;
    *carry = EnterLocked(wants_release);
    return true;
  }

 private:
  bool EnterLocked(bool wants_release) {
    bool alone = in_flight_ == 0;
    bool carry = alone && (wants_release || (pending_ && !can_trim_));
    if (carry) {
      pending_ = false;
    } else if (wants_release) {
      pending_ = true;
    }
    ++in_flight_;
    return carry;
  }

 public:
  // A run leaves. `still_wants_release`: the release this run wanted has not
  // fully happened yet (deferred, or an output pinned a region). Returns
  // whether the caller must trim now (it is the last one out and a release is
  // pending on a trimmable arena).
  bool Exit(bool still_wants_release) {
    std::lock_guard<std::mutex> lock(mu_);
    --in_flight_;
    if (in_flight_ == 0) {
      lone_ = false;
      drained_.notify_all();
    }
    if (still_wants_release) pending_ = true;
    if (in_flight_ == 0 && pending_ && can_trim_) {
      pending_ = false;
      return true;
    }
    return false;
  }

  int in_flight() const {
    std::lock_guard<std::mutex> lock(mu_);
    return in_flight_;
  }

  // Runs waiting in EnterAlone (for tests and diagnostics).
  int lone_waiting() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lone_waiting_;
  }

  // For the idle release: when no run is in flight on a trimmable arena,
  // enters the arena as a run would (so a run starting meanwhile does not
  // carry a shrink under the trim) and returns true; the caller trims, then
  // calls Exit(false). Otherwise false, and nothing is left pending: the idle
  // timer tries again later instead of handing the trim to a request.
  bool TryEnterForTrim() {
    std::lock_guard<std::mutex> lock(mu_);
    if (in_flight_ != 0 || !can_trim_) return false;
    pending_ = false;  // this trim performs any release left pending
    ++in_flight_;
    return true;
  }

  // For trim-now: true when no run is in flight (then the trim is safe to do
  // now); otherwise marks the release pending for the last run out.
  bool TrimNowOrDefer() {
    std::lock_guard<std::mutex> lock(mu_);
    if (in_flight_ == 0 && can_trim_) return true;
    pending_ = true;
    return false;
  }

 private:
  const std::string spec_;
  const bool can_trim_;
  mutable std::mutex mu_;
  std::condition_variable drained_;  // in_flight_ reached 0, or a lone waiter gave up
  int in_flight_ = 0;     // guarded by mu_
  bool pending_ = false;  // guarded by mu_
  uint64_t entries_ = 0;  // guarded by mu_: runs that entered so far
  int lone_waiting_ = 0;  // guarded by mu_: runs waiting to enter alone
  bool lone_ = false;     // guarded by mu_: a run is in alone
};

}  // namespace ebb::detail
