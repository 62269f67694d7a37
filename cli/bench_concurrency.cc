// `ebb bench concurrency`: N = 1, 2, 4, 8, 16 clients running one model at once
// through a ModelPool, with admission by memory and, in the same run, the
// baselines without it:
//   admission      the shared arena capped to fit two runs, not four; runs
//                  admitted by their predicted need (the default);
//   admission_off  the same cap, admission off (the behaviour before it: runs
//                  are admitted by nothing, out-of-memory runs retried at once);
//   uncapped       admission off, the arena uncapped (half the machine's memory):
//                  concurrency multiplying the transient memory;
//   serial         one run at a time.
// Every (mode, N) runs in a fresh child process (this binary with the hidden
// --worker flag), the modes interleaved at each N, so that RSS figures are
// each configuration's own and a slow spell of a shared machine hits every mode;
// each N goes round the modes `rounds` times (3), and a mode's throughput is the
// median of its rounds, its failures and peaks those of all its rounds. The
// throughput goal compares within each round (admission against the better of
// serial and uncapped of the same round, measured seconds apart) and takes the
// median of those ratios: a shared machine's load drifts over a minute, and a
// comparison across rounds would measure the drift.
// Each child loads the model, runs once alone (every mode: the session's first
// run; for admission, the measurement), trims, and reads its RSS: the
// "loaded model" RSS. Then its clients run, each run timed and its outcome
// kept, while a thread samples RSS and the arena's reserved bytes every 2 ms.

#include <algorithm>
#include <atomic>
#include <thread>

#include "bench.h"
#include "bench_goals.h"
#include "ebb/model_pool.h"
#include "port.h"
#include "spawn_self.h"

namespace ebb::cli {
namespace {

using nlohmann::json;

constexpr int kClients[] = {1, 2, 4, 8, 16};
constexpr const char* kModes[] = {"serial", "uncapped", "admission_off", "admission"};

// Runs per round: every client runs once, and at least eight runs in all (N = 1, 2, 4: a client
// runs several times in a row), so that a round is not one run's time.
int RunsPerClient(int clients) { return std::max(1, 8 / clients); }

// Peaks of RSS and of the shared arena's reserved bytes, sampled every 2 ms while it lives.
class PeakSampler {
 public:
  explicit PeakSampler(Runtime& runtime) : runtime_(runtime), thread_([this] { Loop(); }) {}
  ~PeakSampler() {
    stop_ = true;
    thread_.join();
  }
  int64_t rss() const { return rss_; }
  int64_t reserved() const { return reserved_; }

