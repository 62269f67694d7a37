// ebb_cuda_check: ebb's CUDA claims, checked on a machine with an NVIDIA GPU (docs/gpu-check.md).
//
//   ebb_cuda_check [--models DIR] [--device N] [--side PIXELS] [--sessions N]
//                  [--expect-gpu | --exercise-on-cpu] [--check NAME]... [--list]
//
// Each check builds its own Runtime, does its work and prints one JSON line:
//   {"check": NAME, "status": "pass"|"fail"|"skip", "message": "...", "seconds": S,
//    "goals": {GOAL: true|false, ...}, "figures": {...}}
// A check passes when every goal holds and nothing failed on the way. Where CUDA cannot be used (no
// provider library, CUDA libraries or driver, no device), every check is skipped with the reason,
// unless --expect-gpu says that a GPU is meant to be there: then that is a failure. So this program
// runs on any machine: ctest runs it here (it skips), scripts/gpu/run.sh runs each check in a process
// of its own on the GPU machine, with --expect-gpu. --exercise-on-cpu runs every check's code on the
// CPU instead (with --side 64, in seconds), reporting its figures but judging no goal (status skip,
// unless something failed on the way): how this machine finds a check that would crash or throw
// before a GPU's time is spent on it.
//
// Exit status: 0 every check run passed; 1 a check failed; 2 bad usage; 77 every check was skipped.
//
// Device memory is read through NVML twice: the whole device's `used` (what ebb's MemoryReading
// reports) and this process's own use (nvmlDeviceGetComputeRunningProcesses), when the driver tells
// it; the goals use the process's figure when there is one, else the device's (alone on the machine,
// they differ by other processes only). The NVML index is taken to be the CUDA ordinal (one GPU).
//
// This is a test program: it includes ONNX Runtime's headers for the one thing ebb does not expose,
// which provider ORT assigned each node to (session.record_ep_graph_assignment_info).
#include <dlfcn.h>
#include <execinfo.h>
#include <csignal>
#include <unistd.h>

#include <onnxruntime_cxx_api.h>
#include <onnxruntime_session_options_config_keys.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ebb/memory_stats.h"
#include "ebb/model_pool.h"
#include "ebb/operation.h"
#include "ebb/runtime.h"
#include "ebb/version.h"

namespace {

using Json = nlohmann::ordered_json;
using ebb::DeviceKind;
using ebb::DeviceRequest;
using ebb::MemoryPolicy;
using ebb::Runtime;
using ebb::Session;
using ebb::Tensor;

constexpr int64_t kMiB = int64_t{1} << 20;

struct Options {
  std::string models = EBB_MODELS_DIR;
  int device = 0;
  int64_t side = 1024;  // frames of the memory checks: waifu2x at 1024x1024 holds about 1 GiB of activations
  bool expect_gpu = false;
  bool exercise_on_cpu = false;  // run the checks' code on CPU sessions; judge no goal
  int sessions = 50;             // shared_arena: CUDA sessions per policy
  std::vector<std::string> checks;
};

Options g_options;

std::string ModelFile(const std::string& name) { return g_options.models + "/" + name + "/model.onnx"; }

// --- NVML: the device's and this process's memory ------------------------------------------------

struct NvmlProcessInfo {  // nvmlProcessInfo_v2_t, what ..._v3 fills
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

class ProcessNvml {
 public:
  ProcessNvml() {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) return;
    auto init = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlInit_v2"));
    handle_ = reinterpret_cast<int (*)(unsigned int, void**)>(dlsym(lib_, "nvmlDeviceGetHandleByIndex_v2"));
    processes_ = reinterpret_cast<int (*)(void*, unsigned int*, NvmlProcessInfo*)>(
        dlsym(lib_, "nvmlDeviceGetComputeRunningProcesses_v3"));
    ok_ = init && handle_ && processes_ && init() == 0;
  }

  // This process's device memory on GPU `index`, when NVML lists it with a value.
  std::optional<int64_t> ProcessUsed(int index) const {
    if (!ok_) return std::nullopt;
    void* device = nullptr;
    if (handle_(static_cast<unsigned int>(index), &device) != 0) return std::nullopt;
    std::vector<NvmlProcessInfo> infos(256);
    unsigned int count = static_cast<unsigned int>(infos.size());
    if (processes_(device, &count, infos.data()) != 0) return std::nullopt;
    const unsigned int self = static_cast<unsigned int>(getpid());
    for (unsigned int i = 0; i < count && i < infos.size(); ++i) {
      // NVML_VALUE_NOT_AVAILABLE is (unsigned long long)-1: no per-process figure (some VMs).
      if (infos[i].pid == self && infos[i].used_gpu_memory != ~0ull) {
        return static_cast<int64_t>(infos[i].used_gpu_memory);
      }
    }
    return std::nullopt;
  }

 private:
  void* lib_ = nullptr;
  bool ok_ = false;
  int (*handle_)(unsigned int, void**) = nullptr;
  int (*processes_)(void*, unsigned int*, NvmlProcessInfo*) = nullptr;
};

struct GpuReading {
  int64_t device_used = 0;
  int64_t total = 0;
  std::optional<int64_t> process_used;
  int64_t used() const { return process_used ? *process_used : device_used; }  // what goals compare
};

GpuReading ReadGpu() {
  static ProcessNvml nvml;
  GpuReading r;
  for (const ebb::GpuMemory& g : ebb::ReadGpuMemory()) {
    if (g.index == g_options.device) {
      r.device_used = g.used;
      r.total = g.total;
    }
  }
  r.process_used = nvml.ProcessUsed(g_options.device);
  return r;
}

Json ToJson(const GpuReading& r) {
  Json j = {{"device_used", r.device_used}, {"total", r.total}};
  j["process_used"] = r.process_used ? Json(*r.process_used) : Json(nullptr);
  return j;
}

// --- One check's report -------------------------------------------------------------------------

class Report {
 public:
  explicit Report(std::string name) : name_(std::move(name)) {}

  Json& figures() { return figures_; }
  // Records a goal; returns it, so that a check can stop when a goal it builds on fails.
  bool Goal(const std::string& goal, bool holds) {
    goals_[goal] = holds;
    return holds;
  }
  void Fail(const std::string& message) {
    if (status_ != "skip") status_ = "fail";
    Note(message);
  }
  // CUDA cannot be used: a skip, or a failure when a GPU is expected.
  void Unusable(const std::string& why) {
    if (g_options.expect_gpu) {
      Fail("CUDA cannot be used on this machine, which should have a GPU: " + why);
    } else {
      status_ = "skip";
      Note("CUDA cannot be used here: " + why);
    }
  }
  void Note(const std::string& message) { message_ += (message_.empty() ? "" : "; ") + message; }

  Json Finish(double seconds) {
    if (status_ == "pass" && g_options.exercise_on_cpu) {
      status_ = "skip";
      Note("exercised on CPU: goals not judged");
    }
    if (status_ == "pass") {
      for (const auto& [goal, holds] : goals_.items()) {
        if (!holds.get<bool>()) {
          status_ = "fail";
          Note("goal not met: " + goal);
        }
      }
    }
    return Json{{"check", name_},     {"status", status_},   {"message", message_},
                {"seconds", seconds}, {"goals", goals_},     {"figures", figures_}};
  }
  bool skipped() const { return status_ == "skip"; }

