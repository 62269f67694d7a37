#include "ebb/memory_policy.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

namespace ebb {
namespace {

using nlohmann::json;

template <typename E>
struct EnumNames {
  std::initializer_list<std::pair<E, const char*>> names;

  const char* Name(E value) const {
    for (const auto& [v, n] : names) {
      if (v == value) return n;
    }
    return "?";
  }
  std::optional<E> Parse(std::string_view text) const {
    for (const auto& [v, n] : names) {
      if (text == n) return v;
    }
    return std::nullopt;
  }
  std::string Choices() const {
    std::string s;
    for (const auto& [v, n] : names) s += (s.empty() ? "" : ", ") + std::string(n);
    return s;
  }
};

const EnumNames<ExtendStrategy> kExtend{{{ExtendStrategy::kNextPowerOfTwo, "next_power_of_two"},
                                         {ExtendStrategy::kSameAsRequested, "same_as_requested"}}};
const EnumNames<ReleaseMode> kRelease{{{ReleaseMode::kOperationEnd, "operation_end"},
                                       {ReleaseMode::kEveryRun, "every_run"},
                                       {ReleaseMode::kNever, "never"},
                                       {ReleaseMode::kIdle, "idle"}}};
const EnumNames<CpuArenaMode> kCpuArena{{{CpuArenaMode::kShared, "shared"},
                                         {CpuArenaMode::kPerSession, "per_session"},
                                         {CpuArenaMode::kNone, "none"}}};
const EnumNames<CudaArenaMode> kCudaArena{{{CudaArenaMode::kShared, "shared"},
                                           {CudaArenaMode::kPerSession, "per_session"},
                                           {CudaArenaMode::kEnvAllocator, "env_allocator"}}};
const EnumNames<GraphOptimization> kGraphOptimization{{{GraphOptimization::kAll, "all"},
                                                       {GraphOptimization::kExtended, "extended"},
                                                       {GraphOptimization::kBasic, "basic"},
                                                       {GraphOptimization::kDisabled, "disabled"}}};
const EnumNames<ConvAlgoSearch> kConvSearch{{{ConvAlgoSearch::kExhaustive, "exhaustive"},
                                             {ConvAlgoSearch::kHeuristic, "heuristic"},
                                             {ConvAlgoSearch::kDefault, "default"}}};

// Reads a JSON object field by field; each key must have a handler.
using FieldReader = std::function<Status(const json&, const std::string& where)>;

Status ReadObject(const json& j, const std::string& where, const std::map<std::string, FieldReader>& fields) {
  if (!j.is_object()) return InvalidArgument(where + " must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    auto it = fields.find(key);
    if (it == fields.end()) return InvalidArgument("unknown policy key '" + where + "." + key + "'");
    EBB_RETURN_IF_ERROR(it->second(value, where + "." + key));
  }
  return Status::Ok();
}

FieldReader Bool(bool* out) {
  return [out](const json& v, const std::string& where) {
    if (!v.is_boolean()) return InvalidArgument(where + " must be true or false");
    *out = v.get<bool>();
    return Status::Ok();
  };
}

template <typename T>
FieldReader Bytes(T* out) {
  return [out](const json& v, const std::string& where) {
    if (!v.is_number_unsigned()) return InvalidArgument(where + " must be a non-negative integer (bytes)");
    *out = v.get<T>();
    return Status::Ok();
  };
}

FieldReader Text(std::string* out) {
  return [out](const json& v, const std::string& where) {
    if (!v.is_string()) return InvalidArgument(where + " must be a string");
    *out = v.get<std::string>();
    return Status::Ok();
  };
}

// An integer in [lo, hi].
FieldReader IntIn(int* out, int64_t lo, int64_t hi) {
  return [out, lo, hi](const json& v, const std::string& where) {
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
      return InvalidArgument(where + " must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
    }
    *out = static_cast<int>(v.get<int64_t>());
    return Status::Ok();
  };
}

template <typename E>
FieldReader Enum(const EnumNames<E>& names, E* out) {
  return [&names, out](const json& v, const std::string& where) {
    auto parsed = v.is_string() ? names.Parse(v.get<std::string>()) : std::nullopt;
    if (!parsed) return InvalidArgument(where + " must be one of: " + names.Choices());
    *out = *parsed;
    return Status::Ok();
  };
}

FieldReader Arena(ArenaPolicy* a) {
  return [a](const json& v, const std::string& where) {
    return ReadObject(v, where,
                      {{"extend_strategy", Enum(kExtend, &a->extend_strategy)},
                       {"max_bytes", Bytes(&a->max_bytes)},
                       {"initial_chunk_bytes", Bytes(&a->initial_chunk_bytes)},
                       {"initial_growth_chunk_bytes", Bytes(&a->initial_growth_chunk_bytes)},
                       {"max_dead_bytes_per_chunk", Bytes(&a->max_dead_bytes_per_chunk)}});
  };
}

json ArenaToJson(const ArenaPolicy& a) {
  return {{"extend_strategy", kExtend.Name(a.extend_strategy)},
          {"max_bytes", a.max_bytes},
          {"initial_chunk_bytes", a.initial_chunk_bytes},
          {"initial_growth_chunk_bytes", a.initial_growth_chunk_bytes},
          {"max_dead_bytes_per_chunk", a.max_dead_bytes_per_chunk}};
}

}  // namespace

int MaxIntraOpThreads() {
  const int hardware = static_cast<int>(std::min(std::thread::hardware_concurrency(), 1024u));
  return std::max(kMinMaxIntraOpThreads, 4 * hardware);
}

Result<MemoryPolicy> ParseMemoryPolicy(std::string_view json_text, const MemoryPolicy& base) {
  // JSON's parser stops at a NUL as at the end of the text, so what follows one would be ignored
  // unseen: refused instead (JSON text never holds a raw NUL; inside a string it is written \u0000).
  if (const size_t nul = json_text.find('\0'); nul != std::string_view::npos) {
    return InvalidArgument("memory policy holds a NUL byte at offset " + std::to_string(nul) +
                           " (JSON text has none; the text after it would be ignored)");
  }
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("memory policy is not valid JSON");
  MemoryPolicy p = base;
  FieldReader cpu = [&p](const json& v, const std::string& where) {
    return ReadObject(v, where,
                      {{"arena", Enum(kCpuArena, &p.cpu.arena)}, {"arena_settings", Arena(&p.cpu.arena_settings)}});
  };
  FieldReader cuda = [&p](const json& v, const std::string& where) {
    return ReadObject(v, where,
                      {{"arena", Enum(kCudaArena, &p.cuda.arena)},
                       {"arena_settings", Arena(&p.cuda.arena_settings)},
                       {"conv_algo_search", Enum(kConvSearch, &p.cuda.conv_algo_search)},
                       {"conv_use_max_workspace", Bool(&p.cuda.conv_use_max_workspace)}});
  };
  FieldReader cache = [&p](const json& v, const std::string& where) {
    return ReadObject(v, where,
                      {{"enabled", Bool(&p.optimized_model_cache.enabled)},
                       {"dir", Text(&p.optimized_model_cache.dir)},
                       {"max_bytes", Bytes(&p.optimized_model_cache.max_bytes)}});
  };
  EBB_RETURN_IF_ERROR(ReadObject(j, "policy",
                                 {{"cpu", cpu},
                                  {"cuda", cuda},
                                  {"weights_outside_arena", Bool(&p.weights_outside_arena)},
                                  {"release", Enum(kRelease, &p.release)},
                                  {"idle_release_ms", IntIn(&p.idle_release_ms, 1, kMaxIdleReleaseMs)},
                                  {"trim_heap_after_release", Bool(&p.trim_heap_after_release)},
                                  {"memory_pattern", Bool(&p.memory_pattern)},
                                  {"strict_device", Bool(&p.strict_device)},
                                  {"intra_op_threads", IntIn(&p.intra_op_threads, 0, MaxIntraOpThreads())},  // Runtime::Create's bound
                                  {"graph_optimization", Enum(kGraphOptimization, &p.graph_optimization)},
                                  {"optimized_model_cache", cache},
                                  {"max_unused_models", IntIn(&p.max_unused_models, 0, std::numeric_limits<int>::max())}}));
  return p;
}

std::string MemoryPolicyToJson(const MemoryPolicy& p) {
  json j = {
      {"cpu", {{"arena", kCpuArena.Name(p.cpu.arena)}, {"arena_settings", ArenaToJson(p.cpu.arena_settings)}}},
      {"cuda",
       {{"arena", kCudaArena.Name(p.cuda.arena)},
        {"arena_settings", ArenaToJson(p.cuda.arena_settings)},
        {"conv_algo_search", kConvSearch.Name(p.cuda.conv_algo_search)},
        {"conv_use_max_workspace", p.cuda.conv_use_max_workspace}}},
      {"weights_outside_arena", p.weights_outside_arena},
      {"release", kRelease.Name(p.release)},
      {"idle_release_ms", p.idle_release_ms},
      {"trim_heap_after_release", p.trim_heap_after_release},
      {"memory_pattern", p.memory_pattern},
      {"strict_device", p.strict_device},
      {"intra_op_threads", p.intra_op_threads},
      {"graph_optimization", kGraphOptimization.Name(p.graph_optimization)},
      {"optimized_model_cache",
       {{"enabled", p.optimized_model_cache.enabled},
        {"dir", p.optimized_model_cache.dir},
        {"max_bytes", p.optimized_model_cache.max_bytes}}},
      {"max_unused_models", p.max_unused_models},
  };
  return j.dump(2);
}

ReleaseMode OperationReleaseMode(const MemoryPolicy& policy, std::optional<ReleaseMode> chosen) {
  if (chosen) return *chosen;
  return policy.release == ReleaseMode::kIdle ? ReleaseMode::kOperationEnd : policy.release;
}

const char* ReleaseModeName(ReleaseMode mode) { return kRelease.Name(mode); }
std::optional<ReleaseMode> ParseReleaseMode(std::string_view name) { return kRelease.Parse(name); }
const char* GraphOptimizationName(GraphOptimization level) { return kGraphOptimization.Name(level); }
const char* CudaArenaModeName(CudaArenaMode mode) { return kCudaArena.Name(mode); }
std::optional<GraphOptimization> ParseGraphOptimization(std::string_view name) {
  return kGraphOptimization.Parse(name);
}

}  // namespace ebb
