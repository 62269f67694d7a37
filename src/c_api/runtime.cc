// Runtime, load options, memory readings and sessions of the C API
// (include/ebb/c.h): ebb::Runtime and ebb::Session behind handles.
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <nlohmann/json.hpp>

#include "c_api.h"
#include "ebb/memory_policy.h"

namespace ebb::c_api {
namespace {

ebb_status_t* MakeRuntime(Result<MemoryPolicy> policy, ebb_runtime_t** out) {
  if (!policy.ok()) return ToC(policy.status());
  Result<std::unique_ptr<Runtime>> runtime = Runtime::Create(*policy);
  if (!runtime.ok()) return ToC(runtime.status());
  auto handle = std::make_unique<ebb_runtime_t>();
  handle->runtime = std::shared_ptr<Runtime>(std::move(runtime).value());
  handle->policy_json = MemoryPolicyToJson(handle->runtime->policy());
  *out = handle.release();
  return nullptr;
}

ebb_status_t* Loaded(Result<std::shared_ptr<Session>> session, ebb_session_t** out) {
  if (!session.ok()) return ToC(session.status());
  *out = MakeSession(std::move(session).value()).release();
  return nullptr;
}

int Describe(const std::vector<TensorInfo>& list, size_t index, const char** name, ebb_dtype_t* dtype,
             const int64_t** shape, size_t* rank) {
  if (index >= list.size()) return 0;
  const TensorInfo& t = list[index];
  if (name) *name = t.name.c_str();
  if (dtype) *dtype = ToC(t.type);
  if (shape) *shape = t.shape.empty() ? nullptr : t.shape.data();
  if (rank) *rank = t.shape.size();
  return 1;
}

const ArenaStats* ArenaAt(const ebb_memory_t* memory, size_t index) {
  return memory && index < memory->reading.arenas.size() ? &memory->reading.arenas[index] : nullptr;
}

// Copies each result into the caller's tensor of the same name. Errors: a
// missing result, another dtype or shape (named).
Status CopyInto(const char* function, std::vector<NamedTensor>& results, const char* const* names,
                ebb_tensor_t* const* outputs, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    NamedTensor* r = nullptr;
    for (NamedTensor& candidate : results) {
      if (candidate.name == names[i]) r = &candidate;
    }
    const std::string name = Clip(names[i]);
    if (!r) return Internal(std::string(function) + ": the run gave no output '" + name + "'");
    Tensor& dst = outputs[i]->tensor;
    if (dst.type() != r->tensor.type() || dst.shape() != r->tensor.shape()) {
      return InvalidArgument(std::string(function) + ": output '" + name + "' is " + DataTypeName(r->tensor.type()) +
                             " " + ShapeToString(r->tensor.shape()) + ", the buffer given for it is " +
                             DataTypeName(dst.type()) + " " + ShapeToString(dst.shape()));
    }
    if (dst.type() == DataType::kBytes) {
      dst = std::move(r->tensor);  // variable length: an owned BYTES tensor takes the result over
    } else if (dst.byte_size() > 0) {
      std::memcpy(dst.data(), r->tensor.data(), dst.byte_size());
    }
  }
  return Status::Ok();
}

}  // namespace

std::unique_ptr<ebb_session_t> MakeSession(std::shared_ptr<Session> session) {
  auto handle = std::make_unique<ebb_session_t>();
  handle->device = session->device().ToString();
  handle->session = std::move(session);
  return handle;
}

}  // namespace ebb::c_api

using namespace ebb;
using namespace ebb::c_api;

extern "C" {

// --- Runtime -------------------------------------------------------------------------

ebb_status_t* ebb_runtime_create(const char* policy_json, size_t length, ebb_runtime_t** out) {
  constexpr const char* kFn = "ebb_runtime_create";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!out) return NullArgument(kFn, "out");
    *out = nullptr;
    if (!policy_json || length == 0) return MakeRuntime(MemoryPolicy{}, out);
    return MakeRuntime(ParseMemoryPolicy(std::string_view(policy_json, length)), out);
  });
}

ebb_status_t* ebb_runtime_create_from_file(const char* policy_path, ebb_runtime_t** out) {
  constexpr const char* kFn = "ebb_runtime_create_from_file";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!out) return NullArgument(kFn, "out");
    *out = nullptr;
    if (!policy_path) return NullArgument(kFn, "policy_path");
    return MakeRuntime(LoadMemoryPolicy(policy_path), out);
  });
}