 private:
  std::string name_;
  std::string status_ = "pass";
  std::string message_;
  Json goals_ = Json::object();
  Json figures_ = Json::object();
};

// --- Shared steps --------------------------------------------------------------------------------

// Why CUDA cannot be used at all, or nullopt. Read once per process.
std::optional<std::string> CudaProblem() {
  if (g_options.exercise_on_cpu) return std::nullopt;
  static const std::optional<std::string> problem = []() -> std::optional<std::string> {
    const ebb::ProviderSupport support = ebb::ReadProviderSupport();
    if (support.cuda != ebb::ProviderSupport::CudaLibrary::kLoadable) {
      return std::string("the CUDA provider library is ") + ebb::CudaLibraryName(support.cuda) + " (" +
             support.cuda_path + (support.cuda_detail.empty() ? "" : ": " + support.cuda_detail) + ")";
    }
    if (ebb::ReadGpuMemory().empty()) return std::string("NVML reports no GPU (no driver or no device)");
    return std::nullopt;
  }();
  return problem;
}

// The policy the checks start from: the default, with the shared CUDA arena, which they were written
// to check (the default is `per_session` until a GPU run shows `shared` working: memory-policy.md).
MemoryPolicy SharedCudaPolicy() {
  MemoryPolicy policy;
  policy.cuda.arena = ebb::CudaArenaMode::kShared;
  return policy;
}

std::unique_ptr<Runtime> NewRuntime(const MemoryPolicy& policy, Report& report) {
  auto runtime = Runtime::Create(policy);
  if (!runtime.ok()) {
    report.Fail("Runtime::Create: " + runtime.status().ToString());
    return nullptr;
  }
  return std::move(*runtime);
}

// Where the checks load their models: cuda:<device>, strictly (no fallback); the CPU when exercising.
ebb::LoadOptions OnTarget() {
  return {.device = g_options.exercise_on_cpu ? DeviceRequest::Cpu() : DeviceRequest::Cuda(g_options.device),
          .strict_device = true};
}

// `model` on the target; null with the report filled when it cannot be.
std::shared_ptr<Session> LoadOnCuda(Runtime& runtime, const std::string& model, Report& report) {
  auto session = runtime.Load(ModelFile(model), OnTarget());
  if (!session.ok()) {
    if (session.status().code() == ebb::StatusCode::kUnavailable) {
      report.Unusable(session.status().message());
    } else {
      report.Fail("loading '" + model + "' on CUDA: " + session.status().ToString());
    }
    return nullptr;
  }
  return *session;
}

// The CUDA arena the session allocates from: the device's shared arena or pool ("gpu:N:shared",
// "gpu:N:pool", cuda.arena shared / env_allocator), else its own ("gpu:N:<model>"), if any.
std::optional<ebb::ArenaStats> DeviceArena(const Session& session) {
  if (auto shared = session.ReadSharedDeviceArena()) return shared;
  for (const ebb::ArenaStats& a : session.ReadOwnArenas()) {
    if (a.name.rfind("gpu:", 0) == 0) return a;
  }
  return std::nullopt;
}

Json ToJson(const std::optional<ebb::ArenaStats>& a) {
  if (!a) return nullptr;
  return {{"name", a->name},       {"reserved", a->reserved}, {"in_use", a->in_use},
          {"peak_in_use", a->peak_in_use}, {"regions", a->regions}, {"shrinks", a->shrinks},
          {"allocations", a->allocations}};
}

int64_t Reserved(const std::optional<ebb::ArenaStats>& a) { return a ? a->reserved : 0; }

// A deterministic image-like frame [1,3,side,side], values in [0,1).
Tensor Frame(int64_t side, uint32_t seed) {
  Tensor t(ebb::DataType::kFloat32, {1, 3, side, side});
  uint32_t state = seed * 2654435761u + 1;
  for (float& v : t.values<float>()) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / static_cast<float>(1u << 24);
  }
  return t;
}

std::vector<Tensor> Frames(int count, int64_t side) {
  std::vector<Tensor> frames;
  for (int i = 0; i < count; ++i) frames.push_back(Frame(side, static_cast<uint32_t>(i + 1)));
  return frames;
}

std::vector<ebb::NamedTensor> Input(const Session& session, Tensor t) {
  std::vector<ebb::NamedTensor> in;
  in.push_back({session.inputs()[0].name, std::move(t)});
  return in;
}

bool AllBitwiseEqual(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].BitwiseEquals(b[i])) return false;
  }
  return true;
}

// The records and device readings of one operation over `frames`.
struct OperationTrace {
  std::vector<ebb::RunRecord> records;
  GpuReading after_load, peak, after;
  std::optional<ebb::ArenaStats> arena_after_load, arena_peak, arena_after;
  std::vector<Tensor> outputs;
};

std::optional<OperationTrace> TraceOperation(Runtime& runtime, const std::shared_ptr<Session>& session,
                                             const std::vector<Tensor>& frames, Report& report) {
  OperationTrace trace;
  trace.after_load = ReadGpu();
  trace.arena_after_load = DeviceArena(*session);
  trace.peak = trace.after_load;
  ebb::RunObserver observer = [&](const ebb::RunRecord& record) {
    trace.records.push_back(record);
    // Read after every run but the last, whose release has happened by now: the held peak.
    if (trace.records.size() < frames.size()) {
      GpuReading now = ReadGpu();
      if (now.used() > trace.peak.used()) trace.peak = now;
      auto arena = DeviceArena(*session);
      if (!trace.arena_peak || Reserved(arena) > Reserved(trace.arena_peak)) trace.arena_peak = arena;
    }
  };
  ebb::OperationOptions options;
  options.observer = &observer;
  auto outputs = ebb::RunPerFrame(runtime, session, frames, options);
  if (!outputs.ok()) {
    report.Fail("RunPerFrame: " + outputs.status().ToString());
    return std::nullopt;
  }
  trace.outputs = std::move(*outputs);
  trace.after = ReadGpu();
  trace.arena_after = DeviceArena(*session);
  return trace;
}

Json ToJson(const OperationTrace& t) {
  Json runs = Json::array();
  for (const ebb::RunRecord& r : t.records) {
    runs.push_back({{"sequence", r.sequence},
                    {"ends_operation", r.ends_operation},
                    {"release_spec", r.release_spec},
                    {"release_deferred", r.release_deferred},
                    {"status", ebb::StatusCodeName(r.status)},
                    {"milliseconds", r.milliseconds}});
  }
  return {{"runs", runs},
          {"gpu_after_load", ToJson(t.after_load)},
          {"gpu_peak", ToJson(t.peak)},
          {"gpu_after", ToJson(t.after)},
          {"arena_after_load", ToJson(t.arena_after_load)},
          {"arena_peak", ToJson(t.arena_peak)},
          {"arena_after", ToJson(t.arena_after)}};
}

