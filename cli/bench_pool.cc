// `ebb bench switch` and `ebb bench sessions`: many models in one process.

#include <filesystem>
#include <fstream>
#include <map>

#include "bench.h"
#include "bench_goals.h"
#include "ebb/model_pool.h"
#include "port.h"

namespace ebb::cli {
namespace {

namespace fs = std::filesystem;

// Copies of one model with distinct bytes (ModelProto.doc_string appended:
// the last occurrence wins), so that each is its own session.
Result<std::vector<std::string>> WriteVariants(const std::string& model, int n) {
  std::ifstream in(model, std::ios::binary);
  if (!in) return NotFound("cannot read model '" + model + "'");
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const fs::path dir = fs::temp_directory_path() / ("ebb_bench_" + std::to_string(port::ProcessId()));
  fs::create_directories(dir);
  std::vector<std::string> paths;
  for (int i = 0; i < n; ++i) {
    const std::string doc = "variant " + std::to_string(i);
    paths.push_back((dir / ("m" + std::to_string(i) + ".onnx")).string());
    std::ofstream(paths.back(), std::ios::binary) << bytes << '\x32' << static_cast<char>(doc.size()) << doc;
  }
  return paths;
}

void RemoveVariants(const std::vector<std::string>& paths) {
  if (!paths.empty()) fs::remove_all(fs::path(paths[0]).parent_path());
}

struct SwitchResult {
  int64_t peak_rss = 0, peak_reserved = 0, rss_start = 0;
  int failures = 0;
  uint64_t loads = 0;
  double total_ms = 0;
  std::vector<double> switch_ms;  // time until each request had its model
};

// One request: take the model (loading it if needed), run one operation.
using Request = std::function<Status(int model, double* switch_ms)>;

// Requests rotate through the models with the first one in every other
// request (a main model plus the others in turn: m0 m1 m0 m2 m0 m1 ...), as
// a service with one busy language pack and several occasional ones sees.
// (A strict rotation through more models than fit is the case where any LRU
// misses every time.)
int ModelOfRequest(int i, int models) { return i % 2 == 0 ? 0 : 1 + (i / 2) % (models - 1); }

Result<SwitchResult> Rotate(Runtime& runtime, int models, int rounds, const Request& request) {
  SwitchResult r;
  r.rss_start = ReadRssBytes();
  std::atomic<int64_t> peak_reserved{0};
  std::atomic<bool> stop{false};
  std::thread arena_sampler([&] {
    while (!stop) {
      peak_reserved = std::max<int64_t>(peak_reserved, SharedReserved(runtime));
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  {
    RssPeakSampler rss;
    const double start = NowMs();
    for (int i = 0; i < rounds * 2 * (models - 1); ++i) {
      double switch_ms = 0;
      if (!request(ModelOfRequest(i, models), &switch_ms).ok()) ++r.failures;
      r.switch_ms.push_back(switch_ms);
    }
    r.total_ms = NowMs() - start;
    r.peak_rss = rss.peak();
  }
  stop = true;
  arena_sampler.join();
  r.peak_reserved = peak_reserved;
  r.loads = runtime.load_count();
  return r;
}

nlohmann::json ToJson(const SwitchResult& r) {
  double mean = 0;
  for (double v : r.switch_ms) mean += v / static_cast<double>(r.switch_ms.size());
  return {{"peak_rss", r.peak_rss},
          {"peak_rss_over_start", r.peak_rss - r.rss_start},
          {"peak_reserved", r.peak_reserved},
          {"failures", r.failures},
          {"loads", r.loads},
          {"total_ms", r.total_ms},
          {"mean_switch_ms", mean}};
}

}  // namespace

int BenchSwitch(const BenchOptions& options) {
  const int models = 3, rounds = options.iterations ? options.iterations : 4;
  const int64_t side = options.size ? options.size : 640;
  const std::string model = WithModel(options, "ppocr_det").model;  // a real model by default
  auto file = ResolveModel(model, options.common);
  if (!file.ok()) return Fail(file.status());
  auto paths = WriteVariants(file->path, models);
  if (!paths.ok()) return Fail(paths.status());
  auto policy = PolicyFrom(options.common);
  if (!policy.ok()) return Fail(policy.status());
  auto input = NoiseImage("x", side, side);
  auto run = [&](const std::shared_ptr<Session>& s) { return s->Run(input).status(); };
  // Every request is a run the pool admits by memory (AcquireOptions::run_elements): its transient
  // need (the arena it grows) is reserved against the budget beside the loaded models' charges, so
  // the budget bounds the process's peak, not only what idle models hold.
  const AcquireOptions as_run{.run_elements = 3 * side * side};

  // A first pass measures, with an unbounded pool, each model's charge (what it holds loaded and
  // idle) and what its run needs, to size the budget for one run and two of the three models:
  // the smallest charge of the three (the first load also pays what the process sets up once),
  // the largest need.
  int64_t charge = 0, need = 0;
  {
    auto runtime = MakeRuntime(*policy);
    if (!runtime) return 1;
    ModelPool pool(*runtime, {.cpu_budget_bytes = int64_t{1} << 50});
    for (int i = 0; i < models; ++i) {
      const std::string name = "m" + std::to_string(i);
      pool.Add({name, (*paths)[i], {.device = DeviceRequest::Cpu()}, false, std::nullopt});
      if (Status st = pool.RunWithRecovery(name, as_run, run); !st.ok()) return Fail(st);
      const int64_t c = pool.StatusOf(name)->charge_bytes;
      charge = i == 0 ? c : std::min(charge, c);
      if (auto predicted = pool.PredictNeed(name, *as_run.run_elements); predicted.ok() && *predicted) {
        need = std::max(need, (*predicted)->memory_bytes);
      }
    }
  }
  const int64_t budget = options.budget_bytes ? options.budget_bytes : need + charge * 5 / 2;

  nlohmann::json strategies;
  for (const std::string strategy : {"all_resident", "destroy_on_switch", "budget_lru"}) {
    port::TrimHeap();
    auto runtime = MakeRuntime(*policy);
    if (!runtime) return 1;
    const bool lru = strategy == "budget_lru";
    ModelPool pool(*runtime, {.cpu_budget_bytes = lru ? budget : int64_t{1} << 50});
    for (int i = 0; i < models; ++i) {
      pool.Add({"m" + std::to_string(i), (*paths)[i], {.device = DeviceRequest::Cpu()}, false, std::nullopt});
    }
    Request request = [&](int m, double* switch_ms) -> Status {
      const std::string name = "m" + std::to_string(m);
      if (strategy == "destroy_on_switch") {
        for (int other = 0; other < models; ++other) {
          if (other != m) (void)pool.Unload("m" + std::to_string(other));
        }
      }
      const double t0 = NowMs();
      auto lease = pool.Acquire(name, as_run);
      *switch_ms = NowMs() - t0;
      if (!lease.ok()) return lease.status();
      return run(lease->session());
    };
    auto result = Rotate(*runtime, models, rounds, request);
    if (!result.ok()) return Fail(result.status());
    strategies[strategy] = ToJson(*result);
    // The charges this strategy's pool measured (at each model's last load), beside the sizing pass's.
    nlohmann::json charges = nlohmann::json::array();
    for (const ModelStatus& m : pool.Snapshot()) charges.push_back(m.charge_bytes);
    strategies[strategy]["charges_bytes"] = charges;
  }
  RemoveVariants(*paths);
  const auto& lru = strategies["budget_lru"];
  Goals goals;
  goals.AtMost("budget_lru_no_failures", lru["failures"].get<double>(), 0, "failed requests");
  goals.AtMost("budget_lru_peak_within_budget", lru["peak_rss_over_start"].get<double>() / static_cast<double>(budget),
               1, "peak RSS over start / budget");
  goals.Below("budget_lru_faster_than_destroy_on_switch",
              lru["total_ms"].get<double>() / strategies["destroy_on_switch"]["total_ms"].get<double>(), 1,
              "total time, budget_lru / destroy_on_switch");
  return goals.Finish({{"model", model},
                       {"models", models},
                       {"rounds", rounds},
                       {"pattern", "m0 m1 m0 m2 ... (the first model in every other request)"},
                       {"input_shape", {1, 3, side, side}},
                       {"measured_charge_bytes", charge},
                       {"measured_run_need_bytes", need},
                       {"budget_bytes", budget},
                       {"strategies", strategies}});
}

int BenchSessions(const BenchOptions& given) {
  const BenchOptions options = WithModel(given, "convnet");
  const int max_sessions = 16;
  const int64_t side = options.size ? options.size : 256;
  const size_t cap = 128u << 20;
  auto file = ResolveModel(options.model, options.common);
  if (!file.ok()) return Fail(file.status());
  auto paths = WriteVariants(file->path, max_sessions);
  if (!paths.ok()) return Fail(paths.status());
  auto input = NoiseImage("x", side, side);
  // Without ebb's release (mode never), as in a service that opens a session per model.
  std::map<bool, std::vector<int64_t>> totals;
  for (bool shared : {false, true}) {
    MemoryPolicy policy;
    policy.release = ReleaseMode::kNever;
    policy.cpu.arena = shared ? CpuArenaMode::kShared : CpuArenaMode::kPerSession;
    policy.cpu.arena_settings.max_bytes = cap;
    auto runtime = MakeRuntime(policy);
    if (!runtime) return 1;
    std::vector<std::shared_ptr<Session>> sessions;
    for (int n = 0; n < max_sessions; ++n) {
      auto s = runtime->Load((*paths)[static_cast<size_t>(n)], {.device = DeviceRequest::Cpu()});
      if (!s.ok()) return Fail(s.status());
      if (auto out = (*s)->Run(input); !out.ok()) return Fail(out.status());
      sessions.push_back(*s);
      totals[shared].push_back(runtime->ReadMemory().TotalReserved());
    }
  }
  RemoveVariants(*paths);
  nlohmann::json points = nlohmann::json::array();
  bool under_cap = true;
  for (int n = 0; n < max_sessions; ++n) {
    points.push_back({{"sessions", n + 1},
                      {"per_session_reserved", totals[false][static_cast<size_t>(n)]},
                      {"shared_reserved", totals[true][static_cast<size_t>(n)]}});
    under_cap &= totals[true][static_cast<size_t>(n)] <= static_cast<int64_t>(cap);
  }
  Goals goals;
  goals.Holds("shared_under_cap", under_cap);
  goals.AtMost("shared_flat_within_1_mib", static_cast<double>(totals[true].back() - totals[true].front()) / (1 << 20),
               1, "MiB the shared arena grew from 1 to " + std::to_string(max_sessions) + " sessions");
  goals.Above("per_session_grows",
              static_cast<double>(totals[false].back()) / static_cast<double>(totals[false].front()), 4,
              "per-session arenas' reserved bytes, " + std::to_string(max_sessions) + " sessions / 1");
  return goals.Finish(
      {{"model", options.model}, {"input_shape", {1, 3, side, side}}, {"cap_bytes", cap}, {"points", points}});
}

}  // namespace ebb::cli
