// Release when idle: the timer and the release it performs. See idle_release.h.
#include "idle_release.h"

#include <algorithm>

#include "ebb/tensor.h"
#include "log.h"
#include "ort_api.h"
#include "ort_context.h"
#include "session_state.h"

namespace ebb::detail {

IdleTimer::IdleTimer(std::chrono::milliseconds debounce, Action action)
    : debounce_(debounce), action_(std::move(action)) {}

IdleTimer::~IdleTimer() { Stop(); }

void IdleTimer::Stop() {
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    thread.swap(thread_);
  }
  cv_.notify_all();
  if (thread.joinable()) thread.join();
}

void IdleTimer::Touch() {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return;
  last_touch_ = Clock::now();
  if (armed_) return;  // the thread wakes at the old moment, sees this one, and waits on
  armed_ = true;
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  cv_.notify_all();
}

void IdleTimer::Hold() {
  std::lock_guard<std::mutex> lock(mu_);
  ++holds_;
}

void IdleTimer::Unhold() {
  std::lock_guard<std::mutex> lock(mu_);
  if (holds_ > 0 && --holds_ == 0) cv_.notify_all();
}

uint64_t IdleTimer::fired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fired_;
}

bool IdleTimer::armed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return armed_;
}

void IdleTimer::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (!armed_ || holds_ > 0) {
      cv_.wait(lock);
      continue;
    }
    const Clock::time_point due = last_touch_ + debounce_;
    if (Clock::now() < due) {
      cv_.wait_until(lock, due);
      continue;
    }
    armed_ = false;  // a Touch during the action arms it again
    lock.unlock();
    const bool done = action_();
    lock.lock();
    if (done) {
      ++fired_;
    } else if (!armed_) {
      armed_ = true;  // not now: again after another debounce
      last_touch_ = Clock::now();
    }
  }
}

IdleReleaser::IdleReleaser(RuntimeContext* ctx, std::chrono::milliseconds debounce)
    : ctx_(ctx), timer_(debounce, [this] { return Release(); }) {}

// The order below is Covered's match: the count stored before idle_ran is read, so that a Covered
// that clears idle_ran either sees this run's count or is seen by it (and the session is put back).
void IdleReleaser::RanOn(const std::shared_ptr<SessionState>& session) {
  session->idle_last_run.store(runs_.fetch_add(1) + 1);
  if (!session->idle_ran.load()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!session->idle_ran.exchange(true)) ran_.push_back(session);
  }
  timer_.Touch();
}

void IdleReleaser::Covered(uint64_t mark) {
  std::lock_guard<std::mutex> lock(mu_);
  if (mark <= covered_) return;
  covered_ = mark;
  std::erase_if(ran_, [mark](const std::weak_ptr<SessionState>& weak) {
    const std::shared_ptr<SessionState> s = weak.lock();
    if (!s) return true;
    s->idle_ran.store(false);  // before the count is read (see RanOn)
    if (s->idle_last_run.load() <= mark) return true;
    s->idle_ran.store(true);  // it ran again since: still due (RanOn, if it saw false, waits on mu_)
    return false;
  });
}

void IdleReleaser::set_listener(std::function<void(const std::string&)> listener) {
  std::lock_guard<std::mutex> lock(listener_mu_);  // waits for a call in progress
  listener_ = std::move(listener);
}

// The timer's action. Nothing is done under a run: the shared gate is entered
// like a run's, only when none is in flight (else: again later). The sessions
// counted are those whose runs ended before the trim began; one that ends
// during it is counted by the next release.
bool IdleReleaser::Release() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (runs_.load() <= covered_) return true;  // nothing ran since memory last went back
  }
  const std::shared_ptr<ArenaGate>& gate = ctx_->shared_cpu_gate();
  if (gate && !gate->TryEnterForTrim()) return false;
  const uint64_t mark = runs_.load();  // every run counted so far has left the arena
  std::vector<std::weak_ptr<SessionState>> ran;
  {
    std::lock_guard<std::mutex> lock(mu_);
    covered_ = std::max(covered_, mark);
    ran.swap(ran_);
    for (const auto& weak : ran) {
      if (auto s = weak.lock()) s->idle_ran = false;
    }
  }
  Status st = gate ? ctx_->TrimSharedArena() : Status::Ok();
  if (gate && gate->Exit(false)) st = ctx_->TrimSharedArena();  // a release was left pending meanwhile
  OutputBuffers::Drop();  // as every release does: the output buffers kept for the next run go too
  ctx_->TrimHeap(/*force=*/true);
  if (!st.ok()) LogWarning("idle release: " + st.message());
  released_.fetch_add(1);
  std::lock_guard<std::mutex> lock(listener_mu_);
  for (const auto& weak : ran) {
    std::shared_ptr<SessionState> s = weak.lock();
    if (!s) continue;
    ++s->releases;
    if (listener_) listener_(s->name);
  }
  return true;
}

}  // namespace ebb::detail