std::string Source(const GpuReading& r) { return r.process_used ? "nvml_process" : "nvml_device"; }

// Which provider ORT assigned the nodes of `model` to, in a plain ORT session made with CUDA as ebb
// makes it (legacy options) or on CPU. REQUIRES: a Runtime is alive (this shares its Ort::Env).
Json NodesPerProvider(const std::string& model, bool cuda) {
  try {
    Ort::Env env(ORT_LOGGING_LEVEL_FATAL, "ebb");
    Ort::SessionOptions options;
    options.AddConfigEntry(kOrtSessionOptionsRecordEpGraphAssignmentInfo, "1");
    options.SetIntraOpNumThreads(1);
    if (cuda) {
      OrtCUDAProviderOptions o;
      o.device_id = g_options.device;
      o.cudnn_conv_algo_search = OrtCudnnConvAlgoSearchHeuristic;
      options.AppendExecutionProvider_CUDA(o);
    }
    Ort::Session session(env, ModelFile(model).c_str(), options);
    std::map<std::string, int64_t> counts;
    std::map<std::string, std::vector<std::string>> elsewhere;  // node types per other provider
    for (const Ort::ConstEpAssignedSubgraph& sub : session.GetEpGraphAssignmentInfo()) {
      const std::string ep = sub.GetEpName();
      for (const Ort::ConstEpAssignedNode& node : sub.GetNodes()) {
        ++counts[ep];
        if (ep != "CUDAExecutionProvider" && elsewhere[ep].size() < 64) elsewhere[ep].push_back(node.GetOperatorType());
      }
    }
    return {{"nodes", counts}, {"node_types_not_on_cuda", elsewhere}};
  } catch (const Ort::Exception& e) {
    return {{"error", e.what()}};
  }
}

// --- The checks ----------------------------------------------------------------------------------

// The CUDA provider loads, a strict cuda:N load really is on CUDA, ORT assigned the model's nodes
// to the CUDA provider, and a run allocated from the session's CUDA arena.
void CheckProvider(Report& report) {
  const ebb::ProviderSupport support = ebb::ReadProviderSupport();
  report.figures()["ort_version"] = ebb::OrtVersion();
  report.figures()["provider_library"] = {{"state", ebb::CudaLibraryName(support.cuda)},
                                          {"path", support.cuda_path},
                                          {"detail", support.cuda_detail}};
  if (auto problem = CudaProblem()) {
    // What can be checked without a GPU: the assignment read-out itself, on a CPU session.
    auto runtime = NewRuntime(SharedCudaPolicy(), report);
    if (runtime) report.figures()["assignment_on_cpu"] = NodesPerProvider("waifu2x_scale2x", false);
    return report.Unusable(*problem);
  }
  report.Goal("provider_library_loadable", support.cuda == ebb::ProviderSupport::CudaLibrary::kLoadable);
  auto runtime = NewRuntime(SharedCudaPolicy(), report);
  if (!runtime) return;
  auto session = LoadOnCuda(*runtime, "waifu2x_scale2x", report);
  if (!session) return;
  const ebb::ResolvedDevice& d = session->device();
  report.figures()["device"] = {{"resolved", d.ToString()}, {"provider", d.provider},
                                {"fallback_reason", d.fallback_reason}};
  report.Goal("session_on_requested_cuda_device", d.kind == DeviceKind::kCuda && d.index == g_options.device &&
                                                      d.provider == "CUDAExecutionProvider" &&
                                                      d.fallback_reason.empty());
  Json assignment = NodesPerProvider("waifu2x_scale2x", !g_options.exercise_on_cpu);
  report.figures()["assignment"] = assignment;
  // Every Conv must be on CUDA (the work); a small node ORT keeps on the CPU is reported, not a failure.
  const int64_t cuda_nodes = assignment.contains("nodes") ? assignment["nodes"].value("CUDAExecutionProvider", 0) : 0;
  bool conv_elsewhere = false;
  if (assignment.contains("node_types_not_on_cuda")) {
    for (const auto& [ep, types] : assignment["node_types_not_on_cuda"].items()) {
      for (const auto& t : types) conv_elsewhere |= t.get<std::string>() == "Conv";
    }
  }
  report.Goal("cuda_got_every_conv", cuda_nodes > 0 && !conv_elsewhere);
  auto out = session->Run(Input(*session, Frame(64, 1)));
  if (!out.ok()) return report.Fail("run: " + out.status().ToString());
  auto arena = DeviceArena(*session);
  report.figures()["arena_after_run"] = ToJson(arena);
  report.Goal("run_allocated_from_cuda_arena", arena && arena->allocations > 0);
}

// The CUDA arena grows by what is asked (kSameAsRequested, the policy's default) and a release
// gives every region back; with next_power_of_two (ORT's default) the first region stays.
void CheckArenaStrategy(Report& report) {
  if (auto problem = CudaProblem()) return report.Unusable(*problem);
  for (const auto strategy : {ebb::ExtendStrategy::kSameAsRequested, ebb::ExtendStrategy::kNextPowerOfTwo}) {
    const bool same = strategy == ebb::ExtendStrategy::kSameAsRequested;
    const std::string key = same ? "same_as_requested" : "next_power_of_two";
    MemoryPolicy policy = SharedCudaPolicy();
    policy.cuda.arena_settings.extend_strategy = strategy;
    auto runtime = NewRuntime(policy, report);
    if (!runtime) return;
    auto session = LoadOnCuda(*runtime, "convnet", report);
    if (!session) return;
    auto trace = TraceOperation(*runtime, session, Frames(2, g_options.side), report);
    if (!trace) return;
    report.figures()[key] = ToJson(*trace);
    if (same) {
      report.Goal("same_as_requested_grew", Reserved(trace->arena_peak) >= 16 * kMiB);
      report.Goal("same_as_requested_released_every_region",
                  Reserved(trace->arena_after) <= kMiB && trace->arena_after && trace->arena_after->regions == 0);
    } else {
      report.Goal("next_power_of_two_kept_its_first_region", Reserved(trace->arena_after) > 0);
    }
  }
}

