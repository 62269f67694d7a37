// server/core/admission.h — bounds how many inferences run and wait at once.
//
// The CPU bound of `ebb serve`: at most `workers` requests run inference at a
// time; up to `queue` more wait for a turn, in arrival order; beyond that a
// request is refused at once (the server answers 503), so a burst never piles
// up unbounded work. A waiting request also leaves the line when its deadline
// passes or its caller goes away (`cancelled`, polled every 20 ms). A Ticket
// is held for the duration of one inference. (Memory is the model pool's
// bound: ebb/model_pool.h admits each run by what it will need.)
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

namespace ebb::server {

class Admission {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Outcome { kAdmitted, kQueueFull, kTimedOut, kCancelled };

  Admission(size_t workers, size_t queue) : workers_(workers ? workers : 1), queue_(queue) {}

  class Ticket {
   public:
    Ticket(Admission* a, Outcome outcome) : a_(a), outcome_(outcome) {}
    Ticket(Ticket&& o) noexcept : a_(o.a_), outcome_(o.outcome_) { o.a_ = nullptr; }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() {
      if (a_) a_->Leave();
    }
    bool admitted() const { return a_ != nullptr; }
    Outcome outcome() const { return outcome_; }

   private:
    Admission* a_;
    Outcome outcome_;
  };

  // Waits for a turn, in arrival order, until `deadline`; an unadmitted ticket
  // when the queue is full, the deadline passed, or `cancelled()` said so.
  Ticket Enter(Clock::time_point deadline = Clock::time_point::max(), const std::function<bool()>& cancelled = {}) {
    std::unique_lock<std::mutex> lock(mu_);
    if (running_ < workers_ && line_.empty()) {
      ++running_;
      return Ticket(this, Outcome::kAdmitted);
    }
    if (line_.size() >= queue_) return Ticket(nullptr, Outcome::kQueueFull);
    const uint64_t me = ++next_;
    line_.push_back(me);
    Outcome outcome = Outcome::kAdmitted;
    while (!(running_ < workers_ && line_.front() == me)) {
      if (cancelled && cancelled()) {
        outcome = Outcome::kCancelled;
        break;
      }
      const auto now = Clock::now();
      if (now >= deadline) {
        outcome = Outcome::kTimedOut;
        break;
      }
      turn_.wait_until(lock, cancelled ? std::min(deadline, now + std::chrono::milliseconds(20)) : deadline);
    }
    std::erase(line_, me);
    turn_.notify_all();  // the next in line may be first now
    if (outcome != Outcome::kAdmitted) return Ticket(nullptr, outcome);
    ++running_;
    return Ticket(this, Outcome::kAdmitted);
  }

  size_t running() const {
    std::lock_guard<std::mutex> lock(mu_);
    return running_;
  }
  size_t waiting() const {
    std::lock_guard<std::mutex> lock(mu_);
    return line_.size();
  }
  size_t workers() const { return workers_; }
  size_t queue() const { return queue_; }

 private:
  void Leave() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
    }
    turn_.notify_all();  // every waiter checks whether it is first (a line is short: at most `queue`)
  }

  const size_t workers_, queue_;
  mutable std::mutex mu_;
  std::condition_variable turn_;
  size_t running_ = 0;        // guarded by mu_
  std::deque<uint64_t> line_;  // waiting, in arrival order; guarded by mu_
  uint64_t next_ = 0;          // guarded by mu_
};

}  // namespace ebb::server
