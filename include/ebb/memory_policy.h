// ebb/memory_policy.h — the one description of how ebb uses memory.
//
// A MemoryPolicy is the single source of truth every session is created from:
// the Runtime takes one at construction and applies it to every session it
// loads (arena settings, where weights live, when memory is released). There
// is no other place where arena or provider memory options are set.
//
// Load it from JSON with LoadMemoryPolicy()/ParseMemoryPolicy(); every field is
// optional in the file and falls back to the default documented here (and in
// docs/memory-policy.md). Unknown keys are errors, so typos do not go unseen.
//
// Thread safety: a plain value; copy it freely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <optional>
#include <string_view>

#include "ebb/status.h"

namespace ebb {

// How an arena grows when no free chunk fits a request.
enum class ExtendStrategy {
  kNextPowerOfTwo,   // ORT's default: doubles regions; the first region can never be freed.
  kSameAsRequested,  // grows by exactly what is asked; every region can be freed by a release.
};

// When the run boundary gives arena memory back.
enum class ReleaseMode {
  kOperationEnd,  // at the last run of an operation; a single Session::Run is a whole one
  kEveryRun,      // after every run (for comparison: pays regrowth on every run)
  kNever,         // never (for comparison: ORT's own behaviour)
  kIdle,          // (default) a run that is its own operation (a single Session::Run, a
                  // server request) releases once no run has ended for
                  // MemoryPolicy::idle_release_ms, off the calling thread, so a loop of
                  // single runs does not pay a release and a regrowth per run; an explicit
                  // operation still releases at its end (OperationReleaseMode)
};

// The largest MemoryPolicy::idle_release_ms accepted (ten minutes).
inline constexpr int kMaxIdleReleaseMs = 600000;

// Where CPU-side tensors of a session are allocated.
enum class CpuArenaMode {
  kShared,      // one env-wide arena, capped, shared by all sessions (default)
  kPerSession,  // ORT's private per-session arena (always next-power-of-two; ignores the fields below)
  kNone,        // no arena: plain malloc/free per tensor; nothing to release, runs are never shrunk
};

// Where a CUDA session's device tensors are allocated (docs/memory-policy.md, "The shared CUDA arena").
enum class CudaArenaMode {
  kShared,        // one capped arena per device, shared by every CUDA session of that device, made
                  // through ORT's device API (RegisterExecutionProviderLibrary, CreateSharedAllocator)
                  // and released at the end of each operation (default)
  kPerSession,    // ORT's own arena per CUDA session (the legacy CUDA options): no cap across sessions
  kEnvAllocator,  // one capped pool of device memory per device, ebb's own allocator registered in the
                  // env (RegisterAllocator), given back at the end of each operation; the second route,
                  // for measuring against kShared on a GPU
};

enum class ConvAlgoSearch { kExhaustive, kHeuristic, kDefault };

// ONNX Runtime's graph optimization level: how much ORT rewrites a model when
// it loads it. A trade of load time and (for some models) idle memory for run
// speed; docs/memory-policy.md has the measured figures.
enum class GraphOptimization {
  kDisabled,  // no rewriting: the graph as written
  kBasic,     // constant folding, redundant node elimination
  kExtended,  // + fusions (Conv+activation, attention, GELU, ...)
  kAll,       // + layout transforms: on x86, NCHWc blocked convolutions, whose
              //   weights are reordered (and on some models stored twice)
};

// The on-disk cache of optimized models (see docs/memory-policy.md): a model
// loaded once is optimized once; later loads, in this process or another, map
// the optimized model and start in a fraction of the time. CPU sessions only.
struct OptimizedModelCachePolicy {
  bool enabled = true;
  // The folder. Empty: $EBB_CACHE_DIR, else $XDG_CACHE_HOME/ebb/optimized-models,
  // else $HOME/.cache/ebb/optimized-models (created with mode 0700).
  std::string dir;
  // Bound on the folder's size; least recently used entries are removed past
  // it. 2 GiB holds several large models (an entry is about the size of the
  // model's weights, twice that for some models at level `all`).
  uint64_t max_bytes = uint64_t{2} << 30;
};

// Settings of one BFC arena (ORT's OrtArenaCfg).
struct ArenaPolicy {
  // Same-as-requested, so that a release can free every region (with
  // next-power-of-two the first region is pinned for the session's life).
  ExtendStrategy extend_strategy = ExtendStrategy::kSameAsRequested;
  // Cap on the arena's reserved bytes. 0 picks the default: for the shared CPU
  // arena, half of the machine's physical memory; for CUDA, no cap (ORT's
  // default; note ORT does not treat it as a hard limit for reserved chunks).
  // A run that needs more than the cap fails with kResourceExhausted.
  size_t max_bytes = 0;
  // Size of the first region. Small, because with same-as-requested the arena
  // grows to what the model needs anyway. ORT's default is 1 MiB.
  size_t initial_chunk_bytes = 1 << 20;
  // First growth step for next-power-of-two (ignored by same-as-requested).
  // ORT's default is 2 MiB.
  size_t initial_growth_chunk_bytes = 2 << 20;
  // A chunk wasting more than this when reused for a smaller request is split.
  // ORT's default is 128 MiB.
  size_t max_dead_bytes_per_chunk = 128u << 20;
};

struct CpuPolicy {
  // Shared env arena by default: it has the cap, the same-as-requested
  // strategy and a "trim now" that per-session arenas cannot offer.
  CpuArenaMode arena = CpuArenaMode::kShared;
  ArenaPolicy arena_settings;
};

struct CudaPolicy {
  // Each session's own arena by default: the only route a real GPU has run (ORT 1.29 on an H200,
  // 2026-12-04), where every run through the shared arena failed. `kShared` (one capped arena per
  // device, for many sessions) is opt-in until a GPU run shows it working (docs/gpu-check.md). Where
  // the device API cannot give a shared arena the sessions get their own arenas, with a warning.
  CudaArenaMode arena = CudaArenaMode::kPerSession;
  // For kShared and kEnvAllocator: max_bytes caps the device's one arena or pool (0: no cap).
  // For kPerSession: each session's arena (and gpu_mem_limit).
  ArenaPolicy arena_settings;
  // Heuristic by default: exhaustive search may allocate a workspace of up to
  // most of the free device memory while it searches.
  ConvAlgoSearch conv_algo_search = ConvAlgoSearch::kHeuristic;
  // Let cuDNN use its maximum workspace. Off by default for the same reason.
  // Settable through the device API's provider options (kShared, kEnvAllocator);
  // the legacy options of kPerSession do not have it: ebb logs a warning there.
  bool conv_use_max_workspace = false;
};

struct MemoryPolicy {
  CpuPolicy cpu;
  CudaPolicy cuda;
  // Allocate initializers (weights) outside the arena
  // (session.use_device_allocator_for_initializers=1), so that a release can
  // bring the arena down to zero instead of stopping at the weights.
  bool weights_outside_arena = true;
  // When memory goes back (see ReleaseMode). kIdle by measurement
  // (docs/memory-policy.md, `ebb bench loop`): a caller that runs single runs
  // in a loop (a service, one page per run) runs at kNever's speed and still
  // gets its memory back once it pauses; an explicit operation (Operation,
  // ScopedOperation, RunTiled, ...) releases at its last run either way.
  ReleaseMode release = ReleaseMode::kIdle;
  // For ReleaseMode::kIdle: the debounce. A timer thread of the Runtime gives
  // the shared CPU arena back (and trims the heap) once this long has passed
  // since the last run ended, with no run in flight; a burst of runs never
  // releases in between. 50 ms by measurement (docs/memory-policy.md): long
  // enough that runs made back to back (a loop of single runs, a client's
  // requests) are one burst; short enough that the memory is back well within
  // a second of the last run. Sessions whose arenas the Runtime
  // cannot shrink on its own (a per-session CPU arena, CUDA) release at their
  // operation's end instead, as kOperationEnd. From 1 to kMaxIdleReleaseMs.
  int idle_release_ms = 50;
  // After a release, hand freed heap pages back to the OS (malloc_trim), so the
  // process RSS falls and not only the arena counters. glibc keeps them otherwise.
  bool trim_heap_after_release = true;
  // When an explicitly requested device (cuda:N) cannot be used: false falls
  // back to CPU and records why; true fails the load with kUnavailable.
  // "auto" always falls back: it means "CUDA if it can be used".
  bool strict_device = false;
  // ORT's memory pattern: after the first run of an input shape, ORT plans
  // the whole run's intermediates as ONE block and allocates it per run. With
  // a same-as-requested arena that block fits none of the regions the first
  // run created, so the arena holds both (measured: 288 MiB -> 576 MiB for a
  // 1536x1536 convnet run). Off by default: the arena then reuses its regions.
  bool memory_pattern = false;
  // Threads that run one operator, in ONE pool shared by every session of the
  // runtime (ORT's global thread pool; 0 = ORT's default, one per physical
  // core). Shared rather than per session: a loaded model then costs no threads
  // or stacks of its own. The first Runtime of the process sets the pool.
  // At most MaxIntraOpThreads() (4 per hardware thread, at least 16).
  int intra_op_threads = 0;
  // ORT's graph optimization level for every session. `extended` by default,
  // by measurement (docs/memory-policy.md): an idle model then costs 1.0-1.1x
  // its weights on every model measured, while `all` doubled that on a real
  // 88 MB background-removal model (NCHWc weights) for 10-25% faster runs
  // (and ~3x slower first loads, paid once with the optimized-model cache).
  GraphOptimization graph_optimization = GraphOptimization::kExtended;
  OptimizedModelCachePolicy optimized_model_cache;
  // How many UNUSED models stay in the Runtime's session cache: loaded models
  // no handle holds any more (every Session for it let go, as Java's and
  // Python's close() do) but not unloaded. Past it the least recently handed
  // out go, at the next load and at Trim(), and their memory with them. A
  // closed model within the bound loads again without a load. 8 by default: a
  // service that only closes handles stays bounded; 0 drops every closed model.
  int max_unused_models = 8;
};

// The largest policy file LoadMemoryPolicy reads (a policy written out in full is under 2 KiB).
inline constexpr uint64_t kMaxMemoryPolicyFileBytes = uint64_t{1} << 20;
// MaxIntraOpThreads() is never below this.
inline constexpr int kMinMaxIntraOpThreads = 16;
// The largest MemoryPolicy::intra_op_threads accepted on this machine: 4 per hardware thread,
// at least kMinMaxIntraOpThreads. More threads than cores only make each operator wait for the
// others (measured: 200 on 2 cores made loading a tiny model take 7 s) and cost a stack each.
int MaxIntraOpThreads();

// Parses a policy from JSON text; absent fields keep `base`'s values (the defaults unless given).
// Errors: kInvalidArgument naming the key and the rule, for text with a NUL byte anywhere too
// (JSON's parser would stop there and ignore the rest unseen).
Result<MemoryPolicy> ParseMemoryPolicy(std::string_view json_text, const MemoryPolicy& base = {});
// Reads and parses a policy file, under the rules for files ebb did not write (links followed,
// then: a regular file only, opened without blocking, so a FIFO or a device is refused, at most
// kMaxMemoryPolicyFileBytes). Errors: kNotFound (no file), kInvalidArgument (not a regular file,
// too large, a bad policy; the message names the file), kInternal (an I/O error).
Result<MemoryPolicy> LoadMemoryPolicy(const std::string& path, const MemoryPolicy& base = {});
// The policy as JSON, every field written (what `ebb policy` prints).
std::string MemoryPolicyToJson(const MemoryPolicy& policy);

// The mode the runs of an explicit operation (Operation, ScopedOperation, RunTiled, RunPerFrame,
// RunJoint, RunPipeline; the C API's ebb_operation_t) release under: `chosen`
// (OperationOptions::release) when given, else the policy's `release`, where kIdle becomes
// kOperationEnd: an operation knows where it ends, so its last run gives the memory back at once;
// the idle timer is for runs that are each their own operation.
ReleaseMode OperationReleaseMode(const MemoryPolicy& policy, std::optional<ReleaseMode> chosen);

const char* ReleaseModeName(ReleaseMode mode);
std::optional<ReleaseMode> ParseReleaseMode(std::string_view name);
const char* GraphOptimizationName(GraphOptimization level);  // "all", "extended", "basic", "disabled"
const char* CudaArenaModeName(CudaArenaMode mode);            // "shared", "per_session", "env_allocator"
std::optional<GraphOptimization> ParseGraphOptimization(std::string_view name);

}  // namespace ebb