// One operation over several frames releases once, at its last run, naming the session's real
// device; device memory goes back to its after-load value (±5%) and the session stays cached.
void CheckOperationRelease(Report& report) {
  if (auto problem = CudaProblem()) return report.Unusable(*problem);
  auto runtime = NewRuntime(SharedCudaPolicy(), report);
  if (!runtime) return;
  auto session = LoadOnCuda(*runtime, "waifu2x_scale2x", report);
  if (!session) return;
  const uint64_t loads = runtime->load_count();
  auto trace = TraceOperation(*runtime, session, Frames(3, g_options.side), report);
  if (!trace) return;
  report.figures()["operation"] = ToJson(*trace);
  report.figures()["measured_with"] = Source(trace->after_load);
  std::vector<size_t> releasing;
  for (size_t i = 0; i < trace->records.size(); ++i) {
    if (!trace->records[i].release_spec.empty()) releasing.push_back(i);
  }
  report.Goal("released_once", releasing.size() == 1);
  report.Goal("released_at_the_last_run",
              releasing.size() == 1 && releasing[0] + 1 == trace->records.size() &&
                  trace->records.back().ends_operation);
  const std::string device_entry = "gpu:" + std::to_string(session->device().index);
  const std::string spec = releasing.empty() ? "" : trace->records[releasing[0]].release_spec;
  report.figures()["device_entry"] = device_entry;
  report.Goal("release_names_the_actual_device",
              session->device().index == g_options.device &&
                  (spec == device_entry || spec.rfind(device_entry + ";", 0) == 0));
  const int64_t base = trace->after_load.used(), peak = trace->peak.used(), after = trace->after.used();
  report.figures()["gpu_used_delta_after_minus_after_load"] = after - base;
  report.Goal("operation_used_device_memory", peak - base >= 256 * kMiB);
  report.Goal("device_arena_back_to_floor", Reserved(trace->arena_after) <= Reserved(trace->arena_after_load) + kMiB);
  report.Goal("gpu_used_back_to_after_load_within_5_percent", std::llabs(after - base) * 20 <= base);
  auto again = runtime->Load(ModelFile("waifu2x_scale2x"), OnTarget());
  report.Goal("session_stays_cached", again.ok() && again->get() == session.get() && runtime->load_count() == loads);
  // A second operation on the cached session: where it ends beside where the first ended tells a
  // release that did not happen from what the first runs set up once (cuDNN and cuBLAS handles,
  // kernels loaded on first use), which counts against the after-load figure above.
  auto second = TraceOperation(*runtime, session, Frames(3, g_options.side), report);
  if (!second) return;
  report.figures()["second_operation"] = ToJson(*second);
  const int64_t first_end = trace->after.used(), second_end = second->after.used();
  report.figures()["gpu_used_delta_second_minus_first"] = second_end - first_end;
  report.Goal("second_operation_back_to_where_the_first_ended_within_5_percent",
              std::llabs(second_end - first_end) * 20 <= first_end);
}

// Release mode `never`: the same operation keeps its device memory.
void CheckNeverKeeps(Report& report) {
  if (auto problem = CudaProblem()) return report.Unusable(*problem);
  MemoryPolicy policy = SharedCudaPolicy();
  policy.release = ebb::ReleaseMode::kNever;
  auto runtime = NewRuntime(policy, report);
  if (!runtime) return;
  auto session = LoadOnCuda(*runtime, "waifu2x_scale2x", report);
  if (!session) return;
  auto trace = TraceOperation(*runtime, session, Frames(3, g_options.side), report);
  if (!trace) return;
  report.figures()["operation"] = ToJson(*trace);
  report.figures()["measured_with"] = Source(trace->after_load);
  bool any_release = false;
  for (const ebb::RunRecord& r : trace->records) any_release |= !r.release_spec.empty();
  report.Goal("no_run_released", !any_release);
  const int64_t base = trace->after_load.used(), peak = trace->peak.used(), after = trace->after.used();
  report.Goal("operation_used_device_memory", peak - base >= 256 * kMiB);
  report.Goal("gpu_used_kept", after - base >= (peak - base) / 2);
  report.Goal("device_arena_kept", Reserved(trace->arena_after) >= Reserved(trace->arena_peak) / 2 &&
                                       Reserved(trace->arena_after) > 0);
}

// Outputs are bitwise equal with and without a release (in one session, and across release modes),
// and equal to the CPU's within a tolerance (cuDNN may use TF32).
void CheckOutputsEqual(Report& report) {
  if (auto problem = CudaProblem()) return report.Unusable(*problem);
  const int64_t side = std::min<int64_t>(256, g_options.side);
  constexpr double kTolerance = 1e-2;  // of max(1, largest CPU value)
  report.figures()["side"] = side;
  report.figures()["tolerance"] = kTolerance;
  for (const std::string model : {"waifu2x_scale2x", "convnet"}) {
    Json& f = report.figures()[model];
    std::map<std::string, std::vector<Tensor>> by_mode;
    for (const auto mode : {ebb::ReleaseMode::kOperationEnd, ebb::ReleaseMode::kNever, ebb::ReleaseMode::kEveryRun}) {
      MemoryPolicy policy = SharedCudaPolicy();
      policy.release = mode;
      auto runtime = NewRuntime(policy, report);
      if (!runtime) return;
      auto session = LoadOnCuda(*runtime, model, report);
      if (!session) return;
      if (mode == ebb::ReleaseMode::kOperationEnd) {
        // One session: a run that does not release, one that does, and one after the release.
        std::vector<Tensor> same;
        for (const bool ends : {false, true, true}) {
          ebb::RunFlags flags;
          flags.ends_operation = ends;
          auto out = session->Run(Input(*session, Frame(side, 7)), flags);
          if (!out.ok()) return report.Fail(model + ": run: " + out.status().ToString());
          same.push_back(std::move((*out)[0].tensor));
        }
        report.Goal(model + ": bitwise_with_and_without_release_in_one_session",
                    same[0].BitwiseEquals(same[1]) && same[0].BitwiseEquals(same[2]));
      }
      auto outputs = ebb::RunPerFrame(*runtime, session, Frames(3, side));
      if (!outputs.ok()) return report.Fail(model + ": RunPerFrame: " + outputs.status().ToString());
      by_mode[ebb::ReleaseModeName(mode)] = std::move(*outputs);
    }
    report.Goal(model + ": bitwise_operation_end_vs_never", AllBitwiseEqual(by_mode["operation_end"], by_mode["never"]));
    report.Goal(model + ": bitwise_every_run_vs_never", AllBitwiseEqual(by_mode["every_run"], by_mode["never"]));
    auto runtime = NewRuntime(SharedCudaPolicy(), report);
    if (!runtime) return;
    auto cpu = runtime->Load(ModelFile(model), {.device = DeviceRequest::Cpu()});
    if (!cpu.ok()) return report.Fail(model + ": CPU load: " + cpu.status().ToString());
    auto cpu_outputs = ebb::RunPerFrame(*runtime, *cpu, Frames(3, side));
    if (!cpu_outputs.ok()) return report.Fail(model + ": CPU RunPerFrame: " + cpu_outputs.status().ToString());
    double max_abs = 0, sum_abs = 0, largest = 0;
    int64_t n = 0;
    bool shapes_match = cpu_outputs->size() == by_mode["never"].size();
    for (size_t i = 0; shapes_match && i < cpu_outputs->size(); ++i) {
      const Tensor& c = (*cpu_outputs)[i];
      const Tensor& g = by_mode["never"][i];
      shapes_match = c.shape() == g.shape() && c.type() == ebb::DataType::kFloat32 && g.type() == c.type();
      if (!shapes_match) break;
      auto cv = c.values<float>();
      auto gv = g.values<float>();
      for (size_t k = 0; k < cv.size(); ++k) {
        const double d = std::fabs(static_cast<double>(cv[k]) - gv[k]);
        max_abs = std::max(max_abs, d);
        sum_abs += d;
        largest = std::max(largest, std::fabs(static_cast<double>(cv[k])));
        ++n;
      }
    }
    f["cpu_vs_cuda"] = {{"max_abs_diff", max_abs}, {"mean_abs_diff", n ? sum_abs / static_cast<double>(n) : 0.0},
                        {"largest_cpu_value", largest}, {"elements", n}};
    report.Goal(model + ": cpu_equal_within_tolerance",
                shapes_match && n > 0 && max_abs <= kTolerance * std::max(1.0, largest));
  }
}

