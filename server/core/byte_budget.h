// server/core/byte_budget.h — the bytes of requests held at once, over every front end.
//
// A ByteBudget counts bytes against a fixed capacity. Every front end charges
// what it holds of a request before decoding it (an HTTP body as it arrives,
// a gRPC message once it is received) and gives it back when it lets go, so
// that `ebb serve --max-body-bytes-in-flight` bounds the sum over HTTP and
// gRPC together, not each one alone nor connections x message size. A charge
// that would pass the capacity is refused at once, never waited for: the
// front end answers "server busy" (HTTP 503, gRPC UNAVAILABLE) and the client
// retries.
//
// Thread safety: all methods may be called concurrently (one atomic counter).
// Ownership: a Reservation gives its bytes back when destroyed; REQUIRES: the
// budget outlives its reservations.
#pragma once

#include <atomic>
#include <cstddef>
#include <utility>

namespace ebb::server {

class ByteBudget {
 public:
  explicit ByteBudget(size_t capacity) : capacity_(capacity) {}
  ByteBudget(const ByteBudget&) = delete;
  ByteBudget& operator=(const ByteBudget&) = delete;

  // Charges `n` bytes; false (and nothing charged) when that would pass the capacity.
  [[nodiscard]] bool TryCharge(size_t n) {
    size_t held = held_.load(std::memory_order_relaxed);
    do {
      if (n > capacity_ - held) return false;
    } while (!held_.compare_exchange_weak(held, held + n, std::memory_order_relaxed));
    return true;
  }
  // Gives back `n` bytes charged before.
  void Release(size_t n) { held_.fetch_sub(n, std::memory_order_relaxed); }

  size_t capacity() const { return capacity_; }
  size_t held() const { return held_.load(std::memory_order_relaxed); }

  // `bytes` charged to a budget until destroyed (or moved from); empty when the charge was refused.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& o) noexcept : budget_(std::exchange(o.budget_, nullptr)), bytes_(o.bytes_) {}
    Reservation& operator=(Reservation&& o) noexcept {
      if (this != &o) {
        Reset();
        budget_ = std::exchange(o.budget_, nullptr);
        bytes_ = o.bytes_;
      }
      return *this;
    }
    ~Reservation() { Reset(); }
    bool held() const { return budget_ != nullptr; }
    size_t bytes() const { return budget_ ? bytes_ : 0; }
    void Reset() {
      if (budget_) budget_->Release(bytes_);
      budget_ = nullptr;
    }

   private:
    friend class ByteBudget;
    Reservation(ByteBudget* budget, size_t bytes) : budget_(budget), bytes_(bytes) {}
    ByteBudget* budget_ = nullptr;
    size_t bytes_ = 0;
  };
  // A reservation of `n` bytes; an empty one when they do not fit.
  Reservation Reserve(size_t n) { return TryCharge(n) ? Reservation(this, n) : Reservation(); }

 private:
  const size_t capacity_;
  std::atomic<size_t> held_{0};
};

}  // namespace ebb::server
