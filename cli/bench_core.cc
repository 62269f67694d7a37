// `ebb bench overhead` and `ebb bench floor`: the run boundary's cost and the
// memory floor it returns to. Both print JSON.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <random>

#include "bare_run.h"
#include "bench.h"
#include "bench_goals.h"
#include "port.h"

namespace ebb::cli {
namespace {

int64_t MinorFaults() { return port::MinorPageFaults(); }

// The runtime and the benchmarked model's session; false (reported) on failure.
bool Setup(const BenchOptions& options, std::unique_ptr<Runtime>* runtime, std::shared_ptr<Session>* session) {
  *runtime = MakeRuntime(options.common);
  if (*runtime) *session = LoadOrReport(**runtime, options.model, options.common);
  return *runtime && *session;
}

}  // namespace

int BenchOverhead(const BenchOptions& given) {
  const BenchOptions options = WithModel(given, "convnet");
  std::unique_ptr<Runtime> runtime;
  std::shared_ptr<Session> session;
  if (!Setup(options, &runtime, &session)) return 1;
  const int64_t side = options.size ? options.size : 256;
  auto inputs = NoiseImage(session->inputs()[0].name, side, side);
  auto bare = detail::MakeBareOrtRun(*session, inputs);
  if (!bare) return Fail(InvalidArgument("model '" + options.model + "' does not take one [1,3,H,W] image"));

  RunFlags mid_operation;
  mid_operation.ends_operation = false;
  auto ebb_run = [&] { return session->Run(inputs, mid_operation).ok(); };
  for (int i = 0; i < 5; ++i) {
    if (!bare() || !ebb_run()) return Fail(Internal("warm-up run failed"));
  }
  const int n = options.iterations ? options.iterations : 150;
  // Three runs a round: bare ORT (A), ebb, bare ORT again (A'), in an order shuffled every round, so
  // that drift on a shared machine hits all three alike and none always follows the same one (a run
  // after ebb's would otherwise carry whatever ebb's leaves behind into A' alone).
  // A' against A is the A/A ratio: what the benchmark reports when there is no difference at all.
  // Page faults of each run too (getrusage: the whole process's, all threads), the cost a run pays
  // for memory that is new to it.
  std::vector<double> bare_ms, bare_again_ms, ebb_ms, release_ms;
  int64_t bare_faults = 0, ebb_faults = 0;
  std::mt19937 shuffle_rng(24);
  std::array<int, 3> order = {0, 1, 2};  // 0: bare, 1: ebb, 2: bare again
  for (int i = 0; i < n; ++i) {
    std::shuffle(order.begin(), order.end(), shuffle_rng);
    for (int k = 0; k < 3; ++k) {
      const int turn = order[static_cast<size_t>(k)];
      const int64_t f0 = MinorFaults();
      double t0 = NowMs();
      bool ok = turn == 1 ? ebb_run() : bare();
      (turn == 0 ? bare_ms : turn == 1 ? ebb_ms : bare_again_ms).push_back(NowMs() - t0);
      (turn == 1 ? ebb_faults : bare_faults) += MinorFaults() - f0;
      if (!ok) return Fail(Internal("run failed during the benchmark"));
    }
  }
  // A run that is a whole operation on its own and releases at its end (as an
  // operation's last run: OperationReleaseMode; under the default, idle, a
  // single run releases once runs pause), so the next one regrows: reported
  // for information, not part of the ratio.
  RunFlags releasing;
  releasing.release = OperationReleaseMode(runtime->policy(), std::nullopt);
  for (int i = 0; i < std::max(5, n / 6); ++i) {
    double t0 = NowMs();
    if (!session->Run(inputs, releasing).ok()) return Fail(Internal("releasing run failed"));
    release_ms.push_back(NowMs() - t0);
  }
  const double bare_median = Median(bare_ms), ebb_median = Median(ebb_ms), again_median = Median(bare_again_ms);
  const double ratio = ebb_median / bare_median, aa = again_median / bare_median;
  Goals goals;
  goals.AtMost("run_boundary_ratio_at_most_1_02", ratio, 1.02, "ebb median / bare ORT median");
  return goals.Finish({{"model", options.model},
                       {"input_shape", {1, 3, side, side}},
                       {"device", session->device().ToString()},
                       {"iterations", n},
                       {"bare_ort_median_ms", bare_median},
                       {"bare_ort_again_median_ms", again_median},
                       {"ebb_median_ms", ebb_median},
                       {"ratio", ratio},
                       {"aa_ratio", aa},
                       {"aa_spread", std::abs(aa - 1)},
                       {"ratio_beyond_aa_spread", ratio - 1 > std::abs(aa - 1)},
                       {"bare_ort_page_faults_per_run", static_cast<double>(bare_faults) / (2.0 * n)},
                       {"ebb_page_faults_per_run", static_cast<double>(ebb_faults) / n},
                       {"ebb_releasing_run_median_ms", Median(release_ms)}});
}

namespace {

// The session's CUDA arena reserved bytes, and NVML's used bytes of its device (0 without one).
int64_t DeviceReserved(const Session& session) {
  int64_t reserved = 0;
  for (const ArenaStats& a : session.ReadOwnArenas()) {
    if (a.name.rfind("gpu:", 0) == 0) reserved += a.reserved;
  }
  if (auto shared = session.ReadSharedDeviceArena()) reserved += shared->reserved;  // cuda.arena shared
  return reserved;
}

int64_t GpuUsed(const Session& session) {
  for (const GpuMemory& g : ReadGpuMemory()) {
    if (g.index == session.device().index) return g.used;
  }
  return 0;
}

}  // namespace

int BenchFloor(const BenchOptions& given) {
  const BenchOptions options = WithModel(given, "convnet");
  std::unique_ptr<Runtime> runtime;
  std::shared_ptr<Session> session;
  if (!Setup(options, &runtime, &session)) return 1;
  const int64_t side = options.size ? options.size : 2048;
  auto inputs = NoiseImage(session->inputs()[0].name, side, side);
  const bool on_cuda = session->device().kind == DeviceKind::kCuda;

  const int64_t reserved_after_load = SharedReserved(*runtime);
  const int64_t rss_after_load = ReadRssBytes();
  const int64_t device_after_load = DeviceReserved(*session), gpu_after_load = GpuUsed(*session);
  int64_t reserved_peak = 0, rss_peak = 0, device_peak = 0, gpu_peak = 0;
  {
    RssPeakSampler sampler;
    // One operation of two runs: the peak is held between them and given
    // back at the end of the second (as an operation's runs are, OperationReleaseMode).
    RunFlags first, last;
    first.ends_operation = false;
    first.release = last.release = OperationReleaseMode(runtime->policy(), std::nullopt);
    if (auto out = session->Run(inputs, first); !out.ok()) return Fail(out.status());
    reserved_peak = SharedReserved(*runtime);
    device_peak = DeviceReserved(*session);
    gpu_peak = GpuUsed(*session);
    if (auto out = session->Run(inputs, last); !out.ok()) return Fail(out.status());
    rss_peak = sampler.peak();
  }
  const int64_t reserved_after_release = SharedReserved(*runtime);
  const int64_t rss_after_release = ReadRssBytes();
  const int64_t device_after_release = DeviceReserved(*session), gpu_after_release = GpuUsed(*session);
  nlohmann::json result = {{"model", options.model},
                           {"device", session->device().ToString()},
                           {"input_shape", {1, 3, side, side}},
                           {"reserved_after_load", reserved_after_load},
                           {"reserved_peak", reserved_peak},
                           {"reserved_after_release", reserved_after_release},
                           {"rss_after_load", rss_after_load},
                           {"rss_peak", rss_peak},
                           {"rss_after_release", rss_after_release}};
  Goals goals;
  const double mib = 1 << 20;
  if (!on_cuda) {
    goals.AtMost("reserved_back_to_floor", (reserved_after_release - reserved_after_load) / mib, 1,
                 "MiB over after load");
    goals.AtMost("rss_within_10_percent", static_cast<double>(rss_after_release) / rss_after_load, 1.1,
                 "RSS after release / after load");
    goals.Above("rss_peak_over_2x", static_cast<double>(rss_peak) / rss_after_load, 2, "RSS peak / after load");
  } else {
    // On CUDA the activations are in the session's CUDA arena: the goals are the device's. The
    // device memory NVML reports is the whole device's (the CUDA context included).
    result["device_reserved_after_load"] = device_after_load;
    result["device_reserved_peak"] = device_peak;
    result["device_reserved_after_release"] = device_after_release;
    result["gpu_used_after_load"] = gpu_after_load;
    result["gpu_used_peak"] = gpu_peak;
    result["gpu_used_after_release"] = gpu_after_release;
    goals.AtMost("device_reserved_back_to_floor", (device_after_release - device_after_load) / mib, 1,
                 "MiB over after load");
    goals.AtLeast("device_peak_over_64_mib", (device_peak - device_after_load) / mib, 64, "MiB over after load");
    std::optional<double> gpu_change;
    if (gpu_after_load > 0)
      gpu_change = std::llabs(gpu_after_release - gpu_after_load) / static_cast<double>(gpu_after_load);
    goals.AtMost("gpu_used_within_5_percent", gpu_change, 0.05, "|after release - after load| / after load",
                 gpu_after_load > 0 ? "" : "NVML reported no used memory for the device");
    goals.AtMost("rss_within_10_percent", static_cast<double>(rss_after_release) / rss_after_load, 1.1,
                 "RSS after release / after load");
  }
  return goals.Finish(result);
}

std::string GeneratedModelsDir(const std::string& given) {
  if (!given.empty()) return given;
  return (port::PathFromUtf8(port::ExecutablePath()).parent_path() / "generated_models").string();
}

}  // namespace ebb::cli
