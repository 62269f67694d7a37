#include "ort_context.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <regex>
#include <type_traits>

#include "ebb/tensor.h"
#include "log.h"
#include "cuda_runtime.h"
#include "ort_api.h"
#include "port.h"

namespace ebb::detail {

// port.h names ONNX Runtime's path character without including its headers.
static_assert(std::is_same_v<port::OrtChar, ORTCHAR_T>);

namespace {

// Only one Runtime at a time may own the process-wide env arena: ORT's env
// is a process singleton and holds one CPU allocator registration.
std::atomic<bool> g_shared_arena_owned{false};

// --- A hand-written ONNX model: y = Identity(x), x float[1]. -----------------
// It exists only to make a shrinking run over the shared arena ("trim now");
// ORT has no other public way to shrink an arena. Protobuf wire format:
// key = field << 3 | wire type (0 varint, 2 length-delimited).
std::string Varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  s += static_cast<char>(v);
  return s;
}
std::string VarintField(int field, uint64_t v) { return Varint(field << 3) + Varint(v); }
std::string BytesField(int field, const std::string& bytes) {
  return Varint(field << 3 | 2) + Varint(bytes.size()) + bytes;
}

std::string TrimModelBytes() {
  // ValueInfoProto{name, type{tensor_type{elem_type=FLOAT, shape{dim{dim_value=1}}}}}
  auto value_info = [](const std::string& name) {
    std::string shape = BytesField(1, VarintField(1, 1));
    std::string tensor_type = VarintField(1, 1) + BytesField(2, shape);
    return BytesField(1, name) + BytesField(2, BytesField(1, tensor_type));
  };
  std::string node = BytesField(1, "x") + BytesField(2, "y") + BytesField(4, "Identity");
  std::string graph = BytesField(1, node) + BytesField(2, "ebb_trim") + BytesField(11, value_info("x")) +
                      BytesField(12, value_info("y"));
  std::string opset = BytesField(1, "") + VarintField(2, 13);
  return VarintField(1, 8) + BytesField(7, graph) + BytesField(8, opset);
}

std::unordered_map<std::string, size_t> ArenaConfig(const ArenaPolicy& a, size_t cap) {
  return {{"max_mem", cap},
          {"arena_extend_strategy", a.extend_strategy == ExtendStrategy::kSameAsRequested ? 1u : 0u},
          {"initial_chunk_size_bytes", a.initial_chunk_bytes},
          {"initial_growth_chunk_size_bytes", a.initial_growth_chunk_bytes},
          {"max_dead_bytes_per_chunk", a.max_dead_bytes_per_chunk}};
}

int64_t StatValue(const std::unordered_map<std::string, std::string>& stats, const char* key) {
  auto it = stats.find(key);
  return it == stats.end() ? 0 : std::stoll(it->second);
}

// --- The CUDA device through ORT's device API ----------------------------------------------------

constexpr const char* kCudaRegistration = "ebb_cuda";
constexpr const char* kCudaEpName = "CUDAExecutionProvider";

// Only one Runtime at a time may own a device's shared arena or pool: they live in ORT's one env,
// and a second CreateSharedAllocator for the device would replace the first under its sessions.
std::mutex g_cuda_owners_mu;
std::map<int, const void*> g_cuda_owners;  // device index -> owning RuntimeContext

// The arena options of CreateSharedAllocator (ORT's OrtArenaCfg keys, "arena.*"). No max_mem
// without a cap: ORT reads 0 as a cap of nothing.
Ort::KeyValuePairs SharedArenaOptions(const ArenaPolicy& a) {
  Ort::KeyValuePairs kv;
  kv.Add("arena.extend_strategy", a.extend_strategy == ExtendStrategy::kSameAsRequested ? "1" : "0");
  kv.Add("arena.initial_chunk_size_bytes", std::to_string(a.initial_chunk_bytes).c_str());
  kv.Add("arena.initial_growth_chunk_size_bytes", std::to_string(a.initial_growth_chunk_bytes).c_str());
  kv.Add("arena.max_dead_bytes_per_chunk", std::to_string(a.max_dead_bytes_per_chunk).c_str());
  if (a.max_bytes) kv.Add("arena.max_mem", std::to_string(a.max_bytes).c_str());
  return kv;
}

// The OrtEpDevices of the CUDA provider, in ORT's order, and the one for cuda:`index`: the device
// whose options or metadata name that `device_id`, else the index-th (ORT lists one per GPU, in
// the CUDA ordinal's order).
const OrtEpDevice* FindCudaEpDevice(const Ort::Env& env, int index, size_t* count) {
  std::vector<Ort::ConstEpDevice> cuda;
  for (const Ort::ConstEpDevice& d : env.GetEpDevices()) {
    if (std::strcmp(d.EpName(), kCudaEpName) == 0) cuda.push_back(d);
  }
  *count = cuda.size();
  const std::string wanted = std::to_string(index);
  for (const Ort::ConstEpDevice& d : cuda) {
    for (const Ort::ConstKeyValuePairs& kv : {d.EpOptions(), d.EpMetadata()}) {
      const char* id = kv ? kv.GetValue("device_id") : nullptr;
      if (id && wanted == id) return d;
    }
  }
  return index >= 0 && static_cast<size_t>(index) < cuda.size() ? static_cast<const OrtEpDevice*>(cuda[index]) : nullptr;
}

// ebb's DevicePool as an ORT allocator (RegisterAllocator): what `cuda.arena: env_allocator` puts
// in the env for the device's memory.
struct PoolAllocator : OrtAllocator {
  DevicePool* pool = nullptr;
  const OrtMemoryInfo* info = nullptr;  // the device's memory info, owned by its OrtEpDevice
  std::string name;
};

void* ORT_API_CALL PoolAlloc(OrtAllocator* self, size_t size) { return static_cast<PoolAllocator*>(self)->pool->Allocate(size); }
void ORT_API_CALL PoolFree(OrtAllocator* self, void* p) { static_cast<PoolAllocator*>(self)->pool->Free(p); }
const OrtMemoryInfo* ORT_API_CALL PoolInfo(const OrtAllocator* self) { return static_cast<const PoolAllocator*>(self)->info; }
OrtStatus* ORT_API_CALL PoolStats(const OrtAllocator* self, OrtKeyValuePairs** out) noexcept {
  const auto* a = static_cast<const PoolAllocator*>(self);
  const ArenaStats s = a->pool->Stats(a->name);
  const OrtApi& api = Ort::GetApi();
  api.CreateKeyValuePairs(out);
  for (const auto& [key, value] : {std::pair<const char*, int64_t>{"Limit", s.limit}, {"InUse", s.in_use},
                                   {"TotalAllocated", s.reserved}, {"MaxInUse", s.peak_in_use},
                                   {"NumAllocs", s.allocations}, {"NumArenaExtensions", s.regions},
                                   {"NumArenaShrinkages", s.shrinks}}) {
    api.AddKeyValuePair(*out, key, std::to_string(value).c_str());
  }
  return nullptr;
}
OrtStatus* ORT_API_CALL PoolShrink(OrtAllocator* self) noexcept {
  static_cast<PoolAllocator*>(self)->pool->Release();
  return nullptr;
}

std::unique_ptr<OrtAllocator> NewPoolAllocator(DevicePool* pool, const OrtMemoryInfo* info, std::string name) {
  auto a = std::make_unique<PoolAllocator>();
  std::memset(static_cast<OrtAllocator*>(a.get()), 0, sizeof(OrtAllocator));
  a->version = ORT_API_VERSION;
  a->Alloc = PoolAlloc;
  a->Free = PoolFree;
  a->Info = PoolInfo;
  a->Reserve = PoolAlloc;
  a->GetStats = PoolStats;
  a->Shrink = PoolShrink;
  a->pool = pool;
  a->info = info;
  a->name = std::move(name);
  return a;
}

}  // namespace

