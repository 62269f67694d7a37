#include "ebb/session_cache.h"

#include <algorithm>

#include "ebb/session.h"

namespace ebb {

std::string SessionKey::ToString() const {
  return content_sha256.substr(0, 12) + "@" + device + (options.empty() ? "" : "/" + options);
}

std::shared_ptr<SessionCache::Slot> SessionCache::HandOut(const SessionKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& entry = slots_[key];
  if (!entry) entry = std::make_shared<Slot>();
  entry->last_handed_out = ++use_clock_;
  return entry;
}

Result<std::shared_ptr<Session>> SessionCache::GetOrLoad(const SessionKey& key, const Loader& loader, bool* loaded) {
  if (loaded) *loaded = false;
  const std::shared_ptr<Slot> slot = HandOut(key);
  std::lock_guard<std::mutex> load_lock(slot->load_mu);
  if (slot->session) return slot->session;

  Result<std::shared_ptr<Session>> result = loader();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(key);
  if (!result.ok()) {
    // Not cached: the next request loads afresh.
    if (it != slots_.end() && it->second == slot) slots_.erase(it);
    return result;
  }
  slot->session = *result;
  if (it == slots_.end() || it->second != slot) slots_[key] = slot;  // erased while loading: put back
  ++loads_[key];
  ++total_loads_;
  if (loaded) *loaded = true;
  return result;
}

std::shared_ptr<Session> SessionCache::Find(const SessionKey& key) const {
  std::shared_ptr<Slot> slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = slots_.find(key);
    if (it == slots_.end()) return nullptr;
    slot = it->second;
  }
  std::lock_guard<std::mutex> load_lock(slot->load_mu);
  return slot->session;
}

std::shared_ptr<Session> SessionCache::Insert(const SessionKey& key, std::shared_ptr<Session> session) {
  const std::shared_ptr<Slot> slot = HandOut(key);
  std::lock_guard<std::mutex> load_lock(slot->load_mu);
  if (!slot->session) slot->session = std::move(session);
  return slot->session;
}

size_t SessionCache::DropUnused(size_t keep) {
  std::vector<std::shared_ptr<Session>> dropped;  // destroyed after the locks are let go
  {
    std::lock_guard<std::mutex> lock(mu_);
    // try_lock: a slot whose key is loading (its load_mu held, mu_ taken after it) is in use anyway.
    std::vector<std::pair<uint64_t, decltype(slots_)::iterator>> unused;
    for (auto it = slots_.begin(); it != slots_.end(); ++it) {
      Slot& slot = *it->second;
      std::unique_lock<std::mutex> load_lock(slot.load_mu, std::try_to_lock);
      // Held by nobody else: neither this Session nor the loaded model (other names' handles share it).
      if (load_lock.owns_lock() && slot.session && slot.session.use_count() == 1 &&
          slot.session->state_.use_count() == 1) {
        unused.emplace_back(slot.last_handed_out, it);
      }
    }
    if (unused.size() <= keep) return 0;
    std::sort(unused.begin(), unused.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    unused.resize(unused.size() - keep);
    for (auto& [clock, it] : unused) {
      Slot& slot = *it->second;
      std::unique_lock<std::mutex> load_lock(slot.load_mu, std::try_to_lock);
      if (!load_lock.owns_lock() || slot.session.use_count() != 1) continue;  // handed out meanwhile
      dropped.push_back(std::move(slot.session));
      load_lock.unlock();
      slots_.erase(it);
    }
  }
  return dropped.size();
}

bool SessionCache::Erase(const SessionKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return slots_.erase(key) > 0;
}

bool SessionCache::EraseIfSame(const SessionKey& key, const Session* session) {
  std::shared_ptr<Slot> slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = slots_.find(key);
    if (it == slots_.end()) return false;
    slot = it->second;
  }
  bool same = false;
  {
    std::lock_guard<std::mutex> load_lock(slot->load_mu);
    same = slot->session.get() == session;
  }
  if (!same) return false;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(key);
  if (it == slots_.end() || it->second != slot) return false;
  slots_.erase(it);
  return true;
}

size_t SessionCache::EraseIf(const std::function<bool(const SessionKey&, const Session&)>& pred) {
  size_t erased = 0;
  for (auto& [key, session] : Entries()) {
    if (pred(key, *session) && EraseIfSame(key, session.get())) ++erased;
  }
  return erased;
}

void SessionCache::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  slots_.clear();
}

size_t SessionCache::size() const { return Entries().size(); }

uint64_t SessionCache::loads(const SessionKey& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = loads_.find(key);
  return it == loads_.end() ? 0 : it->second;
}

uint64_t SessionCache::total_loads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_loads_;
}

std::vector<std::pair<SessionKey, std::shared_ptr<Session>>> SessionCache::Entries() const {
  std::vector<std::pair<SessionKey, std::shared_ptr<Slot>>> slots;
  {
    std::lock_guard<std::mutex> lock(mu_);
    slots.assign(slots_.begin(), slots_.end());
  }
  std::vector<std::pair<SessionKey, std::shared_ptr<Session>>> out;
  for (auto& [key, slot] : slots) {
    std::unique_lock<std::mutex> load_lock(slot->load_mu, std::try_to_lock);
    if (load_lock.owns_lock() && slot->session) out.emplace_back(key, slot->session);
  }
  return out;
}

}  // namespace ebb