// The pool's CUDA budget is 90% of the device's memory as NVML reads it, and a CUDA model's
// charge is counted on that device.
void CheckCudaBudget(Report& report) {
  if (auto problem = CudaProblem()) return report.Unusable(*problem);
  auto runtime = NewRuntime(SharedCudaPolicy(), report);
  if (!runtime) return;
  const std::string device = "cuda:" + std::to_string(g_options.device);
  ebb::PoolOptions options;
  ebb::ModelPool pool(*runtime, options);
  const GpuReading gpu = ReadGpu();
  const int64_t budget = pool.budget(device);
  const int64_t expected = static_cast<int64_t>(options.cuda_budget_fraction * static_cast<double>(gpu.total));
  report.figures()["nvml_total"] = gpu.total;
  report.figures()["budget"] = budget;
  report.figures()["fraction"] = options.cuda_budget_fraction;
  report.Goal("budget_read_from_nvml", gpu.total > 0 && budget == expected);
  pool.Add({.name = "waifu2x", .path = ModelFile("waifu2x_scale2x"),
            .load = OnTarget()});
  auto lease = pool.Acquire("waifu2x");
  if (!lease.ok()) {
    if (lease.status().code() == ebb::StatusCode::kUnavailable) return report.Unusable(lease.status().message());
    return report.Fail("Acquire: " + lease.status().ToString());
  }
  report.figures()["used_after_load"] = pool.used(device);
  report.figures()["cpu_used_after_load"] = pool.used("cpu");
  report.Goal("model_on_cuda", lease->session()->device().kind == DeviceKind::kCuda);
  report.Goal("charge_counted_on_cuda", pool.used(device) > 0);
}

// A runtime whose CUDA arena is capped at `cap`, waifu2x loaded on the target and run once on a
// full-size frame, which needs more: the run's status in `status` and in the figures. Null when
// the model could not be loaded (the report says why).
struct OverTheCap {
  std::unique_ptr<Runtime> runtime;
  std::shared_ptr<Session> session;
  uint64_t loads_before_the_run = 0;
  ebb::Status status;
};

std::optional<OverTheCap> RunOverTheCap(Report& report, size_t cap) {
  MemoryPolicy policy = SharedCudaPolicy();
  policy.cuda.arena_settings.max_bytes = cap;
  report.figures()["cap"] = cap;
  OverTheCap r;
  r.runtime = NewRuntime(policy, report);
  if (!r.runtime) return std::nullopt;
  r.session = LoadOnCuda(*r.runtime, "waifu2x_scale2x", report);
  if (!r.session) return std::nullopt;
  r.loads_before_the_run = r.runtime->load_count();
  auto out = r.session->Run(Input(*r.session, Frame(g_options.side, 3)));
  r.status = out.ok() ? ebb::Status::Ok() : out.status();
  report.figures()["error"] = {{"code", ebb::StatusCodeName(r.status.code())},
                               {"message", ebb::Clip(r.status.message(), 800)}};
  return r;
}

// A device out-of-memory (a tiny CUDA arena cap, which is also gpu_mem_limit) fails the run with
// kResourceExhausted and a readable message, drops the session from the cache, and the next load works.
void CheckDeviceOutOfMemory(Report& report) {
  if (auto problem = CudaProblem()) return report.Unusable(*problem);
  std::optional<OverTheCap> over = RunOverTheCap(report, 32 * kMiB);
  if (!over) return;
  auto& [runtime, session, loads, st] = *over;
  report.Goal("run_failed_resource_exhausted", st.code() == ebb::StatusCode::kResourceExhausted);
  report.Goal("message_says_out_of_memory_on_cuda", st.message().find("out of memory") != std::string::npos &&
                                                        st.message().find("cuda:") != std::string::npos);
  auto small = session->Run(Input(*session, Frame(64, 4)));
  report.figures()["failed_session_runs_small_input"] = small.ok();
  auto reloaded = runtime->Load(ModelFile("waifu2x_scale2x"), OnTarget());
  if (!reloaded.ok()) return report.Fail("the next load failed: " + reloaded.status().ToString());
  report.Goal("session_dropped_from_cache", reloaded->get() != session.get() && runtime->load_count() == loads + 1);
  auto next = (*reloaded)->Run(Input(**reloaded, Frame(64, 5)));
  report.Goal("next_load_runs", next.ok() && (*reloaded)->device().kind == DeviceKind::kCuda);
  if (!next.ok()) report.Note("next run: " + next.status().ToString());
}

// A device index that does not exist falls back to CPU with its reason (strict: kUnavailable), and
// does not make the Runtime give up on CUDA for the device that does exist.
void CheckFallbackReason(Report& report) {
  if (auto problem = CudaProblem()) return report.Unusable(*problem);
  const int missing = static_cast<int>(ebb::ReadGpuMemory().size());
  report.figures()["missing_index"] = missing;
  auto runtime = NewRuntime(SharedCudaPolicy(), report);
  if (!runtime) return;
  auto lenient = runtime->Load(ModelFile("tiny"), {.device = DeviceRequest::Cuda(missing)});
  if (!lenient.ok()) return report.Fail("lenient load: " + lenient.status().ToString());
  report.figures()["fallback_reason"] = ebb::Clip((*lenient)->device().fallback_reason, 800);
  report.Goal("missing_index_falls_back_to_cpu_with_reason",
              (*lenient)->device().kind == DeviceKind::kCpu && !(*lenient)->device().fallback_reason.empty());
  auto strict = runtime->Load(ModelFile("tiny"), {.device = DeviceRequest::Cuda(missing), .strict_device = true});
  report.figures()["strict_error"] = strict.ok() ? "" : ebb::Clip(strict.status().message(), 800);
  report.Goal("strict_missing_index_unavailable",
              !strict.ok() && strict.status().code() == ebb::StatusCode::kUnavailable);
  auto good = runtime->Load(ModelFile("tiny"), {.device = DeviceRequest::Cuda(g_options.device)});
  report.figures()["existing_index_after"] =
      good.ok() ? Json{{"device", (*good)->device().ToString()}, {"fallback_reason", (*good)->device().fallback_reason}}
                : Json{{"error", good.status().ToString()}};
  report.Goal("existing_index_still_on_cuda_after", good.ok() && (*good)->device().kind == DeviceKind::kCuda);
}

// --- The shared CUDA arena (cuda.arena: shared, env_allocator) -----------------------------------

