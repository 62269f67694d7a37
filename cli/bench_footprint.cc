// `ebb bench footprint`: what a model costs in memory at model granularity,
// for ebb and, in the same run, for plain ONNX Runtime (the baseline peer):
// RSS before load, after load, after one released inference, after unload,
// after each of N load -> infer -> unload cycles; first-load and re-load
// times; run times; at each graph optimization level.
//
// Every configuration (model x level x ebb/plain ORT) runs in a fresh child
// process: this binary re-executed with the hidden --worker flag, printing
// one JSON object. RSS after an unload depends on what ran before in the
// process (heap fragmentation, ORT's one-time statics, page tables), so
// configurations sharing a process would measure each other. The parent only
// spawns workers and compares their figures.

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "bare_ort.h"
#include "bench.h"
#include "bench_goals.h"
#include "spawn_self.h"
#include "port.h"

namespace ebb::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kMB = 1e6;

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

// RSS after giving freed heap back, so that figures do not depend on when
// glibc last trimmed.
int64_t TrimmedRss() {
  ebb::port::TrimHeap();
  return ReadRssBytes();
}

// Inputs for any model: dynamic dimensions become 1, except the two spatial
// ones of a 4-D input, which become `side`; values are deterministic.
std::vector<NamedTensor> SyntheticInputs(const std::vector<TensorInfo>& infos, int64_t side) {
  std::vector<NamedTensor> inputs;
  for (const TensorInfo& info : infos) {
    Shape shape = info.shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] < 0) shape[d] = (shape.size() == 4 && d >= 2) ? side : 1;
    }
    Tensor t(info.type, shape);
    std::memset(t.data(), 0, t.byte_size());
    if (info.type == DataType::kFloat32) {
      auto values = t.values<float>();
      for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 97) / 97.f;
    }
    inputs.push_back({info.name, std::move(t)});
  }
  return inputs;
}

// --- Workers (child processes) ----------------------------------------------

// ebb: Runtime (policy with the level and a fresh cache folder), then load,
// one released inference, unload, and `cycles` times load -> infer -> unload.
int EbbWorker(const FootprintOptions& o, GraphOptimization level) {
  auto policy = PolicyFrom(o.common);
  if (!policy.ok()) return Fail(policy.status());
  policy->graph_optimization = level;
  policy->optimized_model_cache.dir = o.worker_cache_dir;
  auto runtime = MakeRuntime(*policy);
  if (!runtime) return 1;
  const int64_t before = TrimmedRss();
  json r = {{"rss_before_load", before}};
  std::vector<double> reload_ms, run_ms;
  std::vector<int64_t> after_unload, after_load;
  std::vector<NamedTensor> inputs;
  for (int cycle = 0; cycle <= o.cycles; ++cycle) {
    const double t0 = NowMs();
    std::shared_ptr<Session> session;
    {
      auto loaded = runtime->Load(o.worker_model, {.device = DeviceRequest::Cpu()});
      if (!loaded.ok()) return Fail(loaded.status());
      session = std::move(loaded).value();
    }
    const double load_ms = NowMs() - t0;
    const int64_t loaded = ReadRssBytes() - before;
    if (cycle == 0) inputs = SyntheticInputs(session->inputs(), o.side);
    const double r0 = NowMs();
    // A released inference: it releases at its end, as an operation's last run does (under the
    // default, idle, a single run would release once runs pause; OperationReleaseMode).
    RunFlags released;
    released.release = OperationReleaseMode(runtime->policy(), std::nullopt);
    if (auto out = session->Run(inputs, released); !out.ok()) return Fail(out.status());
    const double ran_ms = NowMs() - r0;
    const int64_t inferred = ReadRssBytes() - before;
    if (cycle == 0) {
      r["first_load_ms"] = load_ms;
      r["first_load_wrote_cache"] = session->load_record().wrote_optimized_cache;
      r["first_load_cache_note"] = session->load_record().optimized_cache_note;
      r["after_load"] = loaded;
      r["after_inference"] = inferred;
    } else {
      reload_ms.push_back(load_ms);
      r["reload_from_cache"] = session->load_record().from_optimized_cache;
    }
    run_ms.push_back(ran_ms);
    after_load.push_back(loaded);
    runtime->Unload(*session);
    session.reset();  // the last reference: the session goes now
    after_unload.push_back(ReadRssBytes() - before);
  }
  r["after_unload"] = after_unload[0];
  r["after_unload_cycles"] = std::vector<int64_t>(after_unload.begin() + 1, after_unload.end());
  r["after_load_cycles"] = std::vector<int64_t>(after_load.begin() + 1, after_load.end());
  r["reload_ms"] = reload_ms;
  r["run_ms"] = run_ms;
  PrintJson(r);
  return 0;
}

