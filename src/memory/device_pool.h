// Internal: a capped pool of memory blocks shared by every session of a device, the memory behind
// the policy's `cuda.arena: env_allocator` (docs/memory-policy.md, "The shared CUDA arena").
//
// Blocks come from a backend (device memory through the CUDA runtime, cuda_runtime.h; the heap in
// tests). A freed block is kept for the next request that fits it (a block at most twice the size
// asked), so the runs of one operation do not go back to the driver for every tensor; Release()
// gives every kept block back to the backend, which ebb does at the end of each operation. The cap
// counts what the pool holds (blocks in use and kept): a request that would pass it, even after the
// kept blocks are given back, is refused (nullptr) and FailureText() says why.
//
// Not an ORT arena: ORT cannot shrink it (no `gpu:N` entry in the shrink list); ebb releases it.
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "ebb/memory_stats.h"

namespace ebb::detail {

class DevicePool {
 public:
  struct Backend {
    std::string name;                              // "cuda:0 (cudaMalloc)"; for messages
    std::function<void*(size_t bytes)> allocate;   // nullptr when it cannot
    std::function<void(void* block)> free;
    std::function<std::string()> last_error;       // why the last allocate failed; may be empty
  };

  // `cap_bytes` 0: no cap.
  DevicePool(Backend backend, size_t cap_bytes);
  // Gives kept blocks back. Blocks still in use are the caller's bug: they are given back too.
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  void* Allocate(size_t bytes);
  void Free(void* block);
  // Gives every kept (free) block back to the backend; safe while blocks are in use. Returns the bytes given back.
  size_t Release();

  size_t cap() const { return cap_; }
  // The arena figures ebb reports for every arena (ArenaStats): reserved = blocks held (in use and
  // kept), regions = blocks held, extensions = blocks ever taken from the backend, shrinks = blocks
  // given back by releases.
  ArenaStats Stats(const std::string& name) const;
  // Why the last refused request was refused, then cleared; empty when none was.
  std::string TakeFailure();

 private:
  void GiveBackKeptLocked();

  const Backend backend_;
  const size_t cap_;
  mutable std::mutex mu_;
  std::unordered_map<void*, size_t> in_use_;  // guarded by mu_
  std::multimap<size_t, void*> kept_;          // size -> block; guarded by mu_
  size_t in_use_bytes_ = 0, kept_bytes_ = 0, peak_in_use_ = 0;
  int64_t allocations_ = 0, extensions_ = 0, shrinks_ = 0;
  std::string failure_;
};

}  // namespace ebb::detail