 private:
  void Loop() {
    while (!stop_) {
      rss_ = std::max<int64_t>(rss_, ReadRssBytes());
      if (auto a = runtime_.ReadSharedArena()) reserved_ = std::max<int64_t>(reserved_, a->reserved);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  Runtime& runtime_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> rss_{0}, reserved_{0};
  std::thread thread_;
};

// One (mode, N) in this process; prints its JSON.
int Worker(const ConcurrencyOptions& o) {
  auto file = ResolveModel(o.model, o.common);
  if (!file.ok()) return Fail(file.status());
  auto policy = PolicyFrom(o.common);
  if (!policy.ok()) return Fail(policy.status());
  const bool capped = o.worker == "admission" || o.worker == "admission_off";
  policy->cpu.arena = CpuArenaMode::kShared;
  policy->cpu.arena_settings.max_bytes = capped ? static_cast<size_t>(o.cap_bytes) : 0;
  auto runtime = MakeRuntime(*policy);
  if (!runtime) return 1;
  PoolOptions pool_options;
  pool_options.admit_by_memory = o.worker == "admission";
  pool_options.wait_for_memory = std::chrono::minutes(10);
  ModelPool pool(*runtime, pool_options);
  pool.Add({"m", file->path, {.device = DeviceRequest::Cpu()}, false, std::nullopt});
  // One input for every client: a run reads it in place.
  const std::vector<NamedTensor> input = NoiseImage("x", o.side, o.side);
  Status first = pool.Run("m", input).status();  // alone: the session's first run, and the measurement
  if (!first.ok()) return Fail(first);
  const int64_t arena_peak = runtime->ReadSharedArena() ? runtime->ReadSharedArena()->peak_in_use : 0;
  // The loaded floor: the first run's memory goes back now (under the default release, idle, it
  // would go once runs pause), and the heap's free pages too.
  (void)runtime->Trim();
  const int64_t rss_loaded = ReadRssBytes();

  // Serial: eight runs in a row at every N (its throughput does not depend on N; measured beside
  // each point, so that a slow spell of the machine hits it too).
  const int clients = o.worker == "serial" ? 1 : o.clients;
  const int runs_each = o.worker == "serial" ? 8 : RunsPerClient(o.clients);
  std::vector<double> ms;
  std::vector<std::string> errors;
  std::mutex mu;
  int64_t peak_rss = 0, peak_reserved = 0;
  const double start = NowMs();
  {
    PeakSampler sampler(*runtime);
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&] {
        for (int r = 0; r < runs_each; ++r) {
          const double t0 = NowMs();
          Status st = pool.Run("m", input).status();  // the outputs go at once
          std::lock_guard<std::mutex> lock(mu);
          if (st.ok()) {
            ms.push_back(NowMs() - t0);
          } else {
            errors.push_back(st.message().substr(0, 200));
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    peak_rss = std::max(sampler.rss(), ReadPeakRssBytes());  // VmHWM: never above the true peak
    peak_reserved = sampler.reserved();
  }
  const double wall_ms = NowMs() - start;
  const DeviceAdmission cpu = pool.Admission().front();
  const ModelStatus status = *pool.StatusOf("m");
  json j = {{"mode", o.worker},
            {"clients", clients},
            {"runs", static_cast<int>(ms.size() + errors.size())},
            {"successes", static_cast<int>(ms.size())},
            {"failures", static_cast<int>(errors.size())},
            {"wall_ms", wall_ms},
            {"throughput_rps", 1000.0 * static_cast<double>(ms.size()) / wall_ms},
            {"run_ms_median", ms.empty() ? 0 : Median(ms)},
            {"run_ms_max", ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end())},
            {"rss_loaded", rss_loaded},
            {"peak_rss", peak_rss},
            {"peak_arena_reserved", peak_reserved},
            {"arena_peak_alone", arena_peak},
            {"cap_bytes", capped ? o.cap_bytes : 0},
            {"out_of_memory_retries", status.out_of_memory},
            {"waited", cpu.waited},
            {"wait_seconds", cpu.wait_seconds},
            {"predicted_need_bytes", status.last_need_bytes},
            {"predicted_arena_need_bytes", status.last_arena_need_bytes}};
  if (!errors.empty()) j["first_error"] = errors.front();
  PrintJson(j);
  return 0;
}

Result<json> RunWorker(const ConcurrencyOptions& o, const std::string& mode, int clients) {
  std::vector<std::string> args = {"ebb",     "bench",       "concurrency",           "--worker",
                                   mode,      "--clients",   std::to_string(clients), "--cap-bytes",
                                   std::to_string(o.cap_bytes), "--size", std::to_string(o.side),
                                   "--model", o.model,       "--models",              o.common.models_dir};
  if (!o.common.policy_file.empty()) args.insert(args.end(), {"--policy", o.common.policy_file});
  auto text = RunSelf(std::move(args));
  if (!text.ok()) return Internal(mode + " worker with " + std::to_string(clients) + " clients failed");
  json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Internal(mode + " worker printed no JSON");
  return j;
}

}  // namespace

int BenchConcurrency(const ConcurrencyOptions& given) {
  ConcurrencyOptions o = given;
  if (!o.worker.empty()) return Worker(o);
  const double start = NowMs();
  // The arena one run needs, measured alone (a serial worker), sizes the cap: two and a half runs.
  if (o.cap_bytes == 0) {
    auto probe = RunWorker(o, "serial", 1);
    if (!probe.ok()) return Fail(probe.status());
    o.cap_bytes = (*probe)["arena_peak_alone"].get<int64_t>() * 5 / 2;
  }
  json points = json::array();
  for (int n : kClients) {
    json point = {{"clients", n}};
    for (int round = 0; round < std::max(o.rounds, 1); ++round) {
      for (const char* mode : kModes) {
        auto r = RunWorker(o, mode, n);
        if (!r.ok()) return Fail(r.status());
        json& m = point[mode];
        if (m.is_null()) {
          m = *r;
          m["throughput_rps_rounds"] = json::array();
        } else {
          for (const char* sum : {"runs", "successes", "failures", "out_of_memory_retries", "waited"}) {
            m[sum] = m[sum].get<int64_t>() + (*r)[sum].get<int64_t>();
          }
          m["wait_seconds"] = m["wait_seconds"].get<double>() + (*r)["wait_seconds"].get<double>();
          for (const char* peak : {"peak_rss", "peak_arena_reserved", "rss_loaded"}) {
            m[peak] = std::max(m[peak].get<int64_t>(), (*r)[peak].get<int64_t>());
          }
          m["run_ms_max"] = std::max(m["run_ms_max"].get<double>(), (*r)["run_ms_max"].get<double>());
          if (r->contains("first_error") && !m.contains("first_error")) m["first_error"] = (*r)["first_error"];
        }
        m["throughput_rps_rounds"].push_back((*r)["throughput_rps"]);
      }
    }
    for (const char* mode : kModes) {
      json& m = point[mode];
      m["throughput_rps"] = Median(m["throughput_rps_rounds"].get<std::vector<double>>());
      m.erase("wall_ms");
      m.erase("run_ms_median");
    }
    points.push_back(point);
  }
  // Each goal checked at every N (value per "N=<clients>").
  Goals::Multi no_failures{"admission: failed runs at each N", 0, "<="};
  Goals::Multi reserved_within_cap{"admission: peak arena reserved / the cap at each N", 1, "<="};
  Goals::Multi rss_within{"admission: peak RSS / (loaded model's RSS + cap) x 1.10 at each N", 1, "<="};
  Goals::Multi fast_enough{"admission's throughput / the better of serial and uncapped (median of the rounds' ratios)",
                           0.9, ">="};
  for (json& point : points) {
    const json& a = point["admission"];
    const auto admitted = a["throughput_rps_rounds"].get<std::vector<double>>();
    const auto serial = point["serial"]["throughput_rps_rounds"].get<std::vector<double>>();
    const auto uncapped = point["uncapped"]["throughput_rps_rounds"].get<std::vector<double>>();
    std::vector<double> ratios;
    for (size_t r = 0; r < admitted.size(); ++r) ratios.push_back(admitted[r] / std::max(serial[r], uncapped[r]));
    const double ratio = Median(ratios);
    const double rss_bound = 1.10 * static_cast<double>(a["rss_loaded"].get<int64_t>() + o.cap_bytes);
    point["admission_throughput_vs_best_baseline_rounds"] = ratios;
    point["admission_throughput_vs_best_baseline"] = ratio;
    point["admission_peak_rss_bound"] = rss_bound;
    const std::string where = "N=" + std::to_string(point["clients"].get<int>());
    no_failures.Add(where, a["failures"].get<double>());
    reserved_within_cap.Add(where, a["peak_arena_reserved"].get<double>() / static_cast<double>(o.cap_bytes));
    rss_within.Add(where, a["peak_rss"].get<double>() / rss_bound);
    fast_enough.Add(where, ratio);
  }
  Goals goals;
  const std::string none = "no client count was measured";
  goals.Add("admission_zero_failures", no_failures, none);
  goals.Add("admission_peak_arena_reserved_within_cap", reserved_within_cap, none);
  goals.Add("admission_peak_rss_within_loaded_plus_cap_plus_10_percent", rss_within, none);
  goals.Add("admission_throughput_at_least_0_9x_best_of_serial_and_uncapped", fast_enough, none);
  return goals.Finish(
      {{"model", o.model},
       {"input_shape", {1, 3, o.side, o.side}},
       {"cap_bytes", o.cap_bytes},
       {"rounds", o.rounds},
       {"runs_per_round",
        "each client once, at least 8 runs (N = 1: 8 in a row, N = 2: 4 each, N = 4: 2 each); serial: 8"},
       {"throughput", "successful runs per second, the median of the mode's rounds"},
       {"baseline", "per round, the better of serial and uncapped of that round; the median of the ratios"},
       {"modes",
        {{"admission", "the cap, admission by memory (the default)"},
         {"admission_off", "the cap, admission off (the behaviour before it)"},
         {"uncapped", "no cap (half the machine's memory), admission off"},
         {"serial", "one run at a time, no cap, admission off"}}},
       {"points", points},
       {"seconds", (NowMs() - start) / 1000}});
}

}  // namespace ebb::cli