std::string CudaProviderLibraryPath() {
  const std::string library = port::LibraryPathOf(OrtGetApiBase());
  if (library.empty()) return port::kCudaProviderLibraryName;
  // In the system's own separators (one kind, not ORT's '/' then '\\' on Windows): shown to people.
  return port::NativePath(port::Utf8FromPath(port::PathFromUtf8(library).parent_path()) + "/" +
                          port::kCudaProviderLibraryName);
}

std::string FormatBytes(int64_t bytes) {
  char buf[64];
  double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  } else if (b >= 1024.0 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024));
  } else if (b >= 1024.0) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(bytes));
  }
  return buf;
}

Status StatusFromMessage(OrtErrorCode code, const std::string& message, const std::string& where,
                         const std::string& arena_desc) {
  static const std::regex kCapReached(R"(Available memory of (\d+) is smaller than requested bytes of (\d+))");
  static const std::regex kAllocFailed(R"(Failed to allocate memory for requested buffer of size (\d+))");
  std::smatch m;
  if (std::regex_search(message, m, kCapReached)) {
    return ResourceExhausted(where + ": out of memory: the " + arena_desc + " cap was reached; requested " +
                             FormatBytes(std::stoll(m[2])) + " but only " + FormatBytes(std::stoll(m[1])) +
                             " was available (ORT: " + message + ")");
  }
  if (std::regex_search(message, m, kAllocFailed)) {
    return ResourceExhausted(where + ": out of memory: allocating " + FormatBytes(std::stoll(m[1])) + " in the " +
                             arena_desc + " failed (ORT: " + message + ")");
  }
  if (message.find("bad_alloc") != std::string::npos) {
    return ResourceExhausted(where + ": out of memory: the host could not allocate (std::bad_alloc) (ORT: " + message +
                             ")");
  }
  if (message.find("out of memory") != std::string::npos ||
      message.find("cudaMallocFromPoolAsync failed") != std::string::npos) {
    return ResourceExhausted(where + ": out of memory on the GPU (ORT: " + message + ")");
  }
  switch (code) {
    case ORT_INVALID_ARGUMENT:
    case ORT_INVALID_PROTOBUF:
    case ORT_INVALID_GRAPH:
    case ORT_NOT_IMPLEMENTED:
      return InvalidArgument(where + ": " + message);
    case ORT_NO_SUCHFILE:
      return NotFound(where + ": " + message);
    default:
      return Internal(where + ": " + message);
  }
}