std::optional<std::string> ReadBytes(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return std::nullopt;
  std::string bytes;
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) bytes.append(buf, n);
  std::fclose(f);
  return bytes;
}

// `bytes` (an ONNX model) with a doc_string of its own (ModelProto field 6, appended: the last
// occurrence of a field wins), so that each copy is a model, and a session, of its own.
std::string Copy(const std::string& bytes, int k) {
  const std::string doc = "ebb_cuda_check copy " + std::to_string(k);  // shorter than 128 bytes
  return bytes + static_cast<char>(6 << 3 | 2) + static_cast<char>(doc.size()) + doc;
}

// CreateSharedAllocator on `device` for one memory type and allocator type, then released:
// "accepted" or "refused: <ORT's message>".
std::string TrySharedAllocator(Ort::Env& env, const OrtEpDevice* device, OrtDeviceMemoryType memory,
                               OrtAllocatorType type, bool arena_options) {
  Ort::KeyValuePairs options;
  if (arena_options) {
    options.Add("arena.extend_strategy", "1");
    options.Add("arena.max_mem", std::to_string(kMiB << 10).c_str());
  }
  try {
    (void)env.CreateSharedAllocator(device, memory, type, options);
    env.ReleaseSharedAllocator(device, memory);
    return "accepted";
  } catch (const Ort::Exception& e) {
    return std::string("refused: ") + e.what();
  }
}

Json Describe(const Ort::ConstEpDevice& d) {
  auto pairs = [](Ort::ConstKeyValuePairs kv) {
    Json j = Json::object();
    if (kv) {
      for (const auto& [k, v] : kv.GetKeyValuePairs()) j[k] = v;
    }
    return j;
  };
  const Ort::ConstHardwareDevice hw = d.Device();
  return {{"ep", d.EpName()},
          {"vendor", d.EpVendor()},
          {"ep_metadata", pairs(d.EpMetadata())},
          {"ep_options", pairs(d.EpOptions())},
          {"hardware", {{"type", static_cast<int>(hw.Type())}, {"vendor_id", hw.VendorId()},
                        {"device_id", hw.DeviceId()}, {"metadata", pairs(hw.Metadata())}}},
          {"device_memory_info", static_cast<const OrtMemoryInfo*>(d.GetMemoryInfo(OrtDeviceMemoryType_DEFAULT)) != nullptr},
          {"host_accessible_memory_info",
           static_cast<const OrtMemoryInfo*>(d.GetMemoryInfo(OrtDeviceMemoryType_HOST_ACCESSIBLE)) != nullptr}};
}

// The first step: ORT's device API on this machine. Registers the CUDA provider library, lists
// the OrtEpDevices, and tells whether CreateSharedAllocator is accepted on the CUDA device (what
// `cuda.arena: shared` needs; refused, ebb's CUDA sessions get their own arenas), beside the CPU
// device's refusal that keeps the shared CPU arena on CreateAndRegisterAllocator. Then which
// route a Runtime with cuda.arena shared took.
void CheckDeviceApi(Report& report) {
  Json& f = report.figures();
  const std::string library = ebb::ReadProviderSupport().cuda_path;
  f["provider_library"] = library;
  bool registered = false;
  {
    Ort::Env env(ORT_LOGGING_LEVEL_FATAL, "ebb");
    for (const Ort::ConstEpDevice& d : env.GetEpDevices()) {
      if (std::string(d.EpName()) != "CPUExecutionProvider") continue;
      const std::string answer = TrySharedAllocator(env, d, OrtDeviceMemoryType_DEFAULT, OrtArenaAllocator, true);
      f["cpu_device_create_shared_allocator"] = answer;
      report.Goal("cpu_device_refused_as_measured", answer.find("Invalid memory type for OrtEpDevice") != std::string::npos);
    }
    try {
      env.RegisterExecutionProviderLibrary("ebb_cuda_check", std::basic_string<ORTCHAR_T>(library.begin(), library.end()));
      registered = true;
      f["register"] = "ok";
    } catch (const Ort::Exception& e) {
      f["register"] = std::string("failed: ") + e.what();
    }
    Json devices = Json::array();
    const OrtEpDevice* cuda = nullptr;
    int cuda_seen = 0;
    for (const Ort::ConstEpDevice& d : env.GetEpDevices()) {
      devices.push_back(Describe(d));
      if (std::string(d.EpName()) == "CUDAExecutionProvider" && cuda_seen++ == g_options.device) cuda = d;
    }
    f["ep_devices"] = devices;
    if (registered) {
      report.Goal("cuda_ep_device_listed", cuda != nullptr);
      if (cuda) {
        report.Goal("cuda_device_memory_info", Ort::GetApi().EpDevice_MemoryInfo(cuda, OrtDeviceMemoryType_DEFAULT) != nullptr);
        Json answers = Json::object();
        // ORT 1.29 refuses OrtArenaAllocator ("reserved for ONNX Runtime internal usage only", measured on an
        // H200): the arena is asked for with OrtDeviceAllocator and the arena keys, ebb's route.
        for (const auto& [key, memory, type, arena_keys] :
             {std::tuple{"default_arena", OrtDeviceMemoryType_DEFAULT, OrtArenaAllocator, true},
              std::tuple{"default_device_arena_options", OrtDeviceMemoryType_DEFAULT, OrtDeviceAllocator, true},
              std::tuple{"default_device", OrtDeviceMemoryType_DEFAULT, OrtDeviceAllocator, false},
              std::tuple{"host_accessible_arena", OrtDeviceMemoryType_HOST_ACCESSIBLE, OrtArenaAllocator, true},
              std::tuple{"host_accessible_device", OrtDeviceMemoryType_HOST_ACCESSIBLE, OrtDeviceAllocator, false}}) {
          answers[key] = TrySharedAllocator(env, cuda, memory, type, arena_keys);
        }
        f["cuda_device_create_shared_allocator"] = answers;
        report.Note("CreateSharedAllocator on the CUDA OrtEpDevice (device memory, device allocator with the arena "
                    "keys): " + answers["default_device_arena_options"].get<std::string>());
      }
      try {
        env.UnregisterExecutionProviderLibrary("ebb_cuda_check");
      } catch (const Ort::Exception& e) {
        f["unregister"] = e.what();
      }
    }
  }
  if (!registered && !g_options.exercise_on_cpu) return report.Unusable(f["register"].get<std::string>());
  // Which route a Runtime with cuda.arena: shared took for cuda:N.
  auto runtime = NewRuntime(SharedCudaPolicy(), report);
  if (!runtime) return;
  auto session = LoadOnCuda(*runtime, "tiny", report);
  if (!session) return;
  auto out = session->Run(Input(*session, Tensor(ebb::DataType::kFloat32, {1, 64})));
  f["runtime_run"] = out.ok() ? "ok" : out.status().ToString();
  Json arenas = Json::array();
  for (const ebb::ArenaStats& a : runtime->ReadMemory().arenas) arenas.push_back(a.name);
  f["runtime_arenas"] = arenas;
  f["runtime_release_targets"] = session->release_targets();
  report.Goal("runtime_run_ok", out.ok());
}

