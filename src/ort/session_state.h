// Internal: what a Session holds. Built by the Runtime (runtime.cc), used by
// the run boundary (session.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "arena_gate.h"
#include "ebb/session.h"
#include "ebb/tensor.h"
#include "file_access.h"
#include "ort_context.h"

struct OrtValue;  // ONNX Runtime's C API

namespace ebb::detail {

// Output shapes seen for given input shapes, so that the next run with the
// same input shapes can write its outputs into caller-owned buffers.
class OutputShapeCache {
 public:
  static constexpr size_t kMaxEntries = 256;

  bool Find(const std::vector<Shape>& input_shapes, std::vector<Shape>* output_shapes) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = shapes_.find(input_shapes);
    if (it == shapes_.end()) return false;
    *output_shapes = it->second;
    return true;
  }
  void Insert(const std::vector<Shape>& input_shapes, std::vector<Shape> output_shapes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (shapes_.size() >= kMaxEntries) shapes_.clear();
    shapes_[input_shapes] = std::move(output_shapes);
  }

 private:
  mutable std::mutex mu_;
  std::map<std::vector<Shape>, std::vector<Shape>> shapes_;  // guarded by mu_
};

struct OwnArena;  // ort_api.h

// ORT's wrappers of the CPU tensors a session's runs pass (OrtValues that point at ebb's memory
// and own none of it), kept for a later run that passes the same memory with the same type and
// shape: an output written into a buffer kept from the run before (Tensor::Reusable), an input
// decoded where the last request's was freed. Making a wrapper costs ORT about a dozen small
// allocations and frees; looking one up costs a lock. A wrapper is lent to one run at a time and
// only ever for the (address, type, shape) it was made for, so one found for memory that was
// freed and handed out again is exactly what a new one would be: it reads nothing until a run
// passes it, and then the caller's memory is there. It holds no arena memory (ORT allocates
// wrappers with the heap), so keeping it changes nothing a release gives back. Where the memory is
// new at every run (a server whose requests are decoded on one thread and freed on another), none
// is ever found again: after kMissesBeforePause lends in a row that found none, only every
// kProbeEvery-th lend looks (and keeps what it makes), until one finds its wrapper again.
// Thread safety: Lend and GiveBack may be called concurrently.
class TensorWrappers {
 public:
  static constexpr size_t kSlots = 8;
  static constexpr uint32_t kMissesBeforePause = 16;
  static constexpr uint32_t kProbeEvery = 64;

  TensorWrappers() = default;
  ~TensorWrappers();  // releases the kept wrappers (no run holds one then)
  TensorWrappers(const TensorWrappers&) = delete;
  TensorWrappers& operator=(const TensorWrappers&) = delete;

  // A wrapper of `t` (CPU memory, a fixed-size type) for one run, a kept one when one that no run
  // holds matches, else made (and kept when a slot is free of runs, replacing the least recently
  // used). *kept says whether it is a kept one (GiveBack it after the run) or the caller's to
  // release. Throws Ort::Exception when ORT cannot make it.
  OrtValue* Lend(const Tensor& t, bool* kept);
  // The run that was lent `values` (each a kept wrapper) ended.
  void GiveBack(const OrtValue* const* values, size_t count);

 private:
  struct Slot {
    OrtValue* value = nullptr;  // owned
    const std::byte* data = nullptr;
    DataType type = DataType::kFloat32;
    Shape shape;
    bool lent = false;
    uint64_t used = 0;  // the lend count at its last use (least recently used goes first)
  };
  std::mutex mu_;
  Slot slots_[kSlots];  // guarded by mu_
  uint64_t lends_ = 0;  // guarded by mu_
  std::atomic<uint32_t> misses_{0};  // lends in a row that found no kept wrapper
};

struct SessionState {
  SessionState() = default;
  // Destroys the ORT session, unmaps its model, and gives the freed heap back
  // to the OS (an unload or eviction returns memory, not only ORT's counters).
  ~SessionState();
  SessionState(const SessionState&) = delete;
  SessionState& operator=(const SessionState&) = delete;

  std::shared_ptr<RuntimeContext> ctx;
  // The optimized model the session was created from, when it came from the
  // optimized-model cache: ORT's weights point into these bytes (the entry
  // mapped under a guard, or a private copy of it), so they must outlive
  // `session`.
  std::shared_ptr<FileBytes> model_bytes;
  std::unique_ptr<Ort::Session> session;
  LoadRecord load;
  std::string name;
  std::string source_path;
  ResolvedDevice device;
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
  std::vector<const char*> input_names;   // point into `inputs`
  std::vector<const char*> output_names;  // point into `outputs`
  std::map<std::string, std::string> metadata;
  // Every output shape is fully known from the model; false once a run proved a declared shape
  // wrong (the model's declaration, not ORT's computation, was off: such a model still runs).
  std::atomic<bool> static_output_shapes{false};
  std::vector<Shape> output_shapes;  // outputs[i].shape, in one vector (the runs' known shapes)
  bool has_bytes_outputs = false;     // an output is a string tensor (never written into caller buffers)

  // The arenas runs of this session allocate from, shared ones included.
  std::vector<std::shared_ptr<ArenaGate>> gates;
  std::vector<OwnArena> own_arenas;
  std::string arena_desc;  // for error messages: "shared CPU arena (cap 12.0 GiB)"
  // `cuda.arena: env_allocator`: the device's pool (owned by ctx), given back when a run ends its
  // operation; ORT cannot shrink it, so it has no gate.
  DevicePool* device_pool = nullptr;
  // The device's shared CUDA arena or pool the runs allocate from ("gpu:0:shared"), or "".
  std::string shared_device_arena;
  // `cuda.arena: shared`: the device's arena (owned by the env) and its gate (one of `gates`).
  // ORT's shrink list finds no arena for it (the provider keeps its arena inside the allocator it
  // hands to CreateSharedAllocator, measured with ORT 1.29 on an H200), so a run that carries its
  // release leaves it out of ORT's list and shrinks the allocator itself after the run
  // (OrtAllocator::Shrink, ORT 1.25+).
  OrtAllocator* device_arena = nullptr;
  const ArenaGate* device_arena_gate = nullptr;

  OutputShapeCache shape_cache;
  TensorWrappers wrappers;  // for the runs' inputs and preallocated outputs
  std::atomic<bool> shape_cache_usable{true};  // false once a cached shape proved wrong

  std::atomic<uint64_t> runs{0};
  std::atomic<uint64_t> releases{0};
  std::atomic<int> in_flight{0};
  // Under ReleaseMode::kIdle: it ran since the last idle release (IdleReleaser), and the releaser's
  // count of runs at its last one.
  std::atomic<bool> idle_ran{false};
  std::atomic<uint64_t> idle_last_run{0};

  // Called after a run failed with kResourceExhausted (drops the session from
  // its cache) with the name of the Session that ran. Set once by the Runtime
  // before the session is published.
  std::function<void(const std::string& name)> on_exhausted;

  // The Sessions handed out under other names for this loaded model (same
  // content): one per name while it is held, so that loads under one name
  // keep returning one object (Runtime::Load).
  mutable std::mutex handles_mu;
  std::map<std::string, std::weak_ptr<Session>> handles;  // guarded by handles_mu
  // Every model file it was loaded from (copies of one content are one model):
  // Runtime::Unload(path) drops it by any of them.
  std::set<std::string> source_paths;  // guarded by handles_mu
};

}  // namespace ebb::detail
