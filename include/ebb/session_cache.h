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
  };

  mutable std::mutex mu_;
  std::map<SessionKey, std::shared_ptr<Slot>> slots_;  // guarded by mu_
  std::map<SessionKey, uint64_t> loads_;               // guarded by mu_
  uint64_t total_loads_ = 0;                           // guarded by mu_
};

}  // namespace ebb