int64_t CudaReserved(const ebb::MemoryReading& reading) {
  int64_t total = 0;
  for (const ebb::ArenaStats& a : reading.arenas) {
    if (a.name.rfind("gpu:", 0) == 0) total += a.reserved;
  }
  return total;
}

// `sessions` CUDA sessions of one model (copies of convnet with distinct bytes), each run once, as
// the Java service of the story does, under four policies: per_session and shared (and
// env_allocator) with release `never` (ORT's own behaviour: what the arenas keep), and shared with
// `operation_end`. The device's CUDA reserved bytes (ebb's arena figures) and NVML's process figure
// after the 1st, 10th and last session: the shared arena stays under its cap and does not grow with
// the sessions; per-session arenas grow by one arena per session.
void CheckSharedArena(Report& report) {
  if (auto problem = CudaProblem()) return report.Unusable(*problem);
  const std::optional<std::string> bytes = ReadBytes(ModelFile("convnet"));
  if (!bytes) return report.Fail("cannot read " + ModelFile("convnet"));
  const int n = std::max(g_options.sessions, 11);
  const int64_t side = std::min<int64_t>(512, g_options.side);
  const int64_t cap = kMiB << 10;
  Json& f = report.figures();
  f["sessions"] = n;
  f["side"] = side;
  f["cap"] = cap;
  struct Mode {
    const char* name;
    ebb::CudaArenaMode arena;
    ebb::ReleaseMode release;
  };
  std::map<std::string, std::vector<int64_t>> reserved, process;
  for (const Mode& m : {Mode{"per_session_never", ebb::CudaArenaMode::kPerSession, ebb::ReleaseMode::kNever},
                        Mode{"shared_never", ebb::CudaArenaMode::kShared, ebb::ReleaseMode::kNever},
                        Mode{"env_allocator_never", ebb::CudaArenaMode::kEnvAllocator, ebb::ReleaseMode::kNever},
                        Mode{"shared_operation_end", ebb::CudaArenaMode::kShared, ebb::ReleaseMode::kOperationEnd}}) {
    MemoryPolicy policy = SharedCudaPolicy();
    policy.cuda.arena = m.arena;
    policy.release = m.release;
    policy.cuda.arena_settings.max_bytes = static_cast<size_t>(cap);
    auto runtime = NewRuntime(policy, report);
    if (!runtime) return;
    const GpuReading before = ReadGpu();
    std::vector<std::shared_ptr<Session>> sessions;
    std::vector<int64_t>& r = reserved[m.name];
    std::vector<int64_t>& p = process[m.name];
    for (int k = 0; k < n; ++k) {
      ebb::LoadOptions options = OnTarget();
      options.name = "convnet_" + std::to_string(k);
      auto session = runtime->LoadFromBytes(Copy(*bytes, k), options);
      if (!session.ok()) {
        if (session.status().code() == ebb::StatusCode::kUnavailable) return report.Unusable(session.status().message());
        return report.Fail(std::string(m.name) + ": load " + std::to_string(k) + ": " + session.status().ToString());
      }
      sessions.push_back(*session);
      auto out = (*session)->Run(Input(**session, Frame(side, static_cast<uint32_t>(k + 1))));
      if (!out.ok()) return report.Fail(std::string(m.name) + ": run " + std::to_string(k) + ": " + out.status().ToString());
      r.push_back(CudaReserved(runtime->ReadMemory()));
      p.push_back(ReadGpu().used());
    }
    Json arenas = Json::array();
    for (const ebb::ArenaStats& a : runtime->ReadMemory().arenas) {
      if (a.name.rfind("gpu:", 0) == 0 && arenas.size() < 4) arenas.push_back(ToJson(std::optional<ebb::ArenaStats>(a)));
    }
    auto at = [&](const std::vector<int64_t>& v) {
      return Json{{"1", v[0]}, {"10", v[9]}, {std::to_string(n), v[n - 1]}};
    };
    f[m.name] = {{"cuda_reserved", at(r)},
                 {"cuda_reserved_max", *std::max_element(r.begin(), r.end())},
                 {"cuda_reserved_per_session_10_to_last", static_cast<double>(r[n - 1] - r[9]) / (n - 10)},
                 {"gpu_used_before_load", ToJson(before)},
                 {"gpu_used", at(p)},
                 {"gpu_used_per_session_10_to_last", static_cast<double>(p[n - 1] - p[9]) / (n - 10)},
                 {"measured_with", Source(before)},
                 {"loads", runtime->load_count()},
                 {"cuda_arenas_first_4", arenas}};
  }
  const auto& shared = reserved["shared_never"];
  const auto& own = reserved["per_session_never"];
  report.Goal("shared_reserved_under_cap", *std::max_element(shared.begin(), shared.end()) <= cap);
  report.Goal("shared_arena_reported", shared[0] > 0);
  report.Goal("shared_not_growing_with_sessions", shared[n - 1] - shared[9] <= std::max<int64_t>(kMiB, shared[9] / 20));
  report.Goal("per_session_grows_with_sessions", own[0] > 0 && (own[n - 1] - own[9]) / (n - 10) >= own[0] / 2);
  report.Goal("shared_below_per_session_at_the_last_session", shared[n - 1] * 4 <= own[n - 1]);
  const auto& ps = process["shared_never"];
  const auto& po = process["per_session_never"];
  report.Goal("nvml_grows_less_with_the_shared_arena", ps[n - 1] - ps[9] < po[n - 1] - po[9]);
}

// The shared arena gives its memory back at the end of each operation: two models on cuda:0 share
// it (one gpu:N entry, one arena); after an operation of each (3 frames), the arena is back to its
// floor and the device memory to its after-load value within 5%.
void CheckSharedArenaRelease(Report& report) {
  if (auto problem = CudaProblem()) return report.Unusable(*problem);
  auto runtime = NewRuntime(SharedCudaPolicy(), report);
  if (!runtime) return;
  auto waifu2x = LoadOnCuda(*runtime, "waifu2x_scale2x", report);
  if (!waifu2x) return;
  auto convnet = LoadOnCuda(*runtime, "convnet", report);
  if (!convnet) return;
  const std::string shared_name = "gpu:" + std::to_string(g_options.device) + ":shared";
  report.figures()["arenas"] = [&] {
    Json j = Json::array();
    for (const ebb::ArenaStats& a : runtime->ReadMemory().arenas) j.push_back(a.name);
    return j;
  }();
  report.Goal("one_shared_arena_for_both", g_options.exercise_on_cpu ||
                                               (runtime->ReadMemory().Find(shared_name).has_value() &&
                                                waifu2x->SharesArenaWith(*convnet)));
  for (const auto& [name, session] : {std::pair{"waifu2x", waifu2x}, std::pair{"convnet", convnet}}) {
    auto trace = TraceOperation(*runtime, session, Frames(3, g_options.side), report);
    if (!trace) return;
    report.figures()[name] = ToJson(*trace);
    const int64_t base = trace->after_load.used(), peak = trace->peak.used(), after = trace->after.used();
    report.figures()[std::string(name) + "_delta_after_minus_after_load"] = after - base;
    report.Goal(std::string(name) + ": released_at_the_last_run",
                !trace->records.empty() && !trace->records.back().release_spec.empty());
    report.Goal(std::string(name) + ": operation_used_device_memory", peak - base >= 64 * kMiB);
    report.Goal(std::string(name) + ": shared_arena_back_to_floor",
                Reserved(trace->arena_after) <= Reserved(trace->arena_after_load) + kMiB);
    report.Goal(std::string(name) + ": gpu_used_back_to_after_load_within_5_percent", std::llabs(after - base) * 20 <= base);
  }
  report.figures()["measured_with"] = Source(ReadGpu());
}

