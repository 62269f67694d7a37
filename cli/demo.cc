// `ebb demo`: shows, on the bundled models, memory after load, at the peak of
// a multi-run operation, and after its end, under the policy in force: the
// text says what that policy does, and each row what its run really did.
#include <algorithm>
#include <cstdio>

#include "commands.h"

namespace ebb::cli {
namespace {

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// What the policy does with inference memory, in words.
void DescribePolicy(const MemoryPolicy& policy, Runtime& runtime) {
  std::printf("ebb demo: the policy in force (release: %s, cpu arena: %s)\n", ReleaseModeName(policy.release),
              policy.cpu.arena == CpuArenaMode::kShared       ? "shared"
              : policy.cpu.arena == CpuArenaMode::kPerSession ? "per_session"
                                                              : "none");
  switch (policy.release) {
    case ReleaseMode::kOperationEnd:
      std::printf("  models stay loaded; their inference memory goes back at the end of each operation\n");
      break;
    case ReleaseMode::kEveryRun:
      std::printf("  models stay loaded; their inference memory goes back after every run\n");
      break;
    case ReleaseMode::kNever:
      std::printf("  models stay loaded; their inference memory is never given back: an arena keeps what its "
                  "runs grew it to (ORT's own behaviour)\n");
      break;
    case ReleaseMode::kIdle:
      std::printf("  models stay loaded; their inference memory goes back at the end of each operation, and after "
                  "single runs once no run has ended for %d ms\n",
                  policy.idle_release_ms);
      break;
  }
  switch (policy.cpu.arena) {
    case CpuArenaMode::kShared: {
      const std::optional<ArenaStats> shared = runtime.ReadMemory().Find("cpu:shared");
      const double cap = shared ? MiB(shared->limit) : 0.0;
      std::printf("  one CPU arena shared by every session, capped at %.1f %s\n", cap >= 1024 ? cap / 1024 : cap,
                  cap >= 1024 ? "GiB" : "MiB");
      break;
    }
    case CpuArenaMode::kPerSession:
      std::printf("  every session has its own CPU arena (ORT's, growing by powers of two)\n");
      break;
    case CpuArenaMode::kNone:
      std::printf("  no CPU arena: each run allocates its tensors with malloc and frees them; there is no arena "
                  "to give back\n");
      break;
  }
}

// The arenas the session's runs allocate from: the shared CPU arena, or the
// session's own (a per-session CPU arena, or its GPU arena); their name and
// summed statistics ("none" and zeros when it has no arena).
struct ArenaUse {
  std::string name;
  int64_t reserved = 0, in_use = 0;
};

ArenaUse ReadArenaUse(const Session& session, const MemoryReading& reading) {
  const std::optional<ArenaStats> shared = reading.Find("cpu:shared");
  if (shared && session.device().kind == DeviceKind::kCpu) return {"cpu:shared", shared->reserved, shared->in_use};
  ArenaUse use;
  std::vector<ArenaStats> arenas = session.ReadOwnArenas();
  if (auto device = session.ReadSharedDeviceArena()) arenas.push_back(*device);  // gpu:N:shared
  for (const ArenaStats& a : arenas) {
    use.name += (use.name.empty() ? "" : "+") + a.name;
    use.reserved += a.reserved;
    use.in_use += a.in_use;
  }
  if (use.name.empty()) use.name = "none";
  return use;
}

void PrintReading(const std::string& when, Runtime& runtime, const Session& session) {
  const MemoryReading r = runtime.ReadMemory();
  const ArenaUse arena = ReadArenaUse(session, r);
  std::printf("  %-36s arena reserved %8.1f MiB   in use %8.1f MiB   RSS %8.1f MiB\n", when.c_str(),
              MiB(arena.reserved), MiB(arena.in_use), MiB(r.rss_bytes));
}

// What a run did at its end, from its RunRecord.
std::string RunOutcome(const RunRecord& record) {
  if (!record.release_spec.empty() || record.trimmed) return " (released)";
  if (record.release_deferred) return " (release deferred)";
  return record.ends_operation ? " (ends; not released)" : "";
}

int DemoModel(Runtime& runtime, const CommonOptions& options, const std::string& model, int64_t side, int frames) {
  const uint64_t loads_before = runtime.load_count();
  auto session = LoadOrReport(runtime, model, options);
  if (!session) return 1;
  std::printf("\n%s on %s: an operation of %d frames of %lldx%lld; arena column: %s\n", model.c_str(),
              session->device().ToString().c_str(), frames, static_cast<long long>(side),
              static_cast<long long>(side), ReadArenaUse(*session, runtime.ReadMemory()).name.c_str());
  PrintReading("after load", runtime, *session);
  for (int i = 0; i < frames; ++i) {
    RunRecord record;
    RunObserver observer = [&record](const RunRecord& r) { record = r; };
    RunFlags flags;
    flags.ends_operation = i == frames - 1;
    flags.release = OperationReleaseMode(runtime.policy(), std::nullopt);  // these runs are one operation
    flags.observer = &observer;
    auto out = session->Run(NoiseImage(session->inputs()[0].name, side, side, i + 1), flags);
    if (!out.ok()) return Fail(out.status());
    PrintReading("after frame " + std::to_string(i + 1) + "/" + std::to_string(frames) + RunOutcome(record), runtime,
                 *session);
  }
  std::printf("  %s stays loaded: %llu load(s) of this model\n", model.c_str(),
              static_cast<unsigned long long>(runtime.load_count() - loads_before));
  return 0;
}

}  // namespace

int RunDemo(const DemoOptions& options) {
  auto policy = PolicyFrom(options.common);
  if (!policy.ok()) return Fail(policy.status());
  auto runtime = MakeRuntime(*policy);
  if (!runtime) return 1;
  DescribePolicy(*policy, *runtime);
  if (int rc = DemoModel(*runtime, options.common, "convnet", options.size, 3)) return rc;
  // The detector takes sides that are multiples of 32; 960 is its usual input.
  const int64_t ocr_side = std::min<int64_t>(960, (options.size + 31) / 32 * 32);
  if (int rc = DemoModel(*runtime, options.common, "ppocr_det", ocr_side, 2)) return rc;
  std::printf("\nmemory reading as JSON:\n%s\n", runtime->ReadMemory().ToJson().c_str());
  return 0;
}

}  // namespace ebb::cli