Status StatusFromOrt(const Ort::Exception& e, const std::string& where, const std::string& arena_desc) {
  return StatusFromMessage(e.GetOrtErrorCode(), e.what(), where, arena_desc);
}

void InvokeOrtRun(const OrtRun& run) {
  Ort::RunOptions options;
  if (!run.shrink_spec.empty()) {
    options.AddConfigEntry(kOrtRunOptionsConfigEnableMemoryArenaShrinkage, run.shrink_spec.c_str());
  }
  Ort::ThrowOnError(Ort::GetApi().Run(*run.session, options, run.input_names, run.input_values, run.input_count,
                                      run.output_names, run.output_count, run.output_values));
}

void OptOutOfOrtTelemetry() { port::SetEnvUnlessSet("ORT_DISABLE_TELEMETRY", "1"); }

Result<std::shared_ptr<RuntimeContext>> RuntimeContext::Create(const MemoryPolicy& policy) {
  EBB_RETURN_IF_ERROR(port::CheckOrtLibrary());  // Windows: onnxruntime.dll is delay-loaded
  OptOutOfOrtTelemetry();
  if (policy.trim_heap_after_release) port::KeepHeapReturnable();
  std::shared_ptr<RuntimeContext> ctx(new RuntimeContext(policy));
  if (!policy.optimized_model_cache.enabled) {
    ctx->cache_problem_ = "the optimized-model cache is off in the policy";
  } else {
    const OptimizedModelCachePolicy& c = policy.optimized_model_cache;
    auto cache = OptimizedModelCache::Open(OptimizedModelCache::FolderFor(c), c.max_bytes);
    if (cache.ok()) {
      ctx->optimized_cache_ = std::move(cache).value();
    } else {
      ctx->cache_problem_ = "optimized-model cache off: " + cache.status().message();
      // A folder that cannot be used, or is refused, is worth saying; no folder at all (no HOME) is not.
      if (cache.status().code() == StatusCode::kFailedPrecondition) {
        LogWarning(ctx->cache_problem_ + "; models load from their files");
      } else {
        LogInfo(ctx->cache_problem_);
      }
    }
  }
  try {
    // One intra-op pool for all sessions (they are created with
    // DisablePerSessionThreads); runs are sequential, so no inter-op threads.
    Ort::ThreadingOptions threading;
    if (policy.intra_op_threads > 0) threading.SetGlobalIntraOpNumThreads(policy.intra_op_threads);
    threading.SetGlobalInterOpNumThreads(1);
    {
      const port::OrtStderrSilenced quiet;  // Windows: ORT's display-adapter probe prints past its logger
      ctx->env_ = std::make_unique<Ort::Env>(threading, ORT_LOGGING_LEVEL_FATAL, "ebb");
    }
    if (policy.cpu.arena != CpuArenaMode::kShared) return ctx;

    if (g_shared_arena_owned.exchange(true)) {
      return FailedPrecondition(
          "another ebb::Runtime in this process already owns the shared CPU arena; use one Runtime per process");
    }
    ctx->registered_ = true;
    const ArenaPolicy& a = policy.cpu.arena_settings;
    ctx->shared_cap_ = a.max_bytes ? a.max_bytes : static_cast<size_t>(PhysicalMemoryBytes() / 2);
    Ort::ArenaCfg cfg(ArenaConfig(a, ctx->shared_cap_));
    Ort::MemoryInfo info = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
    ctx->env_->CreateAndRegisterAllocator(info, cfg);

    Ort::SessionOptions options;
    options.DisablePerSessionThreads();
    options.AddConfigEntry(kOrtSessionOptionsConfigUseEnvAllocators, "1");
    std::string bytes = TrimModelBytes();
    ctx->trim_session_ = std::make_unique<Ort::Session>(*ctx->env_, bytes.data(), bytes.size(), options);
    ctx->shared_allocator_ = std::make_unique<Ort::Allocator>(*ctx->trim_session_, info);
    ctx->shared_gate_ = std::make_shared<ArenaGate>("cpu:0", /*can_trim=*/true);
    if (policy.release == ReleaseMode::kIdle) {
      ctx->idle_ = std::make_unique<IdleReleaser>(ctx.get(), std::chrono::milliseconds(policy.idle_release_ms));
    }
  } catch (const Ort::Exception& e) {
    return StatusFromOrt(e, "creating the ONNX Runtime environment", "shared CPU arena");
  }
  return ctx;
}

