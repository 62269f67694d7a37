// `ebb bench loop`: a service's loop of single runs. Session::Run called back to back with no
// explicit operation (each run is its own operation) on the bundled detector at 640 and 960 px
// and on convnet at 1024 px, under the release modes operation_end, idle and never (and the
// policy's default, when it is none of them), with `never` measured twice for an A/A spread.
// The kinds take turns loop by loop, in an order shuffled each round. After each loop of the
// last round the caller pauses: the arena and the RSS are read until they are back at the floor
// (at most kPauseMs), which shows whether the memory goes back when the caller pauses.

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <thread>

#include "bench.h"
#include "bench_goals.h"

namespace ebb::cli {
namespace {

constexpr int kLoopRuns = 8;      // timed single runs per loop, after one untimed warm-up run
constexpr int kPauseMs = 1000;    // how long the caller pauses after a loop of the last round
constexpr int kPollMs = 5;        // how often the arena is read during the pause
constexpr double kFloorSlackMiB = 1;  // "back at the floor": within this of the arena after load

struct LoopCase {
  std::string model;
  int64_t side = 0;
  std::string Key() const { return model + "@" + std::to_string(side); }
};

struct KindResult {
  std::vector<double> run_ms;   // every timed run of every loop
  std::vector<double> loop_ms;  // each loop's total
  uint64_t releases = 0;        // releases during the timed loops (by runs and by the idle timer)
  int loops = 0;
  // The pause after the last round's loop.
  bool paused = false;
  int64_t reserved_floor = 0;     // the shared arena after load, before any run
  int64_t reserved_at_end = 0;    // right after the loop's last run
  int64_t reserved_after_pause = 0;
  int64_t rss_at_end = 0;
  int64_t rss_after_pause = 0;
  double back_at_floor_ms = -1;   // after the last run; -1: not within kPauseMs
};

// The mode a measured kind runs: "never_again" is `never` measured a second time (the A/A).
std::string ModeOf(const std::string& kind) { return kind == "never_again" ? "never" : kind; }

uint64_t Releases(const Runtime& runtime, const Session& session) {
  return session.release_count() + runtime.idle_release_count();
}

// One loop of `kind` on `c`, in a runtime of its own (one Runtime per process with the shared
// arena): the model loaded, one untimed run, then kLoopRuns single runs back to back, timed one by
// one; with `pause`, then the pause.
Status MeasureLoop(const std::string& kind, const LoopCase& c, const MemoryPolicy& base, const BenchOptions& options,
                   bool pause, KindResult* result) {
  MemoryPolicy policy = base;
  policy.release = *ParseReleaseMode(ModeOf(kind));
  auto runtime = MakeRuntime(policy);
  if (!runtime) return Internal("cannot create a runtime for mode " + kind);
  auto model = ResolveModel(c.model, options.common);
  if (!model.ok()) return model.status();
  auto session = runtime->Load(model->path, {.device = DeviceRequest::Cpu()});
  if (!session.ok()) return session.status();
  const Session& s = **session;
  const int64_t floor = SharedReserved(*runtime);
  const auto inputs = NoiseImage(s.inputs()[0].name, c.side, c.side);
  if (auto out = (*session)->Run(inputs); !out.ok()) return out.status();  // warm-up: the first run of the shape
  const uint64_t releases_before = Releases(*runtime, s);
  const double loop_start = NowMs();
  for (int i = 0; i < kLoopRuns; ++i) {
    const double t0 = NowMs();
    auto out = (*session)->Run(inputs);  // a single run: no flags, its own operation
    if (!out.ok()) return out.status();
    result->run_ms.push_back(NowMs() - t0);
  }
  const double end = NowMs();
  result->loop_ms.push_back(end - loop_start);
  result->releases += Releases(*runtime, s) - releases_before;
  ++result->loops;
  if (!pause) return Status::Ok();
  result->paused = true;
  result->reserved_floor = floor;
  result->reserved_at_end = SharedReserved(*runtime);
  result->rss_at_end = ReadRssBytes();
  while (NowMs() - end < kPauseMs) {
    if (result->back_at_floor_ms < 0 && SharedReserved(*runtime) - floor <= kFloorSlackMiB * (1 << 20)) {
      result->back_at_floor_ms = NowMs() - end;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
  }
  result->reserved_after_pause = SharedReserved(*runtime);
  result->rss_after_pause = ReadRssBytes();
  return Status::Ok();
}

}  // namespace

int BenchLoop(const BenchOptions& options) {
  const int rounds = options.iterations ? options.iterations : 3;
  std::vector<LoopCase> cases = {{"ppocr_det", 640}, {"ppocr_det", 960}, {"convnet", 1024}};
  if (!options.model.empty()) cases = {{options.model, options.size ? options.size : 640}};
  auto base = PolicyFrom(options.common);
  if (!base.ok()) return Fail(base.status());
  if (base->cpu.arena != CpuArenaMode::kShared) {
    return Fail(InvalidArgument("bench loop measures the shared CPU arena: the policy's cpu.arena must be shared"));
  }
  // The policy's own release mode is the default the goals are about (the library's unless --policy sets one).
  const std::string default_kind = ReleaseModeName(base->release);
  std::vector<std::string> kinds = {"never", "operation_end", "idle", "never_again"};
  if (std::find(kinds.begin(), kinds.end(), default_kind) == kinds.end()) kinds.push_back(default_kind);

  std::map<std::string, std::map<std::string, KindResult>> results;  // case -> kind -> result
  const double start = NowMs();
  std::mt19937 shuffle_rng(24);
  for (int r = 0; r < rounds; ++r) {
    for (const LoopCase& c : cases) {
      std::vector<std::string> order = kinds;
      std::shuffle(order.begin(), order.end(), shuffle_rng);
      for (const std::string& kind : order) {
        if (Status st = MeasureLoop(kind, c, *base, options, r == rounds - 1, &results[c.Key()][kind]); !st.ok()) {
          return Fail(st);
        }
      }
    }
  }

  Goals goals;
  Goals::Multi loop_goal("p50 single run under the default policy's release / under never, each model and size",
                         1.03, "<=");
  Goals::Multi pause_goal("arena MiB over its floor (after load) " + std::to_string(kPauseMs) +
                              " ms after the loop's last run, under the default policy's release",
                          kFloorSlackMiB, "<=");
  nlohmann::json per_case;
  for (const LoopCase& c : cases) {
    auto& by_kind = results[c.Key()];
    const double never_p50 = Median(by_kind["never"].run_ms);
    nlohmann::json j_kinds;
    for (const std::string& kind : kinds) {
      const KindResult& k = by_kind[kind];
      const double p50 = Median(k.run_ms);
      j_kinds[kind] = {{"p50_run_ms", p50},
                       {"p90_run_ms", Percentile(k.run_ms, 0.9)},
                       {"p50_loop_ms", Median(k.loop_ms)},
                       {"vs_never", p50 / never_p50},
                       {"releases_per_loop", static_cast<double>(k.releases) / k.loops},
                       {"after_pause",
                        {{"arena_floor", k.reserved_floor},
                         {"arena_at_last_run", k.reserved_at_end},
                         {"arena_after_pause", k.reserved_after_pause},
                         {"rss_at_last_run", k.rss_at_end},
                         {"rss_after_pause", k.rss_after_pause},
                         {"back_at_floor_ms", k.back_at_floor_ms >= 0 ? nlohmann::json(k.back_at_floor_ms)
                                                                       : nlohmann::json(nullptr)}}}};
    }
    const KindResult& d = by_kind[default_kind];
    const double aa = Median(by_kind["never_again"].run_ms) / never_p50;
    loop_goal.Add(c.Key(), Median(d.run_ms) / never_p50);
    pause_goal.Add(c.Key(), static_cast<double>(d.reserved_after_pause - d.reserved_floor) / (1 << 20));
    per_case[c.Key()] = {{"model", c.model},
                         {"input_shape", {1, 3, c.side, c.side}},
                         {"kinds", j_kinds},
                         {"aa_never_again_vs_never", aa},
                         {"aa_spread", std::abs(aa - 1)}};
  }
  goals.Add("single_run_loop_at_most_1_03x_never", loop_goal, "no loop ran");
  goals.Add("memory_returned_after_pause", pause_goal, "no loop ran");
  return goals.Finish({{"default_release", default_kind},
                       {"idle_release_ms", base->idle_release_ms},
                       {"rounds", rounds},
                       {"runs_per_loop", kLoopRuns},
                       {"pause_ms", kPauseMs},
                       {"order",
                        "each round: per model and size, one loop per kind in an order shuffled each time, each in a "
                        "fresh runtime (load, one untimed run, then the timed single runs back to back); the last "
                        "round's loops end with the pause"},
                       {"total_s", (NowMs() - start) / 1000},
                       {"cases", per_case}});
}

}  // namespace ebb::cli
