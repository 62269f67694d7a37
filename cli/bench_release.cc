// `ebb bench release`: one tiled upscaling operation over several frames,
// repeated, under each release mode — never, every_run, operation_end — and
// destroy_session (drop the session after every operation and load it again
// from the model file, what applications without ebb do to get their memory
// back; ebb's optimized-model cache is off in that mode). The modes take turns
// operation by operation, with `never` measured twice for an A/A spread.

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "bench.h"
#include "bench_goals.h"
#include "ebb/tiler.h"
#include "port.h"

namespace ebb::cli {
namespace {

struct ModeResult {
  int64_t reserved_peak = 0;
  int64_t reserved_after = 0;
  int64_t rss_after = 0;
  uint64_t loads = 0;
  int runs = 0;
  std::string device;                // where the session really ran ("cuda:0", "cpu")
  std::vector<double> operation_ms;  // each timed operation (destroy_session: its load and its drop included)
  std::vector<double> page_faults;   // each timed operation's minor page faults (the process's)
  double load_ms = 0;                // time the timed operations spent in Load (destroy_session only)
};

// Arena bytes the session's runs use: the shared arena, or its own.
int64_t ArenaReserved(Runtime& runtime, const Session* session) {
  int64_t reserved = SharedReserved(runtime);
  if (session) {
    for (const ArenaStats& a : session->ReadOwnArenas()) reserved += a.reserved;
    if (auto shared = session->ReadSharedDeviceArena()) reserved += shared->reserved;  // the shared CUDA arena
  }
  return reserved;
}

int64_t MinorFaults() { return port::MinorPageFaults(); }

// The mode a measured label runs: "never_again" is `never` measured a second time (the A/A).
std::string ModeOf(const std::string& label) { return label == "never_again" ? "never" : label; }

// One timed operation of `label`, in a runtime of its own (one Runtime per process: ORT's
// environment is a singleton): the runtime is created, the model loaded, one warm-up operation
// run (untimed), then the timed one; its figures are added to `result`. In destroy_session the
// warm-up ends with dropping the session, and the timed operation loads it again from the file.
Status MeasureOneOperation(const std::string& label, const BenchOptions& options, const std::vector<Tensor>& frames,
                           const TileOptions& tiles, ModeResult* result) {
  const std::string mode = ModeOf(label);
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
  port::TrimHeap();  // every operation from the same heap state
  auto runtime = MakeRuntime(*policy);
  if (!runtime) return Internal("cannot create a runtime for mode " + mode);
  auto model = ResolveModel(options.model, options.common);
  if (!model.ok()) return model.status();
  const std::string& path = model->path;
  auto request = DeviceRequest::Parse(DeviceFor(options.common, *model));
  if (!request.ok()) return request.status();

  const Session* current = nullptr;
  bool timed = false;
  int runs = 0;
  int64_t peak = 0;
  OperationOptions op_options;
  op_options.on_progress = [&](const Progress&) {
    if (!timed) return;
    ++runs;
    peak = std::max(peak, ArenaReserved(*runtime, current));
  };
  double op_ms = 0, load_ms = 0;
  int64_t faults = 0;
  for (int pass = 0; pass < 2; ++pass) {  // 0: the warm-up, 1: timed
    timed = pass == 1;
    const int64_t faults_before = MinorFaults();
    const double op_start = NowMs();
    const uint64_t loads_before = runtime->load_count();
    auto session = runtime->Load(path, {.device = *request});
    if (!session.ok()) return session.status();
    if (runtime->load_count() != loads_before) load_ms = NowMs() - op_start;
    current = session->get();
    result->device = (*session)->device().ToString();
    auto out = RunTiled(*runtime, *session, frames, tiles, op_options);
    if (!out.ok()) return out.status();
    if (destroy) {  // inside the timed operation: dropping the session is how this mode gives memory back,
                    // as operation_end's release at its last run is inside its own
      session->reset();
      runtime->Clear();  // the session (and its arena) goes with its last reference
      current = nullptr;
    }
    op_ms = NowMs() - op_start;
    faults = MinorFaults() - faults_before;
  }
  result->operation_ms.push_back(op_ms);
  result->page_faults.push_back(static_cast<double>(faults));
  if (destroy) result->load_ms += load_ms;
  result->runs += runs;
  result->reserved_peak = std::max(result->reserved_peak, peak);
  result->reserved_after = ArenaReserved(*runtime, current);
  result->rss_after = ReadRssBytes();
  result->loads += runtime->load_count();
  return Status::Ok();
}

// Median of each mode's operations over `of`'s.
double MedianRatio(const ModeResult& mode, const ModeResult& of) {
  return Median(mode.operation_ms) / Median(of.operation_ms);
}

}  // namespace

int BenchRelease(const BenchOptions& options) {
  const BenchOptions o = WithModel(options, "waifu2x_scale2x");
  const int64_t side = o.size ? o.size : 128;
  const int frames_count = 2, repeats = o.iterations ? o.iterations : 5;
  TileOptions tiles{.tile = 48, .overlap = 8};
  std::vector<Tensor> frames;
  for (int f = 0; f < frames_count; ++f) frames.push_back(std::move(NoiseImage("x", side, side, f + 1)[0].tensor));
  auto plan = PlanTiles(side, side, tiles);
  if (!plan.ok()) return Fail(plan.status());

  // Interleaved operation by operation (A B C D E, then the five again ...), the order shuffled each
  // round, so that a shared machine's load falls on every mode alike and none always follows another; `never_again` is `never` once more:
  // its ratio to `never` is the A/A spread, what the benchmark reports when there is no difference.
  const std::vector<std::string> labels = {"never", "every_run", "operation_end", "destroy_session", "never_again"};
  std::map<std::string, ModeResult> results;
  const double start = NowMs();
  std::vector<std::string> order = labels;
  std::mt19937 shuffle_rng(24);
  for (int r = 0; r < repeats; ++r) {
    std::shuffle(order.begin(), order.end(), shuffle_rng);
    for (const std::string& label : order) {
      if (Status st = MeasureOneOperation(label, o, frames, tiles, &results[label]); !st.ok()) return Fail(st);
    }
  }
  nlohmann::json modes;
  for (const std::string& label : labels) {
    const ModeResult& m = results[label];
    modes[label] = {{"median_operation_ms", Median(m.operation_ms)},
                    {"operation_ms", m.operation_ms},
                    {"median_page_faults_per_operation", Median(m.page_faults)},
                    {"reserved_peak", m.reserved_peak},
                    {"reserved_after", m.reserved_after},
                    {"rss_after", m.rss_after},
                    {"loads", m.loads},
                    {"runs", m.runs},
                    {"device", m.device},
                    {"load_ms", m.load_ms}};
  }
  const ModeResult& end = results["operation_end"];
  const ModeResult& never = results["never"];
  const double ratio = MedianRatio(end, never), aa = MedianRatio(results["never_again"], never);
  Goals goals;
  goals.AtMost("operation_end_at_floor_like_every_run",
               static_cast<double>(end.reserved_after - results["every_run"].reserved_after) / (1 << 20), 1,
               "MiB of arena after an operation over every_run's");
  goals.AtMost("operation_end_within_3_percent_of_never", ratio, 1.03, "median operation, operation_end / never");
  goals.Below("operation_end_faster_than_every_run", MedianRatio(end, results["every_run"]), 1,
              "median operation, operation_end / every_run");
  goals.Below("operation_end_faster_than_destroy_session", MedianRatio(end, results["destroy_session"]), 1,
              "median operation, operation_end / destroy_session");
  return goals.Finish({{"model", o.model},
                       {"device", end.device},
                       {"frames", frames_count},
                       {"frame_shape", {1, 3, side, side}},
                       {"tile", tiles.tile},
                       {"overlap", tiles.overlap},
                       {"tiles_per_frame", plan->size()},
                       {"operations_per_mode", repeats},
                       {"order",
                        "interleaved operation by operation, shuffled each round; each timed operation after a warm-up "
                        "operation in a fresh runtime"},
                       {"total_s", (NowMs() - start) / 1000},
                       {"modes", modes},
                       {"operation_end_time_vs_never", ratio},
                       {"aa_never_again_vs_never", aa},
                       {"aa_spread", std::abs(aa - 1)},
                       {"operation_end_beyond_aa_spread", ratio - 1 > std::abs(aa - 1)}});
}

}  // namespace ebb::cli
