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
//
// Thread-safe.
#pragma once

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

  // A run enters. Returns whether it should carry this arena's shrink entry.
  bool Enter(bool wants_release) {
    std::lock_guard<std::mutex> lock(mu_);
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

  // A run leaves. `still_wants_release`: the release this run wanted has not
  // fully happened yet (deferred, or an output pinned a region). Returns
  // whether the caller must trim now (it is the last one out and a release is
  // pending on a trimmable arena).
  bool Exit(bool still_wants_release) {
    std::lock_guard<std::mutex> lock(mu_);
    --in_flight_;
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
  int in_flight_ = 0;     // guarded by mu_
  bool pending_ = false;  // guarded by mu_
};

}  // namespace ebb::detail