void ebb_runtime_destroy(ebb_runtime_t* runtime) { delete runtime; }

const char* ebb_runtime_policy_json(const ebb_runtime_t* runtime) {
  return runtime ? runtime->policy_json.c_str() : "";
}

ebb_status_t* ebb_runtime_load(ebb_runtime_t* runtime, const char* model_path, const ebb_load_options_t* options,
                               ebb_session_t** out) {
  constexpr const char* kFn = "ebb_runtime_load";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!out) return NullArgument(kFn, "out");
    *out = nullptr;
    if (!runtime) return NullArgument(kFn, "runtime");
    if (!model_path) return NullArgument(kFn, "model_path");
    return Loaded(runtime->runtime->Load(model_path, options ? options->options : LoadOptions{}), out);
  });
}

ebb_status_t* ebb_runtime_load_bytes(ebb_runtime_t* runtime, const void* bytes, size_t length,
                                     const ebb_load_options_t* options, ebb_session_t** out) {
  constexpr const char* kFn = "ebb_runtime_load_bytes";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!out) return NullArgument(kFn, "out");
    *out = nullptr;
    if (!runtime) return NullArgument(kFn, "runtime");
    if (!bytes && length > 0) return NullArgument(kFn, "bytes");
    const std::string model(static_cast<const char*>(bytes), length);
    return Loaded(runtime->runtime->LoadFromBytes(model, options ? options->options : LoadOptions{}), out);
  });
}

size_t ebb_runtime_unload_path(ebb_runtime_t* runtime, const char* model_path) {
  if (!runtime || !model_path) return 0;
  try {
    return runtime->runtime->Unload(std::string(model_path));
  } catch (...) {
    return 0;
  }
}

int ebb_runtime_unload_session(ebb_runtime_t* runtime, const ebb_session_t* session) {
  if (!runtime || !session) return 0;
  try {
    return runtime->runtime->Unload(*session->session) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

void ebb_runtime_clear(ebb_runtime_t* runtime) {
  if (!runtime) return;
  try {
    runtime->runtime->Clear();
  } catch (...) {
  }
}

ebb_status_t* ebb_runtime_trim(ebb_runtime_t* runtime) {
  constexpr const char* kFn = "ebb_runtime_trim";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!runtime) return NullArgument(kFn, "runtime");
    return ToC(runtime->runtime->Trim());
  });
}

uint64_t ebb_runtime_load_count(const ebb_runtime_t* runtime) { return runtime ? runtime->runtime->load_count() : 0; }

size_t ebb_runtime_cached_count(const ebb_runtime_t* runtime) {
  return runtime ? runtime->runtime->cached_sessions() : 0;
}

// --- Load options ----------------------------------------------------------------------

ebb_load_options_t* ebb_load_options_create(void) { return new (std::nothrow) ebb_load_options_t; }

void ebb_load_options_destroy(ebb_load_options_t* options) { delete options; }

ebb_status_t* ebb_load_options_set_device(ebb_load_options_t* options, const char* device) {
  constexpr const char* kFn = "ebb_load_options_set_device";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!options) return NullArgument(kFn, "options");
    if (!device) return NullArgument(kFn, "device");
    Result<DeviceRequest> parsed = DeviceRequest::Parse(device);
    if (!parsed.ok()) return ToC(parsed.status());
    options->options.device = *parsed;
    return nullptr;
  });
}

void ebb_load_options_set_strict(ebb_load_options_t* options, int strict) {
  if (!options) return;
  if (strict < 0) {
    options->options.strict_device.reset();
  } else {
    options->options.strict_device = strict != 0;
  }
}

ebb_status_t* ebb_load_options_set_name(ebb_load_options_t* options, const char* name) {
  constexpr const char* kFn = "ebb_load_options_set_name";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!options) return NullArgument(kFn, "options");
    options->options.name = name ? name : "";
    return nullptr;
  });
}

// --- Memory readings ---------------------------------------------------------------------