RuntimeContext::RuntimeContext(const MemoryPolicy& policy) : policy_(policy) {}

RuntimeContext::~RuntimeContext() {
  idle_.reset();
  // The device memory this Runtime made: its sessions are gone (each holds the context).
  for (auto& [index, d] : cuda_devices_) {
    try {
      if (d->shared_arena) env_->ReleaseSharedAllocator(d->ep_device, OrtDeviceMemoryType_DEFAULT);
      if (d->pool_allocator) env_->UnregisterAllocator(d->pool_allocator->Info(d->pool_allocator.get()));
    } catch (const Ort::Exception&) {
      // The env goes away with us, or another Runtime shares it: nothing to do.
    }
    std::lock_guard<std::mutex> owners(g_cuda_owners_mu);
    if (auto it = g_cuda_owners.find(index); it != g_cuda_owners.end() && it->second == this) g_cuda_owners.erase(it);
  }
  cuda_devices_.clear();
  shared_allocator_.reset();  // it belongs to the trim session
  trim_session_.reset();
  if (registered_) {
    try {
      env_->UnregisterAllocator(Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault));
    } catch (const Ort::Exception&) {
      // Nothing to do: the env goes away with us, or sessions still hold it.
    }
    g_shared_arena_owned = false;
  }
}

Status RuntimeContext::TrimSharedArena() {
  if (!trim_session_) return FailedPrecondition("no shared CPU arena to trim");
  float in = 0.f, out = 0.f;
  Ort::MemoryInfo host = Ort::MemoryInfo::CreateCpu(OrtDeviceAllocator, OrtMemTypeDefault);
  int64_t shape[1] = {1};
  Ort::Value input = Ort::Value::CreateTensor<float>(host, &in, 1, shape, 1);
  Ort::Value output = Ort::Value::CreateTensor<float>(host, &out, 1, shape, 1);
  const char* in_name = "x";
  const char* out_name = "y";
  try {
    const OrtValue* in_value = input;
    OrtValue* out_value = output;
    InvokeOrtRun({trim_session_.get(), &in_name, &in_value, 1, &out_name, &out_value, 1, shared_gate_->spec()});
  } catch (const Ort::Exception& e) {
    return StatusFromOrt(e, "trimming the shared CPU arena", "shared CPU arena");
  }
  TrimHeap();
  return Status::Ok();
}