// Plain ORT, as the 40-line program: create, trim, run, destroy,
// trim; then `cycles` times the same.
int OrtWorker(const FootprintOptions& o, GraphOptimization level) {
  detail::BareOrtModel::CreateEnvironment();  // as an application does first
  const int64_t before = TrimmedRss();
  json r = {{"rss_before_load", before}};
  std::vector<double> load_ms, run_ms;
  std::vector<int64_t> after_destroy, after_load;
  std::vector<NamedTensor> inputs;
  for (int cycle = 0; cycle <= o.cycles; ++cycle) {
    const double t0 = NowMs();
    auto model = detail::BareOrtModel::Load(o.worker_model, level);
    load_ms.push_back(NowMs() - t0);
    if (!model.ok()) return Fail(model.status());
    const int64_t untrimmed = ReadRssBytes() - before;
    const int64_t loaded = TrimmedRss() - before;
    if (cycle == 0) inputs = SyntheticInputs((*model)->inputs(), o.side);
    const double r0 = NowMs();
    if (Status st = (*model)->Run(inputs); !st.ok()) return Fail(st);
    run_ms.push_back(NowMs() - r0);
    if (cycle == 0) {
      r["after_load_untrimmed"] = untrimmed;
      r["after_load"] = loaded;
      r["after_inference"] = ReadRssBytes() - before;
    }
    after_load.push_back(loaded);
    model->reset();
    after_destroy.push_back(TrimmedRss() - before);
  }
  r["first_load_ms"] = load_ms[0];
  r["reload_ms"] = std::vector<double>(load_ms.begin() + 1, load_ms.end());
  r["after_unload"] = after_destroy[0];
  r["after_unload_cycles"] = std::vector<int64_t>(after_destroy.begin() + 1, after_destroy.end());
  r["after_load_cycles"] = std::vector<int64_t>(after_load.begin() + 1, after_load.end());
  r["run_ms"] = run_ms;
  PrintJson(r);
  return 0;
}

// --- The parent ---------------------------------------------------------------

// Runs this binary as a worker and returns its JSON.
Result<json> RunWorker(const FootprintOptions& o, const std::string& kind, const std::string& model,
                       const std::string& level, int cycles, const std::string& cache_dir) {
  std::vector<std::string> args = {"ebb", "bench", "footprint", "--worker", kind, "--worker-model", model,
                                   "--worker-level", level, "--cycles", std::to_string(cycles),
                                   "--size", std::to_string(o.side), "--worker-cache-dir", cache_dir};
  if (!o.common.policy_file.empty()) args.insert(args.end(), {"--policy", o.common.policy_file});
  auto text = RunSelf(std::move(args));
  if (!text.ok()) return Internal(kind + " worker failed on '" + model + "' at level " + level);
  json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Internal(kind + " worker printed no JSON for '" + model + "'");
  return j;
}

double MedianOf(const json& values) { return Median(values.get<std::vector<double>>()); }

// Least-squares growth over the series, first point to last (bytes).
double Trend(const std::vector<double>& y) {
  const double n = static_cast<double>(y.size());
  if (y.size() < 2) return 0;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double x = static_cast<double>(i);
    sx += x, sy += y[i], sxx += x * x, sxy += x * y[i];
  }
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  return slope * (n - 1);
}

// What loading the model added in a warm process: RSS after each load of
// the cycles minus RSS after the unload before it (median).
double WarmIdle(const json& r) {
  std::vector<double> grew;
  const auto loads = r["after_load_cycles"].get<std::vector<double>>();
  for (size_t i = 0; i < loads.size(); ++i) {
    grew.push_back(loads[i] - (i == 0 ? r["after_unload"].get<double>() : r["after_unload_cycles"][i - 1].get<double>()));
  }
  return Median(grew);
}

