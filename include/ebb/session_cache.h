// ebb/session_cache.h — loaded sessions, reused by key.
//
// A SessionCache maps a SessionKey — the model's identity by CONTENT (a
// SHA-256 of its bytes, not its path, covering the ONNX external-data files
// it names as well), the device asked for, and the runtime options — to a
// loaded Session. The same key gives the same Session object,
// with no reload, for as long as it stays cached (releasing memory does not
// evict it). Failed loads are not cached: the next request tries again.
//
// Sessions are handed out as std::shared_ptr: Erase()/Clear() only drop the
// cache's reference, so a session in use is never destroyed under a running
// call; it goes away when its last user lets go.
//
// A cached model that nobody but the cache holds (every Session handle for it
// was let go: Java's and Python's close(), C's ebb_session_destroy) is UNUSED.
// DropUnused() bounds how many unused models stay cached, dropping the least
// recently handed out first (the Runtime calls it after every load and on
// Trim, with MemoryPolicy::max_unused_models), so that a caller who only
// closes handles, never unloads, still gets the memory back.
//
// Concurrent GetOrLoad() calls for the same key load once; the others wait
// for that load and share its result. Loads of different keys run in
// parallel.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ebb/status.h"

namespace ebb {

class Session;

struct SessionKey {
  // Hex SHA-256 of the model bytes; for a model with external data, of the
  // model file's and every external-data file's SHA-256 (Runtime::Load).
  std::string content_sha256;
  std::string device;          // the request: "auto", "cpu", "cuda:0"
  std::string options;         // canonical text of per-load options that change the session

  std::string ToString() const;
  auto operator<=>(const SessionKey&) const = default;
};

class SessionCache {
 public:
  using Loader = std::function<Result<std::shared_ptr<Session>>()>;

  // The cached session for `key`, or the result of `loader()` (cached only on
  // success). `loaded` is set to whether this call loaded it.
  Result<std::shared_ptr<Session>> GetOrLoad(const SessionKey& key, const Loader& loader, bool* loaded = nullptr);
  // The cached session, or nullptr.
  std::shared_ptr<Session> Find(const SessionKey& key) const;

  // Drops `key`; true if it was cached.
  bool Erase(const SessionKey& key);
  // Drops `key` only if it still maps to `session` (so that a fresh reload is
  // not dropped by a late report about the old one).
  bool EraseIfSame(const SessionKey& key, const Session* session);
  // Caches `session` under `key` unless a session is cached there already (not
  // counted as a load); returns the one cached under `key`.
  std::shared_ptr<Session> Insert(const SessionKey& key, std::shared_ptr<Session> session);
  // Drops unused models (see above), least recently handed out first, until at
  // most `keep` stay; returns how many were dropped. They are destroyed here,
  // outside the cache's locks.
  size_t DropUnused(size_t keep);
  // Drops every entry for which `pred` is true; returns how many.
  size_t EraseIf(const std::function<bool(const SessionKey&, const Session&)>& pred);
  void Clear();

  size_t size() const;
  // Successful loads so far, for one key or in total (kept across Erase).
  uint64_t loads(const SessionKey& key) const;
  uint64_t total_loads() const;
  // The cached sessions, in key order.
  std::vector<std::pair<SessionKey, std::shared_ptr<Session>>> Entries() const;

 private:
  struct Slot {
    std::mutex load_mu;                // held while this key loads
    std::shared_ptr<Session> session;  // guarded by load_mu
    uint64_t last_handed_out = 0;      // guarded by mu_: the cache's clock (use_clock_) then
  };

  // The slot of `key` (made when there is none), its use clock advanced.
  std::shared_ptr<Slot> HandOut(const SessionKey& key);

  mutable std::mutex mu_;
  std::map<SessionKey, std::shared_ptr<Slot>> slots_;  // guarded by mu_
  std::map<SessionKey, uint64_t> loads_;               // guarded by mu_
  uint64_t total_loads_ = 0;                           // guarded by mu_
  uint64_t use_clock_ = 0;                             // guarded by mu_
};

}  // namespace ebb
