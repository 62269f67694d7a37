// `ebb bench overhead` and `ebb bench floor`: the run boundary's cost and the
// memory floor it returns to. Both print JSON.
#include "bench.h"

#include <cstdlib>

#include "session_state.h"

namespace ebb::cli {
namespace {

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
  std::vector<double> bare_ms, ebb_ms, release_ms;
  for (int i = 0; i < n; ++i) {
    // Alternate the order so that drift on a shared machine hits both alike.
    for (int k = 0; k < 2; ++k) {
      bool bare_turn = (i + k) % 2 == 0;
      double t0 = NowMs();
      bool ok = bare_turn ? bare() : ebb_run();
      (bare_turn ? bare_ms : ebb_ms).push_back(NowMs() - t0);
      if (!ok) return Fail(Internal("run failed during the benchmark"));
    }
  }
  // A run that is a whole operation on its own also releases (and the next
  // one regrows): reported for information, not part of the ratio.
  for (int i = 0; i < std::max(5, n / 6); ++i) {
    double t0 = NowMs();
    if (!session->Run(inputs).ok()) return Fail(Internal("releasing run failed"));
    release_ms.push_back(NowMs() - t0);
  }
  const double bare_median = Median(bare_ms), ebb_median = Median(ebb_ms);
  PrintJson({{"model", options.model},
             {"input_shape", {1, 3, side, side}},
             {"device", session->device().ToString()},
             {"iterations", n},
             {"bare_ort_median_ms", bare_median},
             {"ebb_median_ms", ebb_median},
             {"ratio", ebb_median / bare_median},
             {"goal_ratio_max", 1.02},
             {"ebb_releasing_run_median_ms", Median(release_ms)}});
  return 0;
}

namespace {

// The session's CUDA arena reserved bytes, and NVML's used bytes of its device (0 without one).
int64_t DeviceReserved(const Session& session) {
  int64_t reserved = 0;
  for (const ArenaStats& a : session.ReadOwnArenas()) {
    if (a.name.rfind("gpu:", 0) == 0) reserved += a.reserved;
  }
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
    // back at the end of the second.
    RunFlags first;
    first.ends_operation = false;
    if (auto out = session->Run(inputs, first); !out.ok()) return Fail(out.status());
    reserved_peak = SharedReserved(*runtime);
    device_peak = DeviceReserved(*session);
    gpu_peak = GpuUsed(*session);
    if (auto out = session->Run(inputs); !out.ok()) return Fail(out.status());
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
  if (!on_cuda) {
    result["goals"] = {{"reserved_back_to_floor", reserved_after_release <= reserved_after_load + (1 << 20)},
                       {"rss_within_10_percent", rss_after_release <= rss_after_load * 11 / 10},
                       {"rss_peak_over_2x", rss_peak > 2 * rss_after_load}};
  } else {
    // On CUDA the activations are in the session's CUDA arena: the goals are the device's. The
    // device memory NVML reports is the whole device's (the CUDA context included).
    result["device_reserved_after_load"] = device_after_load;
    result["device_reserved_peak"] = device_peak;
    result["device_reserved_after_release"] = device_after_release;
    result["gpu_used_after_load"] = gpu_after_load;
    result["gpu_used_peak"] = gpu_peak;
    result["gpu_used_after_release"] = gpu_after_release;
    result["goals"] = {
        {"device_reserved_back_to_floor", device_after_release <= device_after_load + (1 << 20)},
        {"device_peak_over_64_mib", device_peak >= device_after_load + (int64_t{64} << 20)},
        {"gpu_used_within_5_percent", std::llabs(gpu_after_release - gpu_after_load) * 20 <= gpu_after_load},
        {"rss_within_10_percent", rss_after_release <= rss_after_load * 11 / 10}};
  }
  PrintJson(result);
  return 0;
}

}  // namespace ebb::cli