std::optional<std::string> RuntimeContext::cuda_unavailable() const {
  std::lock_guard<std::mutex> lock(cuda_mu_);
  return cuda_unavailable_;
}

void RuntimeContext::set_cuda_unavailable(const std::string& reason) {
  std::lock_guard<std::mutex> lock(cuda_mu_);
  cuda_unavailable_ = reason;
}

Result<const CudaDevice*> RuntimeContext::CudaDeviceFor(int index, const std::string& library) {
  std::lock_guard<std::mutex> lock(cuda_mu_);
  if (cuda_unavailable_) return Unavailable(*cuda_unavailable_);
  if (auto it = cuda_devices_.find(index); it != cuda_devices_.end()) return it->second.get();
  size_t count = 0;
  if (!cuda_library_registered_) {
    try {
      env_->RegisterExecutionProviderLibrary(kCudaRegistration, port::OrtPath(library));
    } catch (const Ort::Exception& e) {
      // Registered already in this env (by another Runtime sharing ORT's one env) is no failure.
      if (!FindCudaEpDevice(*env_, index, &count) && count == 0) {
        cuda_unavailable_ = std::string("RegisterExecutionProviderLibrary: ") + e.what();
        return Unavailable(*cuda_unavailable_);
      }
    }
    cuda_library_registered_ = true;
  }
  const OrtEpDevice* ep_device = nullptr;
  try {
    ep_device = FindCudaEpDevice(*env_, index, &count);
  } catch (const Ort::Exception& e) {
    return Unavailable(std::string("GetEpDevices: ") + e.what());
  }
  if (!ep_device) {
    // About this index only (CUDA may serve another): not recorded for every device.
    return Unavailable("the CUDA provider lists " + std::to_string(count) + " device(s); there is no cuda:" +
                       std::to_string(index) + " (invalid device ordinal)");
  }
  auto device = std::make_unique<CudaDevice>();
  device->index = index;
  device->ep_device = ep_device;
  const ArenaPolicy& a = policy_.cuda.arena_settings;
  device->cap = a.max_bytes;
  const std::string gpu = "gpu:" + std::to_string(index);
  {
    std::lock_guard<std::mutex> owners(g_cuda_owners_mu);
    auto [it, inserted] = g_cuda_owners.emplace(index, this);
    if (!inserted && it->second != this) {
      device->refused = "another ebb::Runtime in this process owns the shared memory of cuda:" + std::to_string(index);
    }
  }
  if (device->refused.empty() && policy_.cuda.arena == CudaArenaMode::kShared) {
    try {
      Ort::UnownedAllocator arena =
          env_->CreateSharedAllocator(ep_device, OrtDeviceMemoryType_DEFAULT, OrtDeviceAllocator, SharedArenaOptions(a));
      device->shared_arena = arena;
      device->arena_name = gpu + ":shared";
      device->gate = std::make_shared<ArenaGate>(gpu, /*can_trim=*/false);
    } catch (const Ort::Exception& e) {
      device->refused = std::string("CreateSharedAllocator refused the CUDA device: ") + e.what();
    }
  } else if (device->refused.empty() && policy_.cuda.arena == CudaArenaMode::kEnvAllocator) {
    const OrtMemoryInfo* info = Ort::GetApi().EpDevice_MemoryInfo(ep_device, OrtDeviceMemoryType_DEFAULT);
    Result<DevicePool::Backend> backend = CudaRuntimeBackend(index);
    if (!info) {
      device->refused = "the CUDA device names no device memory (EpDevice_MemoryInfo)";
    } else if (!backend.ok()) {
      device->refused = backend.status().message();
    } else {
      device->pool = std::make_unique<DevicePool>(std::move(backend).value(), a.max_bytes);
      device->arena_name = gpu + ":pool";
      device->pool_allocator = NewPoolAllocator(device->pool.get(), info, device->arena_name);
      try {
        try {
          env_->RegisterAllocator(device->pool_allocator.get());
        } catch (const Ort::Exception&) {
          // The device's default shared allocator (made when the library was registered) holds
          // that memory info: release it, then register ours in its place.
          env_->ReleaseSharedAllocator(ep_device, OrtDeviceMemoryType_DEFAULT);
          env_->RegisterAllocator(device->pool_allocator.get());
        }
      } catch (const Ort::Exception& e) {
        device->refused = std::string("RegisterAllocator refused the pool: ") + e.what();
        device->pool_allocator.reset();
        device->pool.reset();
        device->arena_name.clear();
      }
    }
  }
  if (!device->refused.empty()) {
    LogWarning("cuda:" + std::to_string(index) + ": no " + CudaArenaModeName(policy_.cuda.arena) +
               " CUDA memory (" + device->refused + "); its CUDA sessions get their own arenas");
  }
  const CudaDevice* made = device.get();
  cuda_devices_[index] = std::move(device);
  return made;
}

