// `ebb bench release`: one tiled upscaling operation over several frames,
// repeated, under each release mode — never, every_run, operation_end — and
// destroy_session (drop the session after every operation and load it again
// from the model file, what applications without ebb do to get their memory
// back; ebb's optimized-model cache is off in that mode).

#include <map>

#include "bench.h"
#include "ebb/tiler.h"
#include "port/port.h"

namespace ebb::cli {
namespace {

struct ModeResult {
  double total_ms = 0;
  int64_t reserved_peak = 0;
  int64_t reserved_after = 0;
  int64_t rss_after = 0;
  uint64_t loads = 0;
  int runs = 0;
  std::string device;                // where the session really ran ("cuda:0", "cpu")
  std::vector<double> operation_ms;  // each operation, load included
  double load_ms = 0;                // time spent in Load (non-zero only when it loads)
};

// Arena bytes the session's runs use: the shared arena, or its own.
int64_t ArenaReserved(Runtime& runtime, const Session* session) {
  int64_t reserved = SharedReserved(runtime);
  if (session) {
    for (const ArenaStats& a : session->ReadOwnArenas()) reserved += a.reserved;
  }
  return reserved;
}

Result<ModeResult> MeasureMode(const std::string& mode, const BenchOptions& options, const std::vector<Tensor>& frames,
                               const TileOptions& tiles, int repeats) {
  auto policy = PolicyFrom(options.common);
  if (!policy.ok()) return policy.status();
  const bool destroy = mode == "destroy_session";
  if (destroy) {
    policy->release = ReleaseMode::kNever;
    policy->cpu.arena = CpuArenaMode::kPerSession;  // ORT's own default
    policy->optimized_model_cache.enabled = false;  // an application without ebb reloads from the model file
  } else {
    policy->release = *ParseReleaseMode(mode);
  }
  auto runtime = MakeRuntime(*policy);
  if (!runtime) return Internal("cannot create a runtime for mode " + mode);
  auto model = ResolveModel(options.model, options.common);
  if (!model.ok()) return model.status();
  const std::string& path = model->path;
  auto request = DeviceRequest::Parse(DeviceFor(options.common, *model));
  if (!request.ok()) return request.status();

  ModeResult result;
  const Session* current = nullptr;
  OperationOptions op_options;
  op_options.on_progress = [&](const Progress&) {
    ++result.runs;
    result.reserved_peak = std::max(result.reserved_peak, ArenaReserved(*runtime, current));
  };
  const double start = NowMs();
  for (int r = 0; r < repeats; ++r) {
    const double op_start = NowMs();
    const uint64_t loads_before = runtime->load_count();
    auto session = runtime->Load(path, {.device = *request});
    if (!session.ok()) return session.status();
    if (runtime->load_count() != loads_before) result.load_ms += NowMs() - op_start;
    current = session->get();
    result.device = (*session)->device().ToString();
    auto out = RunTiled(*runtime, *session, frames, tiles, op_options);
    if (!out.ok()) return out.status();
    result.operation_ms.push_back(NowMs() - op_start);
    if (destroy) {
      runtime->Clear();  // the session (and its arena) goes with its last reference
      current = nullptr;
    }
  }
  result.total_ms = NowMs() - start;
  result.reserved_after = ArenaReserved(*runtime, current);
  result.rss_after = ReadRssBytes();
  result.loads = runtime->load_count();
  return result;
}

}  // namespace

int BenchRelease(const BenchOptions& options) {
  const BenchOptions o = WithModel(options, "waifu2x_scale2x");
  const int64_t side = o.size ? o.size : 128;
  const int frames_count = 2, repeats = o.iterations ? o.iterations : 3;
  TileOptions tiles{.tile = 48, .overlap = 8};
  std::vector<Tensor> frames;
  for (int f = 0; f < frames_count; ++f) frames.push_back(std::move(NoiseImage("x", side, side, f + 1)[0].tensor));
  auto plan = PlanTiles(side, side, tiles);
  if (!plan.ok()) return Fail(plan.status());

  nlohmann::json modes;
  std::map<std::string, ModeResult> results;
  for (const char* mode : {"never", "every_run", "operation_end", "destroy_session"}) {
    port::TrimHeap();  // start every mode from the same heap state
    auto r = MeasureMode(mode, o, frames, tiles, repeats);
    if (!r.ok()) return Fail(r.status());
    results[mode] = *r;
    modes[mode] = {{"total_ms", r->total_ms},     {"reserved_peak", r->reserved_peak},
                   {"reserved_after", r->reserved_after}, {"rss_after", r->rss_after},
                   {"loads", r->loads},           {"runs", r->runs},
                   {"device", r->device},
                   {"operation_ms", r->operation_ms}, {"load_ms", r->load_ms}};
  }
  const ModeResult& end = results["operation_end"];
  PrintJson({{"model", o.model},
             {"device", end.device},
             {"frames", frames_count},
             {"frame_shape", {1, 3, side, side}},
             {"tile", tiles.tile},
             {"overlap", tiles.overlap},
             {"tiles_per_frame", plan->size()},
             {"operations_per_mode", repeats},
             {"modes", modes},
             {"operation_end_time_vs_never", end.total_ms / results["never"].total_ms},
             {"goals",
              {{"operation_end_at_floor_like_every_run",
                end.reserved_after <= results["every_run"].reserved_after + (1 << 20)},
               {"operation_end_within_3_percent_of_never", end.total_ms <= 1.03 * results["never"].total_ms},
               {"operation_end_faster_than_every_run", end.total_ms < results["every_run"].total_ms},
               {"operation_end_faster_than_destroy_session", end.total_ms < results["destroy_session"].total_ms}}}});
  return 0;
}

}  // namespace ebb::cli
