#include "device_pool.h"

#include <vector>

namespace ebb::detail {
namespace {

std::string Bytes(size_t n) { return std::to_string(n) + " bytes"; }

}  // namespace

DevicePool::DevicePool(Backend backend, size_t cap_bytes) : backend_(std::move(backend)), cap_(cap_bytes) {}

DevicePool::~DevicePool() {
  std::lock_guard<std::mutex> lock(mu_);
  GiveBackKeptLocked();
  for (auto& [block, size] : in_use_) backend_.free(block);
}

void* DevicePool::Allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  ++allocations_;
  // A kept block that fits, wasting at most as much as is asked.
  auto fit = kept_.lower_bound(bytes);
  if (fit != kept_.end() && fit->first <= 2 * bytes) {
    void* block = fit->second;
    const size_t size = fit->first;
    kept_.erase(fit);
    kept_bytes_ -= size;
    in_use_[block] = size;
    in_use_bytes_ += size;
    if (in_use_bytes_ > peak_in_use_) peak_in_use_ = in_use_bytes_;
    return block;
  }
  if (cap_ && in_use_bytes_ + kept_bytes_ + bytes > cap_) GiveBackKeptLocked();  // make room first
  if (cap_ && in_use_bytes_ + bytes > cap_) {
    failure_ = "the " + backend_.name + " memory pool's cap of " + Bytes(cap_) + " was reached: requested " +
               Bytes(bytes) + " with " + Bytes(in_use_bytes_) + " in use";
    return nullptr;
  }
  void* block = backend_.allocate(bytes);
  if (!block) {
    GiveBackKeptLocked();  // the driver may be short of what the pool keeps: once more without it
    block = backend_.allocate(bytes);
  }
  if (!block) {
    const std::string why = backend_.last_error ? backend_.last_error() : "";
    failure_ = "allocating " + Bytes(bytes) + " for the " + backend_.name + " memory pool failed" +
               (why.empty() ? "" : ": " + why);
    return nullptr;
  }
  ++extensions_;
  in_use_[block] = bytes;
  in_use_bytes_ += bytes;
  if (in_use_bytes_ > peak_in_use_) peak_in_use_ = in_use_bytes_;
  return block;
}

void DevicePool::Free(void* block) {
  if (!block) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_use_.find(block);
  if (it == in_use_.end()) return;  // not ours: nothing to do (never free what we did not hand out)
  const size_t size = it->second;
  in_use_.erase(it);
  in_use_bytes_ -= size;
  kept_.emplace(size, block);
  kept_bytes_ += size;
}

size_t DevicePool::Release() {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t before = kept_bytes_;
  GiveBackKeptLocked();
  return before;
}

void DevicePool::GiveBackKeptLocked() {
  for (auto& [size, block] : kept_) {
    backend_.free(block);
    ++shrinks_;
  }
  kept_.clear();
  kept_bytes_ = 0;
}

ArenaStats DevicePool::Stats(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  ArenaStats a;
  a.name = name;
  a.reserved = static_cast<int64_t>(in_use_bytes_ + kept_bytes_);
  a.in_use = static_cast<int64_t>(in_use_bytes_);
  a.peak_in_use = static_cast<int64_t>(peak_in_use_);
  a.limit = cap_ ? static_cast<int64_t>(cap_) : -1;
  a.regions = static_cast<int64_t>(in_use_.size() + kept_.size());
  a.extensions = extensions_;
  a.shrinks = shrinks_;
  a.allocations = allocations_;
  return a;
}

std::string DevicePool::TakeFailure() {
  std::lock_guard<std::mutex> lock(mu_);
  std::string f;
  f.swap(failure_);
  return f;
}

}  // namespace ebb::detail
