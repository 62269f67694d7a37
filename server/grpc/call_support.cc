#include "call_support.h"

#include <grpc/grpc.h>

#include <algorithm>
#include <utility>

namespace ebb::server {

WorkerThreads::WorkerThreads(size_t max_threads) : max_threads_(std::max<size_t>(1, max_threads)) {}

WorkerThreads::~WorkerThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(threads_);  // none starts after stopping_
  }
  for (std::thread& t : threads) t.join();
}

void WorkerThreads::Post(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(work));
    if (idle_ < queue_.size() && threads_.size() < max_threads_ && !stopping_) {
      ++idle_;  // counted from now, so that the next Post does not start another for the same work
      threads_.emplace_back([this] { Loop(); });
      return;
    }
  }
  ready_.notify_one();
}

void WorkerThreads::Loop() {
  for (bool first = true;; first = false) {
    std::function<void()> work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!first) ++idle_;  // a new worker was counted idle when it was started
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      --idle_;
      if (queue_.empty()) return;  // stopping, and nothing left to run
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work();
  }
}

WriteDeadlines::WriteDeadlines() : thread_([this] { Loop(); }) {}

WriteDeadlines::~WriteDeadlines() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
  for (const auto& [id, entry] : entries_) grpc_call_unref(entry.call);
}

uint64_t WriteDeadlines::Watch(grpc_call* call, Clock::time_point when) {
  grpc_call_ref(call);
  uint64_t id = 0;
  bool earliest = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    entries_.emplace(id, Entry{call, when});
    // The watching thread is woken only when it would wake too late: it sleeps until wake_at_ (the
    // earliest deadline it knew of; forever with none), so a deadline after that is found when it
    // wakes. Calls one after another then cost no thread wake-up each (a 30 s deadline armed, then
    // forgotten, leaves wake_at_ in place until it passes).
    earliest = when < wake_at_;
    by_time_.emplace(when, id);
  }
  if (earliest) changed_.notify_one();
  return id;
}

void WriteDeadlines::Forget(uint64_t id) {
  grpc_call* call = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    call = it->second.call;
    auto [first, last] = by_time_.equal_range(it->second.when);
    for (auto t = first; t != last; ++t) {
      if (t->second == id) {
        by_time_.erase(t);
        break;
      }
    }
    entries_.erase(it);
  }
  grpc_call_unref(call);
}

uint64_t WriteDeadlines::fired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fired_;
}

void WriteDeadlines::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (by_time_.empty()) {
      wake_at_ = Clock::time_point::max();
      changed_.wait(lock);
      continue;
    }
    const Clock::time_point when = by_time_.begin()->first;
    if (Clock::now() < when) {
      wake_at_ = when;
      changed_.wait_until(lock, when);
      continue;
    }
    const uint64_t id = by_time_.begin()->second;
    by_time_.erase(by_time_.begin());
    auto it = entries_.find(id);
    grpc_call* call = it->second.call;
    entries_.erase(it);
    ++fired_;
    lock.unlock();  // cancelling may end the call on this thread; nothing of ours is locked then
    grpc_call_cancel_with_status(call, GRPC_STATUS_DEADLINE_EXCEEDED,
                                 "the reply was not taken within --write-timeout-s", nullptr);
    grpc_call_unref(call);
    lock.lock();
  }
}

}  // namespace ebb::server