// A run over the shared arena's cap fails readably (kResourceExhausted, naming the shared CUDA
// arena and its cap), and the next run works: on the same device, in the same arena.
void CheckSharedArenaOutOfMemory(Report& report) {
  if (auto problem = CudaProblem()) return report.Unusable(*problem);
  std::optional<OverTheCap> over = RunOverTheCap(report, 64 * kMiB);
  if (!over) return;
  auto& [runtime, session, loads, st] = *over;
  report.Goal("run_over_the_cap_failed_resource_exhausted", st.code() == ebb::StatusCode::kResourceExhausted);
  report.Goal("message_names_the_shared_cuda_arena_and_its_cap",
              st.message().find("out of memory") != std::string::npos &&
                  st.message().find("shared CUDA arena of cuda:") != std::string::npos &&
                  st.message().find("cap 64.0 MiB") != std::string::npos);
  auto arena = DeviceArena(*session);
  report.figures()["arena_after_failure"] = ToJson(arena);
  report.Goal("arena_under_its_cap_after", Reserved(arena) <= 64 * kMiB);
  auto next = runtime->Load(ModelFile("waifu2x_scale2x"), OnTarget());
  if (!next.ok()) return report.Fail("the next load failed: " + next.status().ToString());
  auto small = (*next)->Run(Input(**next, Frame(64, 4)));
  report.figures()["next_run"] = small.ok() ? "ok" : small.status().ToString();
  report.Goal("next_run_works", small.ok() && (*next)->device().kind == DeviceKind::kCuda);
  auto other = LoadOnCuda(*runtime, "convnet", report);
  if (!other) return;
  auto other_out = other->Run(Input(*other, Frame(64, 5)));
  report.Goal("another_session_of_the_device_runs", other_out.ok());
}

struct Check {
  const char* name;
  void (*run)(Report&);
};

constexpr Check kChecks[] = {
    {"device_api", CheckDeviceApi},  // first: whether the CUDA device takes a shared arena
    {"provider", CheckProvider},
    {"arena_strategy", CheckArenaStrategy},
    {"operation_release", CheckOperationRelease},
    {"never_keeps", CheckNeverKeeps},
    {"outputs_equal", CheckOutputsEqual},
    {"cuda_budget", CheckCudaBudget},
    {"device_oom", CheckDeviceOutOfMemory},
    {"fallback_reason", CheckFallbackReason},
    {"shared_arena", CheckSharedArena},
    {"shared_arena_release", CheckSharedArenaRelease},
    {"shared_arena_oom", CheckSharedArenaOutOfMemory},
};

int Usage(const std::string& problem) {
  std::fprintf(stderr,
               "ebb_cuda_check: %s\nusage: ebb_cuda_check [--models DIR] [--device N] [--side PIXELS] "
               "[--sessions N] [--expect-gpu | --exercise-on-cpu] [--check NAME]... [--list]\n",
               problem.c_str());
  return 2;
}

}  // namespace

// A crash on the device machine leaves its stack on stderr (the check's log): the frames name the
// library (ORT, its CUDA provider, this program) even where the bundle's binaries are stripped.
void PrintStackAndDie(int signal_number) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  const char header[] = "ebb_cuda_check: fatal signal; stack:\n";
  (void)!write(2, header, sizeof header - 1);
  backtrace_symbols_fd(frames, n, 2);
  std::signal(signal_number, SIG_DFL);
  raise(signal_number);
}

int main(int argc, char** argv) {
  // ORT's telemetry off, as ebb sets it before its first environment (CheckDeviceApi makes its own
  // Ort::Env, which may come first), unless the user set the variable.
  setenv("ORT_DISABLE_TELEMETRY", "1", /*overwrite=*/0);
  std::signal(SIGSEGV, PrintStackAndDie);
  std::signal(SIGABRT, PrintStackAndDie);
  std::signal(SIGBUS, PrintStackAndDie);
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) return std::nullopt;
      return std::string(argv[++i]);
    };
    if (arg == "--list") {
      list = true;
    } else if (arg == "--expect-gpu") {
      g_options.expect_gpu = true;
    } else if (arg == "--exercise-on-cpu") {
      g_options.exercise_on_cpu = true;
    } else if (arg == "--models" || arg == "--device" || arg == "--side" || arg == "--check" || arg == "--sessions") {
      auto v = value();
      if (!v) return Usage(arg + " needs a value");
      if (arg == "--models") g_options.models = *v;
      if (arg == "--check") g_options.checks.push_back(*v);
      if (arg == "--device" || arg == "--side" || arg == "--sessions") {
        char* end = nullptr;
        const long n = std::strtol(v->c_str(), &end, 10);
        if (end == v->c_str() || *end != '\0' || n < 0 || (arg == "--side" && n < 64) ||
            (arg == "--sessions" && (n < 11 || n > 1000))) {
          return Usage("bad value for " + arg + ": " + *v);
        }
        if (arg == "--device") g_options.device = static_cast<int>(n);
        if (arg == "--sessions") g_options.sessions = static_cast<int>(n);
        if (arg == "--side") g_options.side = n;
      }
    } else {
      return Usage("unknown argument " + arg);
    }
  }
  if (g_options.expect_gpu && g_options.exercise_on_cpu) return Usage("--expect-gpu or --exercise-on-cpu, not both");
  if (list) {
    for (const Check& c : kChecks) std::printf("%s\n", c.name);
    return 0;
  }
  std::vector<const Check*> selected;
  for (const std::string& name : g_options.checks) {
    auto it = std::find_if(std::begin(kChecks), std::end(kChecks), [&](const Check& c) { return name == c.name; });
    if (it == std::end(kChecks)) return Usage("unknown check " + name + " (--list lists them)");
    selected.push_back(&*it);
  }
  if (selected.empty()) {
    for (const Check& c : kChecks) selected.push_back(&c);
  }
  int failed = 0, skipped = 0;
  for (const Check* c : selected) {
    Report report(c->name);
    const auto start = std::chrono::steady_clock::now();
    try {
      c->run(report);
    } catch (const std::exception& e) {
      report.Fail(std::string("exception: ") + e.what());
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const Json j = report.Finish(seconds);
    failed += j["status"] == "fail";
    skipped += j["status"] == "skip";
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  if (failed) return 1;
  return skipped == static_cast<int>(selected.size()) ? 77 : 0;
}
