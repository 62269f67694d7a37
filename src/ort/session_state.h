// Internal: what a Session holds. Built by the Runtime (runtime.cc), used by
// the run boundary (session.cc).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "arena_gate.h"
#include "ebb/session.h"
#include "file_access.h"
#include "ort_context.h"

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
  std::atomic<bool> shape_cache_usable{true};  // false once a cached shape proved wrong

  std::atomic<uint64_t> runs{0};
  std::atomic<uint64_t> releases{0};
  std::atomic<int> in_flight{0};
  // Under ReleaseMode::kIdle: it ran since the last idle release (IdleReleaser).
  std::atomic<bool> idle_ran{false};

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
