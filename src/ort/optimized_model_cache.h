// Internal: the on-disk cache of optimized models, which makes a re-load
// ("switch-in") of a model cost a fraction of its first load.
//
// On a first load ONNX Runtime optimizes the graph (at the policy's level) and
// saves the result in its own flatbuffer format (.ort). Later loads map that
// file and hand ORT the mapped bytes directly: no parsing of the ONNX
// protobuf, no graph optimization, no copy of the weights (ORT's initializers
// point into the bytes, which live as long as the session).
//
// An entry is two files in the cache folder, named by the entry id (a hash
// of its key):
//   <id>.ort   the optimized model
//   <id>.json  its header: the key it was made for, the .ort's size, and its
//              checksum: XXH3-64 of the .ort's bytes seeded with a hash of
//              the id, so an entry made for one key does not verify under
//              another (a copied or swapped entry is a miss)
// The key: the model's identity (its file's SHA-256, or with ONNX external data
// the hash over every file it reads: external_data.h; ORT-format entries hold
// the weights inline, so an entry needs no file beside it), the options that
// shape the optimized graph (the optimization level), the ORT version, and
// the CPU features (ORT warns that an `all`-level model holds layouts chosen
// for this CPU).
//
// Trust: whoever can write the folder decides what ORT runs, so the folder is
// refused (Open fails, loads do without the cache) unless it is this user's
// and not writable by group or others; each file must be too, and must not be
// a link (opened O_NOFOLLOW, checked by fstat: src/model/file_access.h); a header
// is at most kMaxHeaderBytes. The checksum guards against accidents (a
// truncated, corrupt, copied or swapped entry), not against this user
// forging an entry on purpose: it is not a signature, and this user can
// change the model files themselves anyway.
//
// Safety: an entry is used only if its header parses, names exactly this key,
// and the .ort file has the recorded size and checksum — checked over the
// very bytes ORT is given (once per cache object, i.e. per runtime, for a
// mapped entry: a later hit on the same version of the file, by identity,
// settled as model_file.h says, is not checksummed again), which no later
// write to the file can reach: the mapping is guarded (port::GuardedMapping: on Linux a read
// lease, and a write to the file first turns the mapping into a private
// copy; on Windows writers are refused), or, where the file cannot be
// guarded (no leases on its file system, open for writing somewhere), the
// bytes are a private copy. Either way an entry truncated or rewritten
// afterwards changes nothing for the sessions made from it, and cannot make
// them fault. A missing, foreign, stale, truncated or corrupt
// entry is a miss: it is removed, the model loads from its original file, and
// a fresh entry replaces it. Files are written under temporary names (mode
// 0600) and renamed into place, so readers never see a partial entry. The
// folder is bounded: after each write, the least recently used entries
// (header mtime, touched on every use) are removed until the total fits
// max_bytes.
//
// Thread safety: all methods may be called concurrently, from several
// processes too (each writer uses its own temporary names).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "ebb/memory_policy.h"
#include "file_access.h"
#include "model_file.h"

namespace ebb::detail {

struct OptimizedModelKey {
  std::string model_sha256;
  std::string options;       // canonical text of what shapes the optimized graph
  std::string ort_version;
  std::string cpu_features;  // hash of the CPU's feature flags

  // 32 hex characters: the file name of the entry.
  std::string Id() const;
};

// A short hash of this CPU's feature flags with its vendor (port::CpuFeatures:
// /proc/cpuinfo on Linux, CPUID on Windows); empty when they cannot be read.
const std::string& CpuFeaturesHash();

class OptimizedModelCache {
 public:
  // The largest header read (a real one is ~400 bytes).
  static constexpr uint64_t kMaxHeaderBytes = 64 * 1024;

  // The cache folder a policy names: its `dir`, else $EBB_CACHE_DIR, else
  // $XDG_CACHE_HOME/ebb/optimized-models, else $HOME/.cache/ebb/optimized-models.
  // Empty when none applies.
  static std::string FolderFor(const OptimizedModelCachePolicy& policy);

  // The cache in `folder` (created, mode 0700, if missing), or an error saying
  // why it cannot be used (then loads simply do without it): kUnavailable when
  // there is no folder to use (no HOME) or no CPU features to key entries by;
  // kFailedPrecondition for a folder that cannot be created or written, or
  // that is refused (another user's, or writable by group or others).
  static Result<std::unique_ptr<OptimizedModelCache>> Open(const std::string& folder, uint64_t max_bytes);

  const std::string& folder() const { return folder_; }
  uint64_t max_bytes() const { return max_bytes_; }

  // The verified entry for `key` (mapped under a guard, else copied into
  // memory: Safety above), or nullptr on a miss. A
  // bad entry is removed; `why` (optional) says what was wrong ("" for a plain
  // miss).
  std::shared_ptr<FileBytes> Find(const OptimizedModelKey& key, std::string* why = nullptr);

  // A fresh temporary path in the folder where ORT may write the optimized
  // model for `key`; pass it to Commit, or remove it.
  std::string TemporaryPath(const OptimizedModelKey& key);

  // Turns the file ORT wrote at `temporary` into the entry for `key` (mode
  // 0600, checksum, header, renames), then trims the folder to max_bytes. The
  // temporary file is gone afterwards either way. An entry larger than
  // max_bytes is not kept (kResourceExhausted).
  Status Commit(const OptimizedModelKey& key, const std::string& temporary);

  // Removes the entry for `key` (both files), if any.
  void Remove(const OptimizedModelKey& key);

  // Models that cannot go through the cache (ORT could not save them, or
  // refused the entry it wrote): remembered for the life of the process, so
  // later loads do not pay for another attempt.
  void MarkUncacheable(const OptimizedModelKey& key);
  bool IsUncacheable(const OptimizedModelKey& key) const;

  // Bytes of all entries now in the folder.
  uint64_t TotalBytes() const;

 private:
  OptimizedModelCache(std::string folder, uint64_t max_bytes) : folder_(std::move(folder)), max_bytes_(max_bytes) {}
  std::string PathOf(const std::string& id, const char* extension) const;
  // Whether the entry `id` verified its checksum earlier through this cache
  // while its file had `identity` (RememberVerified).
  bool VerifiedBefore(const std::string& id, const port::FileIdentity& identity) const;
  // Remembers that the entry `id` verified while its file, mapped under a
  // guard and settled (model_file.h), had `identity`. At most kMaxVerified.
  void RememberVerified(const std::string& id, const port::FileIdentity& identity);
  static constexpr size_t kMaxVerified = 1024;
  // Removes least recently used entries until the folder fits max_bytes;
  // never the entry `keep`. Also removes temporary files left by writers
  // that died (older than an hour).
  void Trim(const std::string& keep);

  const std::string folder_;
  const uint64_t max_bytes_;
  std::mutex trim_mu_;  // one trim at a time in this process
  mutable std::mutex verified_mu_;
  std::map<std::string, port::FileIdentity> verified_;  // entry id -> identity; guarded by verified_mu_
  mutable std::mutex uncacheable_mu_;
  std::set<std::string> uncacheable_;  // entry ids; guarded by uncacheable_mu_
};

}  // namespace ebb::detail
