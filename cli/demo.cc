// `ebb demo`: shows, on the bundled models, memory after load, at the peak of
// a multi-run operation, and after the release at its end.
#include <cstdio>

#include "commands.h"

namespace ebb::cli {
namespace {

void PrintReading(const char* when, const MemoryReading& r) {
  const std::optional<ArenaStats> shared = r.Find("cpu:shared");
  std::printf("  %-34s arena reserved %8.1f MiB   in use %8.1f MiB   RSS %8.1f MiB\n", when,
              shared ? static_cast<double>(shared->reserved) / (1 << 20) : 0.0,
              shared ? static_cast<double>(shared->in_use) / (1 << 20) : 0.0,
              static_cast<double>(r.rss_bytes) / (1 << 20));
}

int DemoModel(Runtime& runtime, const CommonOptions& options, const std::string& model, int64_t side, int frames) {
  auto session = LoadOrReport(runtime, ModelPath(options, model), options.device);
  if (!session) return 1;
  std::printf("\n%s on %s: an operation of %d frames of %lldx%lld\n", model.c_str(),
              session->device().ToString().c_str(), frames, static_cast<long long>(side),
              static_cast<long long>(side));
  PrintReading("after load", runtime.ReadMemory());
  for (int i = 0; i < frames; ++i) {
    RunFlags flags;
    flags.ends_operation = i == frames - 1;
    auto out = session->Run(NoiseImage(session->inputs()[0].name, side, side, i + 1), flags);
    if (!out.ok()) return Fail(out.status());
    char label[64];
    std::snprintf(label, sizeof label, flags.ends_operation ? "after frame %d/%d (released)" : "after frame %d/%d",
                  i + 1, frames);
    PrintReading(label, runtime.ReadMemory());
  }
  std::printf("  the session stays loaded: %llu load(s) in total\n",
              static_cast<unsigned long long>(runtime.load_count()));
  return 0;
}

}  // namespace

int RunDemo(const DemoOptions& options) {
  auto runtime = MakeRuntime(options.common);
  if (!runtime) return 1;
  std::printf("ebb demo: models stay loaded; their inference memory goes back at the end of each operation.\n");
  if (int rc = DemoModel(*runtime, options.common, "convnet", options.size, 3)) return rc;
  if (int rc = DemoModel(*runtime, options.common, "ppocr_det", 960, 2)) return rc;
  std::printf("\nmemory reading as JSON:\n%s\n", runtime->ReadMemory().ToJson().c_str());
  return 0;
}

}  // namespace ebb::cli
