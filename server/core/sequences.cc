// Operations that span requests. See sequences.h.
#include "sequences.h"

#include <cstdio>
#include <vector>

namespace ebb::server {

SequenceTable::SequenceTable(SequenceOptions options, MakeHold hold, OnTimeout on_timeout)
    : options_(options), make_hold_(std::move(hold)), on_timeout_(std::move(on_timeout)) {
  reaper_ = std::thread([this] { Reap(); });
}

SequenceTable::~SequenceTable() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  reaper_.join();
}

std::string SequenceTable::Key(const std::string& model, const std::string& version, const SequenceId& id) {
  // The kind first, so that 7 and "7" differ; model and version names hold no '\n'.
  return model + '\n' + version + '\n' + (std::holds_alternative<uint64_t>(id) ? 'n' : 's') + SequenceIdText(id);
}

Status SequenceTable::Enter(const std::string& model, const std::string& version, const SequenceControl& control) {
  const SequenceId& id = *control.id;
  const std::string key = Key(model, version, id);
  std::unique_ptr<IdleReleaseHold> hold;
  if (control.start) hold = make_hold_ ? make_hold_() : nullptr;  // before the lock: it may take the Runtime's
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(key);
  if (it == open_.end()) {
    if (!control.start) {
      return InvalidArgument("inference request for sequence " + SequenceIdForMessage(id) + " to model '" + Clip(model) +
                             "' must specify the START flag on the first request of the sequence");
    }
    if (open_.size() >= options_.max_open) {
      return Unavailable("too many open sequences: " + std::to_string(open_.size()) +
                         " are open, the limit (--max-sequences); end one (sequence_end) or retry later");
    }
    it = open_.emplace(key, Entry{model, version, id, 0, {}, std::move(hold)}).first;
  } else if (control.start) {
    // Triton's warning, logged as ebb serve logs (one line to stderr), not an error.
    std::fprintf(stderr, "ebb: warning: sequence %s for model '%s' has a conflict: the previous sequence did not end "
                 "before this sequence start; it goes on as the new one\n", SequenceIdForMessage(id).c_str(), Clip(model).c_str());
  }
  ++it->second.in_flight;
  it->second.last_seen = std::chrono::steady_clock::now();
  return Status::Ok();
}

void SequenceTable::Leave(const std::string& model, const std::string& version, const SequenceControl& control) {
  std::unique_ptr<IdleReleaseHold> ended;  // released after the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = open_.find(Key(model, version, *control.id));
    if (it == open_.end()) return;  // ended meanwhile by another request of it
    --it->second.in_flight;
    it->second.last_seen = std::chrono::steady_clock::now();
    if (control.end) {
      ended = std::move(it->second.hold);
      open_.erase(it);
    }
  }
  // The reaper is not woken: this sequence's new deadline is later than the one it waits for.
}

size_t SequenceTable::open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_.size();
}

// Ends the sequences idle past the timeout (none with a request in flight),
// then tells on_timeout, outside the lock, once their holds are gone. It waits
// until the earliest deadline of an idle sequence, or a timeout from now: a
// sequence that goes idle later has a later deadline, so nothing wakes it.
void SequenceTable::Reap() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const auto now = std::chrono::steady_clock::now();
    auto next = now + options_.idle_timeout;
    std::vector<Entry> expired;
    for (auto it = open_.begin(); it != open_.end();) {
      const auto due = it->second.last_seen + options_.idle_timeout;
      if (it->second.in_flight == 0 && due <= now) {
        expired.push_back(std::move(it->second));
        it = open_.erase(it);
        continue;
      }
      if (it->second.in_flight == 0) next = std::min(next, due);
      ++it;
    }
    if (!expired.empty()) {
      lock.unlock();
      for (Entry& e : expired) {
        e.hold.reset();
        if (on_timeout_) on_timeout_(e.model, e.version, e.id);
      }
      lock.lock();
      continue;
    }
    cv_.wait_until(lock, next);
  }
}

}  // namespace ebb::server