// The figures of one model at one level that the goals and docs use (MB, ms,
// ratios). Idle: RSS growth over a load, in a warm process (after a first
// cycle) and, for the first load, over the process's RSS before it.
json Derive(const json& ebb, const json& ort, double weight_bytes) {
  const double idle = WarmIdle(ebb), ort_idle = WarmIdle(ort);
  const double ebb_unload = MedianOf(ebb["after_unload_cycles"]);
  const double ort_unload = MedianOf(ort["after_unload_cycles"]);
  const double reload = MedianOf(ebb["reload_ms"]), ort_load = MedianOf(ort["reload_ms"]);
  return {{"weights_mb", weight_bytes / kMB},
          {"ebb_idle_mb", idle / kMB},
          {"plain_ort_idle_mb", ort_idle / kMB},
          {"ebb_first_load_idle_mb", ebb["after_load"].get<double>() / kMB},
          {"plain_ort_first_load_idle_mb", ort["after_load"].get<double>() / kMB},
          {"plain_ort_first_load_untrimmed_mb", ort["after_load_untrimmed"].get<double>() / kMB},
          {"idle_over_weights", idle / weight_bytes},
          {"idle_vs_plain_ort", idle / ort_idle},
          {"after_inference_vs_after_load", ebb["after_inference"].get<double>() / ebb["after_load"].get<double>()},
          {"ebb_after_unload_first_cycle_mb", ebb["after_unload"].get<double>() / kMB},
          {"ebb_after_unload_mb", ebb_unload / kMB},
          {"plain_ort_after_destroy_first_cycle_mb", ort["after_unload"].get<double>() / kMB},
          {"plain_ort_after_destroy_mb", ort_unload / kMB},
          {"after_unload_over_plain_ort_mb", (ebb_unload - ort_unload) / kMB},
          {"ebb_after_unload_trend_mb", Trend(ebb["after_unload_cycles"].get<std::vector<double>>()) / kMB},
          {"ebb_first_load_ms", ebb["first_load_ms"]},
          {"ebb_reload_ms", reload},
          {"plain_ort_first_load_ms", ort["first_load_ms"]},
          {"plain_ort_load_ms", ort_load},
          {"reload_over_first_load", reload / ebb["first_load_ms"].get<double>()},
          {"reload_over_plain_ort_load", reload / ort_load},
          {"ebb_run_ms", MedianOf(ebb["run_ms"])},
          {"plain_ort_run_ms", MedianOf(ort["run_ms"])}};
}

}  // namespace