ebb_status_t* ebb_runtime_memory(const ebb_runtime_t* runtime, ebb_memory_t** out) {
  constexpr const char* kFn = "ebb_runtime_memory";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!out) return NullArgument(kFn, "out");
    *out = nullptr;
    if (!runtime) return NullArgument(kFn, "runtime");
    auto memory = std::make_unique<ebb_memory_t>();
    memory->reading = runtime->runtime->ReadMemory();
    memory->json = memory->reading.ToJson();
    *out = memory.release();
    return nullptr;
  });
}

void ebb_memory_destroy(ebb_memory_t* memory) { delete memory; }

int64_t ebb_memory_rss_bytes(const ebb_memory_t* memory) { return memory ? memory->reading.rss_bytes : 0; }

int64_t ebb_memory_peak_rss_bytes(const ebb_memory_t* memory) { return memory ? memory->reading.peak_rss_bytes : 0; }

int64_t ebb_memory_total_reserved(const ebb_memory_t* memory) {
  return memory ? memory->reading.TotalReserved() : 0;
}

size_t ebb_memory_arena_count(const ebb_memory_t* memory) { return memory ? memory->reading.arenas.size() : 0; }

const char* ebb_memory_arena_name(const ebb_memory_t* memory, size_t index) {
  const ArenaStats* a = ArenaAt(memory, index);
  return a ? a->name.c_str() : "";
}

int64_t ebb_memory_arena_stat(const ebb_memory_t* memory, size_t index, ebb_arena_stat_t stat) {
  const ArenaStats* a = ArenaAt(memory, index);
  if (!a) return -1;
  switch (stat) {
    case EBB_ARENA_RESERVED: return a->reserved;
    case EBB_ARENA_IN_USE: return a->in_use;
    case EBB_ARENA_PEAK_IN_USE: return a->peak_in_use;
    case EBB_ARENA_LIMIT: return a->limit;
    case EBB_ARENA_REGIONS: return a->regions;
    case EBB_ARENA_EXTENSIONS: return a->extensions;
    case EBB_ARENA_SHRINKS: return a->shrinks;
    case EBB_ARENA_ALLOCATIONS: return a->allocations;
    default: return -1;
  }
}

int64_t ebb_memory_find_arena(const ebb_memory_t* memory, const char* name) {
  if (!memory || !name) return -1;
  const std::vector<ArenaStats>& arenas = memory->reading.arenas;
  for (size_t i = 0; i < arenas.size(); ++i) {
    if (arenas[i].name == name) return static_cast<int64_t>(i);
  }
  return -1;
}

size_t ebb_memory_gpu_count(const ebb_memory_t* memory) { return memory ? memory->reading.gpus.size() : 0; }

int64_t ebb_memory_gpu(const ebb_memory_t* memory, size_t index, int64_t* total, int64_t* used, int64_t* free_bytes) {
  if (!memory || index >= memory->reading.gpus.size()) return -1;
  const GpuMemory& g = memory->reading.gpus[index];
  if (total) *total = g.total;
  if (used) *used = g.used;
  if (free_bytes) *free_bytes = g.free;
  return g.index;
}

const char* ebb_memory_json(const ebb_memory_t* memory) { return memory ? memory->json.c_str() : ""; }

// --- Sessions ------------------------------------------------------------------------------

void ebb_session_destroy(ebb_session_t* session) { delete session; }

int ebb_session_same(const ebb_session_t* a, const ebb_session_t* b) {
  return a && b && a->session->IsSameModel(*b->session) ? 1 : 0;
}

const char* ebb_session_name(const ebb_session_t* session) { return session ? session->session->name().c_str() : ""; }

const char* ebb_session_source_path(const ebb_session_t* session) {
  return session ? session->session->source_path().c_str() : "";
}

const char* ebb_session_device(const ebb_session_t* session) { return session ? session->device.c_str() : ""; }

const char* ebb_session_provider(const ebb_session_t* session) {
  return session ? session->session->device().provider.c_str() : "";
}

const char* ebb_session_fallback_reason(const ebb_session_t* session) {
  return session ? session->session->device().fallback_reason.c_str() : "";
}

size_t ebb_session_input_count(const ebb_session_t* session) {
  return session ? session->session->inputs().size() : 0;
}

size_t ebb_session_output_count(const ebb_session_t* session) {
  return session ? session->session->outputs().size() : 0;
}

int ebb_session_input(const ebb_session_t* session, size_t index, const char** name, ebb_dtype_t* dtype,
                      const int64_t** shape, size_t* rank) {
  return session ? Describe(session->session->inputs(), index, name, dtype, shape, rank) : 0;
}

