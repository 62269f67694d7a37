// server/core/admission.h — bounds how many inferences run and wait at once.
//
// At most `workers` requests run inference at a time; up to `queue` more wait
// for a turn; beyond that a request is refused at once (the server answers
// 503), so a burst never piles up unbounded work. A Ticket is held for the
// duration of one inference.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace ebb::server {

class Admission {
 public:
  Admission(size_t workers, size_t queue) : workers_(workers ? workers : 1), queue_(queue) {}

  class Ticket {
   public:
    explicit Ticket(Admission* a) : a_(a) {}
    Ticket(Ticket&& o) noexcept : a_(o.a_) { o.a_ = nullptr; }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() {
      if (a_) a_->Leave();
    }
    bool admitted() const { return a_ != nullptr; }

   private:
    Admission* a_;
  };

  // Waits for a turn; an unadmitted ticket when the queue is full.
  Ticket Enter() {
    std::unique_lock<std::mutex> lock(mu_);
    if (running_ >= workers_) {
      if (waiting_ >= queue_) return Ticket(nullptr);
      ++waiting_;
      turn_.wait(lock, [&] { return running_ < workers_; });
      --waiting_;
    }
    ++running_;
    return Ticket(this);
  }

  size_t running() const {
    std::lock_guard<std::mutex> lock(mu_);
    return running_;
  }
  size_t waiting() const {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_;
  }
  size_t workers() const { return workers_; }
  size_t queue() const { return queue_; }

 private:
  void Leave() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
    }
    turn_.notify_one();
  }

  const size_t workers_, queue_;
  mutable std::mutex mu_;
  std::condition_variable turn_;
  size_t running_ = 0;  // guarded by mu_
  size_t waiting_ = 0;  // guarded by mu_
};

}  // namespace ebb::server