int BenchFootprint(const FootprintOptions& options) {
  if (!options.worker.empty()) {
    auto level = ParseGraphOptimization(options.worker_level);
    if (!level) return Fail(InvalidArgument("unknown level '" + options.worker_level + "'"));
    return options.worker == "ebb" ? EbbWorker(options, *level) : OrtWorker(options, *level);
  }
  FootprintOptions o = options;
  o.generated_dir = GeneratedModelsDir(o.generated_dir);
  const std::string default_level = GraphOptimizationName(MemoryPolicy{}.graph_optimization);
  std::vector<std::pair<std::string, std::string>> models;  // name, path
  for (const std::string& name : SplitList(o.bundled)) {
    Result<ModelArg> model = ResolveModel(name, o.common);
    if (model.ok()) models.emplace_back(model->name, model->path);  // bundled models that are missing are skipped
  }
  for (const std::string& mb : SplitList(o.sizes)) {
    const std::string name = "conv_" + mb + "mb";
    const std::string path = o.generated_dir + "/" + name + "/model.onnx";
    if (!fs::exists(path)) {
      return Fail(NotFound("no generated model '" + path + "' (built by the `generated_models` target; or --generated DIR)"));
    }
    models.emplace_back(name, path);
  }
  const std::vector<std::string> levels = SplitList(o.levels);
  for (const std::string& level : levels) {
    if (!ParseGraphOptimization(level)) return Fail(InvalidArgument("--levels: unknown level '" + level + "'"));
  }

  // Each goal is checked per (model, level) on the generated models of 50 MB and more; a goal that
  // no model measured is null (and the benchmark fails).
  using Multi = Goals::Multi;
  Multi same{"after a released inference within 5% of after load (value: the ratio)", 0.05, "|value - 1| <="};
  Multi vs_plain{"idle (RSS growth over a load, warm process) <= 1.05 x plain ORT's trimmed idle at the same level",
                 1.05, "<="};
  Multi weights{"idle <= 1.3 x the weight bytes at level extended", 1.3, "<="};
  Multi unload{
      "after unload (over the RSS before the first load; median of the cycles after the first, warm-up) <= "
      "plain ORT's after destroy + 5 MB; value: the difference in MB",
      5, "<="};
  Multi trend{"after-unload RSS grows by < 2 MB over the cycles (least-squares line, first to last; MB)", 2, "<"};
  Multi reload{
      "re-load <= 0.5 x ebb's first load and <= 0.5 x a plain ORT load (warm process), at the default level (" +
          default_level + "); value: the larger ratio",
      0.5, "<="};

  json results = json::object();
  const fs::path cache_root = fs::temp_directory_path() / ("ebb_footprint_" + std::to_string(port::ProcessId()));
  const double start = NowMs();
  for (const auto& [name, path] : models) {
    const double weight_bytes = static_cast<double>(fs::file_size(path));
    for (const std::string& level : levels) {
      const fs::path cache_dir = cache_root / (name + "_" + level);  // empty: the first load is a real one
      fs::create_directories(cache_dir);
      auto ebb = RunWorker(o, "ebb", path, level, o.cycles, cache_dir.string());
      auto ort = RunWorker(o, "ort", path, level, o.baseline_cycles, "");
      fs::remove_all(cache_dir);
      if (!ebb.ok()) return Fail(ebb.status());
      if (!ort.ok()) return Fail(ort.status());
      json derived = Derive(*ebb, *ort, weight_bytes);
      results[name][level] = {{"ebb", *ebb}, {"plain_ort", *ort}, {"derived", derived}};
      std::fprintf(stderr, "footprint: %s at %s: idle %.1f MB (plain ORT %.1f), load %.0f ms, re-load %.0f ms\n",
                   name.c_str(), level.c_str(), derived["ebb_idle_mb"].get<double>(),
                   derived["plain_ort_idle_mb"].get<double>(), derived["ebb_first_load_ms"].get<double>(),
                   derived["ebb_reload_ms"].get<double>());
      if (name.rfind("conv_", 0) != 0 || weight_bytes < 50 * kMB) continue;  // goals: the 100 and 300 MB models
      const std::string where = name + "/" + level;
      const double ratio = derived["after_inference_vs_after_load"].get<double>();
      same.Add(where, ratio, std::abs(ratio - 1) <= 0.05);
      vs_plain.Add(where, derived["idle_vs_plain_ort"].get<double>());
      if (level == "extended") weights.Add(where, derived["idle_over_weights"].get<double>());
      unload.Add(where, derived["after_unload_over_plain_ort_mb"].get<double>());
      trend.Add(where, derived["ebb_after_unload_trend_mb"].get<double>());
      if (level == default_level) {
        const double r = std::max(derived["reload_over_first_load"].get<double>(),
                                  derived["reload_over_plain_ort_load"].get<double>());
        reload.Add(where, r);
      }
    }
  }
  fs::remove_all(cache_root);
  const std::string none =
      "no generated model of 50 MB or more was measured (--sizes " + o.sizes + ", --levels " + o.levels + ")";
  Goals goals;
  goals.Add("after_load_equals_after_inference", same, none);
  goals.Add("idle_within_plain_ort_plus_5_percent", vs_plain, none);
  goals.Add("idle_at_most_1_3x_weights_at_extended", weights, none + " at level extended");
  goals.Add("after_unload_within_plain_ort_plus_5_mb", unload, none);
  goals.Add("no_upward_trend_over_cycles", trend, none);
  goals.Add("reload_at_most_half_first_load", reload, none + " at the default level " + default_level);
  return goals.Finish({{"what",
                        "RSS over the process's RSS before the first load (bytes), per model and graph "
                        "optimization level; each configuration in a fresh process"},
                       {"device", "cpu"},
                       {"input_side", o.side},
                       {"cycles", o.cycles},
                       {"baseline_cycles", o.baseline_cycles},
                       {"default_level", default_level},
                       {"total_s", (NowMs() - start) / 1000},
                       {"models", results}});
}

}  // namespace ebb::cli
