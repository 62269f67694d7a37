#include "session_factory.h"

#include <chrono>
#include <filesystem>

#include "log.h"
#include "ort_api.h"
#include "port.h"

namespace ebb::detail {
namespace {

// The policy's session options, at graph optimization `level` (the model's: LoadOptions, else the policy's).
Ort::SessionOptions BaseOptions(const MemoryPolicy& policy, GraphOptimization level) {
  Ort::SessionOptions options;
  options.DisablePerSessionThreads();  // the env's global pool (RuntimeContext::Create)
  options.SetGraphOptimizationLevel(ToOrtLevel(level));
  if (!policy.memory_pattern) options.DisableMemPattern();
  switch (policy.cpu.arena) {
    case CpuArenaMode::kShared:
      options.AddConfigEntry(kOrtSessionOptionsConfigUseEnvAllocators, "1");
      break;
    case CpuArenaMode::kPerSession:
      options.EnableCpuMemArena();
      break;
    case CpuArenaMode::kNone:
      options.DisableCpuMemArena();
      break;
  }
  if (policy.weights_outside_arena) {
    options.AddConfigEntry(kOrtSessionOptionsUseDeviceAllocatorForInitializers, "1");
  }
  return options;
}

OrtCudnnConvAlgoSearch ToOrt(ConvAlgoSearch search) {
  switch (search) {
    case ConvAlgoSearch::kExhaustive: return OrtCudnnConvAlgoSearchExhaustive;
    case ConvAlgoSearch::kHeuristic: return OrtCudnnConvAlgoSearchHeuristic;
    case ConvAlgoSearch::kDefault: return OrtCudnnConvAlgoSearchDefault;
  }
  return OrtCudnnConvAlgoSearchHeuristic;
}

// Appends the CUDA provider (the legacy OrtCUDAProviderOptions route: the only
// one the ORT 1.29 CPU core build offers) with the policy's arena settings.
void AppendCuda(Ort::SessionOptions& options, const CudaPolicy& policy, int device, Ort::ArenaCfg& arena_cfg) {
  const ArenaPolicy& a = policy.arena_settings;
  arena_cfg = Ort::ArenaCfg(std::unordered_map<std::string, size_t>{
      {"max_mem", a.max_bytes},
      {"arena_extend_strategy", a.extend_strategy == ExtendStrategy::kSameAsRequested ? 1u : 0u},
      {"initial_chunk_size_bytes", a.initial_chunk_bytes},
      {"initial_growth_chunk_size_bytes", a.initial_growth_chunk_bytes},
      {"max_dead_bytes_per_chunk", a.max_dead_bytes_per_chunk}});
  OrtCUDAProviderOptions cuda;
  cuda.device_id = device;
  cuda.cudnn_conv_algo_search = ToOrt(policy.conv_algo_search);
  cuda.gpu_mem_limit = a.max_bytes ? a.max_bytes : SIZE_MAX;
  cuda.arena_extend_strategy = a.extend_strategy == ExtendStrategy::kSameAsRequested ? 1 : 0;
  cuda.do_copy_in_default_stream = 1;
  cuda.default_memory_arena_cfg = arena_cfg;
  if (policy.conv_use_max_workspace) {
    LogWarning("cuda.conv_use_max_workspace is not settable through the legacy CUDA options of this ORT build");
  }
  options.AppendExecutionProvider_CUDA(cuda);
}

// Appends the CUDA provider through ORT's device API (`cuda.arena` shared or env_allocator): the
// device's OrtEpDevice, with the CUDA provider's options as text. With the device's shared arena
// or pool in the env, the session takes it (session.use_env_allocators); the options' arena
// settings then only shape an arena of its own where ORT refused the shared one.
void AppendCudaDevice(Ort::SessionOptions& options, Ort::Env& env, const CudaDevice& device, const CudaPolicy& policy) {
  const ArenaPolicy& a = policy.arena_settings;
  std::unordered_map<std::string, std::string> cuda = {
      {"device_id", std::to_string(device.index)},
      {"arena_extend_strategy",
       a.extend_strategy == ExtendStrategy::kSameAsRequested ? "kSameAsRequested" : "kNextPowerOfTwo"},
      {"cudnn_conv_algo_search", policy.conv_algo_search == ConvAlgoSearch::kExhaustive  ? "EXHAUSTIVE"
                                 : policy.conv_algo_search == ConvAlgoSearch::kHeuristic ? "HEURISTIC"
                                                                                          : "DEFAULT"},
      {"cudnn_conv_use_max_workspace", policy.conv_use_max_workspace ? "1" : "0"},
      {"do_copy_in_default_stream", "1"}};
  if (a.max_bytes) cuda["gpu_mem_limit"] = std::to_string(a.max_bytes);
  if (device.shared_arena || device.pool) options.AddConfigEntry(kOrtSessionOptionsConfigUseEnvAllocators, "1");
  options.AppendExecutionProvider_V2(env, {Ort::ConstEpDevice(device.ep_device)}, cuda);
}

// Whether a CUDA failure is about the one device index asked for (CUDA's "invalid device ordinal",
// ORT's own "Invalid device ID"), not about CUDA on this machine: such a failure must not make the
// context give up on CUDA for every device.
bool NamesOneDevice(const std::string& reason) {
  return reason.find("invalid device ordinal") != std::string::npos ||
         reason.find("Invalid device ID") != std::string::npos;
}

Result<TensorInfo> Describe(const std::string& name, const Ort::TypeInfo& type_info) {
  if (type_info.GetONNXType() != ONNX_TYPE_TENSOR) {
    return InvalidArgument("'" + name + "' is not a tensor; ebb serves tensor inputs and outputs only");
  }
  auto tensor = type_info.GetTensorTypeAndShapeInfo();
  std::optional<DataType> type = FromOnnxType(tensor.GetElementType());
  if (!type) {
    return InvalidArgument("'" + name + "' has an element type ebb does not support (ONNX element type " +
                           std::to_string(static_cast<int>(tensor.GetElementType())) + ")");
  }
  return TensorInfo{name, *type, tensor.GetShape()};
}

Status FillSignature(SessionState& s) {
  Ort::AllocatorWithDefaultOptions allocator;
  for (size_t i = 0; i < s.session->GetInputCount(); ++i) {
    std::string name = s.session->GetInputNameAllocated(i, allocator).get();
    Ort::TypeInfo info = s.session->GetInputTypeInfo(i);
    Result<TensorInfo> t = Describe(name, info);
    if (!t.ok()) return t.status();
    s.inputs.push_back(*t);
  }
  bool static_shapes = true;
  for (size_t i = 0; i < s.session->GetOutputCount(); ++i) {
    std::string name = s.session->GetOutputNameAllocated(i, allocator).get();
    Ort::TypeInfo info = s.session->GetOutputTypeInfo(i);
    Result<TensorInfo> t = Describe(name, info);
    if (!t.ok()) return t.status();
    for (int64_t d : t->shape) static_shapes &= d >= 0;
    s.has_bytes_outputs |= t->type == DataType::kBytes;
    s.outputs.push_back(*t);
  }
  s.static_output_shapes = static_shapes;
  for (const TensorInfo& t : s.inputs) s.input_names.push_back(t.name.c_str());
  for (const TensorInfo& t : s.outputs) s.output_names.push_back(t.name.c_str());
  for (const TensorInfo& t : s.outputs) s.output_shapes.push_back(t.shape);
  Ort::ModelMetadata metadata = s.session->GetModelMetadata();
  for (auto& key : metadata.GetCustomMetadataMapKeysAllocated(allocator)) {
    auto value = metadata.LookupCustomMetadataMapAllocated(key.get(), allocator);
    s.metadata[key.get()] = value ? value.get() : "";
  }
  return Status::Ok();
}

// Records the arenas the session's runs allocate from, in the order their
// entries go into the shrink list (device arena first). `cuda` is the device
// through the device API, when the session was made that way.
void AttachArenas(SessionState& s, const CudaDevice* cuda) {
  const MemoryPolicy& policy = s.ctx->policy();
  if (cuda && cuda->gate) {
    s.gates.push_back(cuda->gate);  // the device's one shared arena: one gate for all its sessions
    s.shared_device_arena = cuda->arena_name;
    s.device_arena = cuda->shared_arena;
    s.device_arena_gate = cuda->gate.get();
  } else if (cuda && cuda->pool) {
    s.device_pool = cuda->pool.get();
    s.shared_device_arena = cuda->arena_name;
  } else if (cuda) {
    // Through the device API, an arena of its own (ORT refused the shared one): as per_session,
    // read through the device's own memory info.
    s.gates.push_back(std::make_shared<ArenaGate>("gpu:" + std::to_string(s.device.index), /*can_trim=*/false));
    // A copy of the device's own memory info: its name is the plugin's, which the legacy
    // CreateMemoryInfo refuses ("Specified device is not supported", measured on an H200 with 1.29).
    Ort::ConstMemoryInfo m(Ort::GetApi().EpDevice_MemoryInfo(cuda->ep_device, OrtDeviceMemoryType_DEFAULT));
    s.own_arenas.push_back({"gpu:" + std::to_string(s.device.index) + ":",
                            m ? Ort::MemoryInfo(m.GetAllocatorName().c_str(), m.GetDeviceType(), m.GetVendorId(),
                                                static_cast<uint32_t>(m.GetDeviceId()), m.GetDeviceMemoryType(),
                                                /*alignment=*/0, m.GetAllocatorType())
                              : Ort::MemoryInfo("Cuda", OrtArenaAllocator, s.device.index, OrtMemTypeDefault)});
  } else if (s.device.kind == DeviceKind::kCuda) {
    s.gates.push_back(std::make_shared<ArenaGate>("gpu:" + std::to_string(s.device.index), /*can_trim=*/false));
    s.own_arenas.push_back(
        {"gpu:" + std::to_string(s.device.index) + ":",
         Ort::MemoryInfo("Cuda", OrtArenaAllocator, s.device.index, OrtMemTypeDefault)});
  }
  switch (policy.cpu.arena) {
    case CpuArenaMode::kShared:
      s.gates.push_back(s.ctx->shared_cpu_gate());
      s.arena_desc = "shared CPU arena (cap " + FormatBytes(static_cast<int64_t>(s.ctx->shared_cap())) + ")";
      break;
    case CpuArenaMode::kPerSession:
      s.gates.push_back(std::make_shared<ArenaGate>("cpu:0", /*can_trim=*/false));
      s.own_arenas.push_back({"cpu:", Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault)});
      s.arena_desc = "per-session CPU arena";
      break;
    case CpuArenaMode::kNone:
      s.arena_desc = "CPU heap (no arena)";
      break;
  }
  if (s.device.kind != DeviceKind::kCuda) return;
  const std::string cap = cuda && cuda->cap ? " (cap " + FormatBytes(static_cast<int64_t>(cuda->cap)) + ")" : "";
  if (cuda && cuda->gate) {
    s.arena_desc = "shared CUDA arena of " + s.device.ToString() + cap;
  } else if (cuda && cuda->pool) {
    s.arena_desc = "CUDA memory pool of " + s.device.ToString() + cap;
  } else {
    s.arena_desc = "CUDA arena of " + s.device.ToString();
  }
}

std::unique_ptr<Ort::Session> NewSession(Ort::Env& env, const ModelSource& source,
                                         const Ort::SessionOptions& options) {
  if (source.bytes) return std::make_unique<Ort::Session>(env, source.bytes->data(), source.bytes->size(), options);
  return std::make_unique<Ort::Session>(env, port::OrtPath(source.path).c_str(), options);
}

// Whether the model file and its external-data files are still what was
// hashed (always true for bytes).
bool SourceUnchanged(const ModelSource& source) {
  if (source.bytes) return true;
  Result<FileIdentity> now = StatFile(source.path);
  return now.ok() && *now == source.identity && ExternalDataUnchanged(source.external);
}

Status ChangedWhileLoading(const ModelSource& source, const std::string& where) {
  return Unavailable(where + ": the model file '" + source.path + "'" +
                     (source.external.empty() ? "" : " or its external data") + " changed while it was being loaded");
}

// Creates the session from the verified cache entry for `key`, if there is
// one: ORT gets the entry's bytes (guarded mapping or private copy) directly
// (no copy of the weights, no re-optimization), and the bytes stay with the
// session: ORT's initializers point into them.
bool OpenFromCache(SessionState& s, OptimizedModelCache& cache, const OptimizedModelKey& key) {
  std::string why;
  std::shared_ptr<FileBytes> bytes = cache.Find(key, &why);
  if (!why.empty()) {
    s.load.optimized_cache_note = why;
    LogWarning("optimized-model cache: " + why + " for model '" + s.name + "'; it is loaded from its file");
  }
  if (!bytes) return false;
  Ort::SessionOptions options = BaseOptions(s.ctx->policy(), s.load.graph_optimization);
  options.SetGraphOptimizationLevel(ORT_DISABLE_ALL);  // optimized already
  options.AddConfigEntry(kOrtSessionOptionsConfigUseORTModelBytesDirectly, "1");
  options.AddConfigEntry(kOrtSessionOptionsConfigUseORTModelBytesForInitializers, "1");
  try {
    s.session = std::make_unique<Ort::Session>(s.ctx->env(), bytes->data(), bytes->size(), options);
  } catch (const Ort::Exception& e) {
    s.load.optimized_cache_note = std::string("ONNX Runtime refused the entry: ") + e.what();
    LogWarning("optimized-model cache: " + s.load.optimized_cache_note + "; model '" + s.name +
               "' is loaded from its file");
    cache.Remove(key);
    return false;
  }
  s.model_bytes = std::move(bytes);
  s.load.from_optimized_cache = true;
  return true;
}

// A first load through the cache: ORT optimizes the model and saves the
// result in ORT format; that file becomes the entry, and the session is then
// re-created from it, so that every CPU session of a model, first load or
// not, runs the same optimized model from the same kind of memory. Leaves
// s.session null when the model could not be loaded this way (the caller
// then loads it plainly); returns an error only for out-of-memory and a
// model file that changed.
Status CreateAndCache(SessionState& s, OptimizedModelCache& cache, const OptimizedModelKey& key,
                      const ModelSource& source, const std::string& where) {
  const std::string temporary = cache.TemporaryPath(key);
  Ort::SessionOptions options = BaseOptions(s.ctx->policy(), s.load.graph_optimization);
  options.SetOptimizedModelFilePath(port::OrtPath(temporary).c_str());
  options.AddConfigEntry(kOrtSessionOptionsConfigSaveModelFormat, "ORT");
  std::unique_ptr<Ort::Session> fresh;
  std::error_code ec;
  try {
    fresh = NewSession(s.ctx->env(), source, options);
  } catch (const Ort::Exception& e) {
    std::filesystem::remove(temporary, ec);
    Status st = StatusFromOrt(e, where, "CPU memory");
    if (st.code() == StatusCode::kResourceExhausted) return st;
    s.load.optimized_cache_note = "could not be optimized into the cache: " + st.message();
    cache.MarkUncacheable(key);  // a broken model fails again below, plainly; a model ORT cannot save loads
    return Status::Ok();
  }
  if (!SourceUnchanged(source)) {
    std::filesystem::remove(temporary, ec);
    return ChangedWhileLoading(source, where);
  }
  if (Status st = cache.Commit(key, temporary); !st.ok()) {
    s.load.optimized_cache_note = "not cached: " + st.message();
    LogInfo("optimized-model cache: model '" + s.name + "' " + s.load.optimized_cache_note);
    s.session = std::move(fresh);
    return Status::Ok();
  }
  s.load.wrote_optimized_cache = true;
  if (!OpenFromCache(s, cache, key)) {
    cache.MarkUncacheable(key);  // ORT refused what it wrote: do not try again in this process
    s.session = std::move(fresh);
  }
  return Status::Ok();
}

// The CPU session: through the optimized-model cache when there is one, else
// (or when the cache cannot serve this model) straight from the source.
Status CreateCpuSession(SessionState& s, const ModelSource& source, const SessionSpec& spec,
                        const std::string& where) {
  const MemoryPolicy& policy = s.ctx->policy();
  if (OptimizedModelCache* cache = s.ctx->optimized_cache()) {
    const OptimizedModelKey key{spec.model_sha256, GraphOptionsText(s.load.graph_optimization), Ort::GetVersionString(),
                                CpuFeaturesHash()};
    if (cache->IsUncacheable(key)) {
      s.load.optimized_cache_note = "this model could not go through the cache earlier in this process";
    } else if (!OpenFromCache(s, *cache, key)) {
      EBB_RETURN_IF_ERROR(CreateAndCache(s, *cache, key, source, where));
    }
  } else {
    s.load.optimized_cache_note = s.ctx->cache_problem();
  }
  if (s.session) return Status::Ok();
  try {
    s.session = NewSession(s.ctx->env(), source, BaseOptions(policy, s.load.graph_optimization));
  } catch (const Ort::Exception& e) {
    return StatusFromOrt(e, where, "CPU memory");
  }
  return SourceUnchanged(source) ? Status::Ok() : ChangedWhileLoading(source, where);
}

}  // namespace

