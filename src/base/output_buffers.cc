// Output buffers the run boundary writes into, kept for the next run of the same operation
// (ebb/tensor.h, detail::OutputBuffers; public as Tensor::Reusable and ReusableBufferScope). A tensor's bytes of 128 KiB and more are mmap'd by
// glibc (ebb fixes its threshold, ort_context.cc), so a fresh output buffer costs one page fault
// per 4 KiB page on every run, where plain ORT writes its outputs into arena pages it already
// touched. A buffer given back by its tensor is kept here (a few, bounded) and handed to the next
// run that needs one of the same size, until the next release, which frees them all.
#include <array>
#include <atomic>
#include <mutex>

#include "ebb/tensor.h"

namespace ebb::detail {
namespace {

constexpr size_t kMinBytes = 128 * 1024;             // below: glibc's heap serves warm memory itself
constexpr size_t kMaxKeptBytes = size_t{256} << 20;  // kept at most, all buffers together
constexpr size_t kMaxKept = 8;

struct Kept {
  std::byte* data = nullptr;
  size_t bytes = 0;
};

struct Buffers {
  std::mutex mu;
  std::array<Kept, kMaxKept> kept{};  // guarded by mu
  size_t kept_bytes = 0;              // guarded by mu
  std::atomic<uint64_t> epoch{1};     // bumped by every Drop(): older buffers are not kept
};

Buffers& Get() {
  static Buffers* buffers = new Buffers();  // never destroyed: tensors may be freed during exit
  return *buffers;
}

}  // namespace

std::byte* OutputBuffers::Take(size_t bytes, uint64_t* epoch) {
  Buffers& b = Get();
  *epoch = b.epoch.load(std::memory_order_acquire);
  if (bytes >= kMinBytes) {
    std::lock_guard<std::mutex> lock(b.mu);
    for (Kept& k : b.kept) {
      if (k.data && k.bytes == bytes) {
        std::byte* data = k.data;
        k = Kept{};
        b.kept_bytes -= bytes;
        return data;
      }
    }
  }
  return new std::byte[bytes];
}

void OutputBuffers::Give(std::byte* data, size_t bytes, uint64_t epoch) noexcept {
  Buffers& b = Get();
  if (bytes >= kMinBytes && epoch == b.epoch.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(b.mu);
    // Checked again under the lock: a Drop() between the two frees what it finds, so a buffer
    // kept after it would outlive the release.
    if (epoch == b.epoch.load(std::memory_order_relaxed) && b.kept_bytes + bytes <= kMaxKeptBytes) {
      for (Kept& k : b.kept) {
        if (!k.data) {
          k = Kept{data, bytes};
          b.kept_bytes += bytes;
          return;
        }
      }
    }
  }
  delete[] data;
}

void OutputBuffers::Drop() noexcept {
  Buffers& b = Get();
  std::array<Kept, kMaxKept> dropped{};
  {
    std::lock_guard<std::mutex> lock(b.mu);
    b.epoch.fetch_add(1, std::memory_order_acq_rel);
    dropped.swap(b.kept);
    b.kept_bytes = 0;
  }
  for (const Kept& k : dropped) delete[] k.data;
}

size_t OutputBuffers::kept_bytes() {
  Buffers& b = Get();
  std::lock_guard<std::mutex> lock(b.mu);
  return b.kept_bytes;
}

}  // namespace ebb::detail

namespace ebb {

ReusableBufferScope::~ReusableBufferScope() {
  if (!keep_) detail::OutputBuffers::Drop();
}

}  // namespace ebb