int ebb_session_output(const ebb_session_t* session, size_t index, const char** name, ebb_dtype_t* dtype,
                       const int64_t** shape, size_t* rank) {
  return session ? Describe(session->session->outputs(), index, name, dtype, shape, rank) : 0;
}

ebb_status_t* ebb_session_metadata(const ebb_session_t* session, const char* key, char** value) {
  constexpr const char* kFn = "ebb_session_metadata";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!value) return NullArgument(kFn, "value");
    *value = nullptr;
    if (!session) return NullArgument(kFn, "session");
    if (!key) return NullArgument(kFn, "key");
    return ReturnString(session->session->metadata(key), value);
  });
}

ebb_status_t* ebb_session_share(const ebb_session_t* session, ebb_session_t** out) {
  constexpr const char* kFn = "ebb_session_share";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!out) return NullArgument(kFn, "out");
    *out = nullptr;
    if (!session) return NullArgument(kFn, "session");
    *out = MakeSession(session->session).release();
    return nullptr;
  });
}

ebb_status_t* ebb_session_release_targets(const ebb_session_t* session, char** json) {
  constexpr const char* kFn = "ebb_session_release_targets";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!json) return NullArgument(kFn, "json");
    *json = nullptr;
    if (!session) return NullArgument(kFn, "session");
    return ReturnString(nlohmann::json(session->session->release_targets()).dump(), json);
  });
}

uint64_t ebb_session_run_count(const ebb_session_t* session) { return session ? session->session->run_count() : 0; }

uint64_t ebb_session_release_count(const ebb_session_t* session) {
  return session ? session->session->release_count() : 0;
}

int ebb_session_in_flight(const ebb_session_t* session) { return session ? session->session->in_flight() : 0; }

ebb_status_t* ebb_session_run(ebb_session_t* session, const char* const* input_names,
                              const ebb_tensor_t* const* inputs, size_t input_count, const char* const* output_names,
                              size_t output_count, ebb_tensors_t** outputs) {
  constexpr const char* kFn = "ebb_session_run";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!outputs) return NullArgument(kFn, "outputs");
    *outputs = nullptr;
    if (!session) return NullArgument(kFn, "session");
    Result<std::vector<NamedTensor>> in = Inputs(kFn, input_names, inputs, input_count);
    if (!in.ok()) return ToC(in.status());
    RunFlags flags;  // ends_operation: one call is one whole operation
    Result<std::vector<std::string>> names = Names(kFn, output_names, output_count);
    if (!names.ok()) return ToC(names.status());
    flags.outputs = std::move(*names);
    Result<std::vector<NamedTensor>> out = session->session->Run(*in, flags);
    if (!out.ok()) return ToC(out.status());
    *outputs = ToList(std::move(out).value()).release();
    return nullptr;
  });
}

ebb_status_t* ebb_session_run_into(ebb_session_t* session, const char* const* input_names,
                                   const ebb_tensor_t* const* inputs, size_t input_count,
                                   const char* const* output_names, ebb_tensor_t* const* outputs,
                                   size_t output_count) {
  constexpr const char* kFn = "ebb_session_run_into";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!session) return NullArgument(kFn, "session");
    if (output_count == 0) {
      return Error(StatusCode::kInvalidArgument, std::string(kFn) + ": no outputs given (output_count is 0)");
    }
    if (!outputs) return NullArgument(kFn, "outputs");
    for (size_t i = 0; i < output_count; ++i) {
      if (!outputs[i]) return Error(StatusCode::kInvalidArgument, std::string(kFn) + ": outputs[" +
                                                                      std::to_string(i) + "] is NULL");
    }
    Result<std::vector<NamedTensor>> in = Inputs(kFn, input_names, inputs, input_count);
    if (!in.ok()) return ToC(in.status());
    Result<std::vector<std::string>> names = Names(kFn, output_names, output_count);
    if (!names.ok()) return ToC(names.status());
    RunFlags flags;
    flags.outputs = std::move(*names);
    Result<std::vector<NamedTensor>> out = session->session->Run(*in, flags);
    if (!out.ok()) return ToC(out.status());
    return ToC(CopyInto(kFn, *out, output_names, outputs, output_count));
  });
}

}  // extern "C"