GraphOptimizationLevel ToOrtLevel(GraphOptimization level) {
  switch (level) {
    case GraphOptimization::kDisabled: return ORT_DISABLE_ALL;
    case GraphOptimization::kBasic: return ORT_ENABLE_BASIC;
    case GraphOptimization::kExtended: return ORT_ENABLE_EXTENDED;
    case GraphOptimization::kAll: return ORT_ENABLE_ALL;
  }
  return ORT_ENABLE_EXTENDED;
}

std::string GraphOptionsText(GraphOptimization level) {
  return std::string("graph_optimization=") + GraphOptimizationName(level);
}

Result<std::unique_ptr<SessionState>> BuildSession(const std::shared_ptr<RuntimeContext>& ctx,
                                                   const ModelSource& source, const SessionSpec& spec) {
  const auto start = std::chrono::steady_clock::now();
  auto s = std::make_unique<SessionState>();
  s->ctx = ctx;
  s->name = spec.name;
  s->source_path = spec.source_path;
  s->load.graph_optimization = spec.graph_optimization;
  const std::string where = "loading model '" + spec.name + "'";
  const MemoryPolicy& policy = ctx->policy();

  const CudaDevice* cuda_device = nullptr;  // through the device API (cuda.arena shared, env_allocator)
  if (spec.device.kind != DeviceRequest::Kind::kCpu) {
    const int index = spec.device.index;
    std::string reason = ctx->cuda_unavailable().value_or("");
    Ort::SessionOptions options = BaseOptions(policy, spec.graph_optimization);
    Ort::ArenaCfg arena_cfg(nullptr);
    if (reason.empty() && policy.cuda.arena == CudaArenaMode::kPerSession) {
      try {
        AppendCuda(options, policy.cuda, index, arena_cfg);
      } catch (const Ort::Exception& e) {
        reason = e.what();  // no provider library: the same for every later load
        if (!NamesOneDevice(reason)) ctx->set_cuda_unavailable(reason);
      }
    } else if (reason.empty()) {
      // Registering the provider library fails at once and cleanly without a GPU or the CUDA
      // runtime (CudaDeviceFor records that for every later load); a missing index only for it.
      Result<const CudaDevice*> device = ctx->CudaDeviceFor(index);
      if (!device.ok()) {
        reason = device.status().message();
      } else {
        try {
          AppendCudaDevice(options, ctx->env(), **device, policy.cuda);
          cuda_device = *device;
        } catch (const Ort::Exception& e) {
          reason = std::string("SessionOptionsAppendExecutionProvider_V2: ") + e.what();
        }
      }
    }
    if (reason.empty()) {
      try {
        s->session = NewSession(ctx->env(), source, options);
        s->device = {DeviceKind::kCuda, index, "CUDAExecutionProvider", ""};
      } catch (const Ort::Exception& e) {
        reason = e.what();
        cuda_device = nullptr;
        // No driver or no device: the same for every later load. A device index that does not
        // exist fails cudaSetDevice too, but only for that index.
        if (reason.find("cudaSetDevice") != std::string::npos && !NamesOneDevice(reason)) {
          ctx->set_cuda_unavailable(reason);
        }
      }
    }
    if (!s->session) {
      const std::string asked = spec.device.ToString();
      if (spec.strict_device && spec.device.kind == DeviceRequest::Kind::kCuda) {
        return Unavailable(where + ": " + asked + " was requested in strict mode but CUDA cannot be used: " + reason);
      }
      s->device.fallback_reason = "CUDA unavailable (" + reason + ")";
      const std::string line = where + ": " + asked + " requested, falling back to CPU: " + reason;
      if (spec.device.kind == DeviceRequest::Kind::kAuto) {
        LogInfo(line);  // expected on a machine without a GPU
      } else {
        LogWarning(line);
      }
    }
  }
  if (!s->session) {
    EBB_RETURN_IF_ERROR(CreateCpuSession(*s, source, spec, where));
  } else if (!SourceUnchanged(source)) {
    return ChangedWhileLoading(source, where);
  }
  s->load.milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  try {
    EBB_RETURN_IF_ERROR(FillSignature(*s));
  } catch (const Ort::Exception& e) {
    return StatusFromOrt(e, where, "CPU memory");
  }
  AttachArenas(*s, cuda_device);
  LogInfo(where + ": runs on " + s->device.ToString());
  return s;
}

}  // namespace ebb::detail