std::vector<ArenaStats> RuntimeContext::ReadCudaArenas() const {
  std::vector<ArenaStats> arenas;
  std::lock_guard<std::mutex> lock(cuda_mu_);
  for (const auto& [index, d] : cuda_devices_) {
    if (d->shared_arena) {
      if (auto a = ReadArenaStats(d->shared_arena, d->arena_name)) arenas.push_back(*a);
    } else if (d->pool) {
      arenas.push_back(d->pool->Stats(d->arena_name));
    }
  }
  return arenas;
}

void RuntimeContext::ReleaseDevicePools() {
  std::lock_guard<std::mutex> lock(cuda_mu_);
  for (const auto& [index, d] : cuda_devices_) {
    if (d->pool) d->pool->Release();
  }
}

void RuntimeContext::TrimHeap(bool force) {
  // Every path that gives memory back comes here (a releasing run, Runtime::Trim, an operation that
  // failed or was cancelled, an unload): the output buffers kept for the next run go too.
  OutputBuffers::Drop();
  if (force) ReleaseDevicePools();
  if (!policy_.trim_heap_after_release) return;
  if (!force) {
    if (std::optional<int64_t> shrinks = SharedArenaShrinks()) {
      if (shrinks_at_last_heap_trim_.exchange(*shrinks) == *shrinks) return;  // nothing was freed
    }
  }
  port::TrimHeap();
}

std::optional<int64_t> RuntimeContext::SharedArenaShrinks() const {
  if (!shared_allocator_) return std::nullopt;
  try {
    // One value of the arena's statistics: this runs after every releasing run, where reading
    // them all (a fresh allocator handle, a map of strings) cost ~25,000 instructions, five
    // times a tiny model's whole run boundary.
    const Ort::KeyValuePairs stats = shared_allocator_->GetStats();
    const char* shrinks = stats.GetValue("NumArenaShrinkages");
    if (shrinks == nullptr) return std::nullopt;
    return std::strtoll(shrinks, nullptr, 10);
  } catch (const Ort::Exception&) {
    return std::nullopt;
  }
}

std::optional<ArenaStats> RuntimeContext::ReadSharedArena() const {
  if (!shared_allocator_) return std::nullopt;
  return ReadArenaStats(*shared_allocator_, "cpu:shared");
}

std::optional<ArenaStats> ReadArenaStats(const Ort::Session& session, const Ort::MemoryInfo& info,
                                         const std::string& name) {
  try {
    Ort::Allocator allocator(session, info);
    return ReadArenaStats(allocator, name);
  } catch (const Ort::Exception&) {
    return std::nullopt;
  }
}

std::optional<ArenaStats> ReadArenaStats(const OrtAllocator* allocator, const std::string& name) {
  try {
    OrtKeyValuePairs* raw = nullptr;
    Ort::ThrowOnError(Ort::GetApi().AllocatorGetStats(allocator, &raw));
    if (!raw) return std::nullopt;  // an allocator with nothing to say (a provider's may answer so)
    auto stats = Ort::KeyValuePairs(raw).GetKeyValuePairs();
    if (stats.empty()) return std::nullopt;  // not an arena
    ArenaStats a;
    a.name = name;
    a.reserved = StatValue(stats, "TotalAllocated");
    a.in_use = StatValue(stats, "InUse");
    a.peak_in_use = StatValue(stats, "MaxInUse");
    a.limit = StatValue(stats, "Limit");
    a.regions = StatValue(stats, "NumArenaExtensions");
    a.shrinks = StatValue(stats, "NumArenaShrinkages");
    a.extensions = a.regions + a.shrinks;
    a.allocations = StatValue(stats, "NumAllocs");
    return a;
  } catch (const Ort::Exception&) {
    return std::nullopt;
  }
}

}  // namespace ebb::detail
