// `ebb bench http`: what the server itself costs. The same small model and
// request are run in-process through the run boundary and over HTTP/1.1 on
// loopback (keep-alive, one client); the difference of the medians is the
// server's overhead per request.
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "bench.h"
#include "core/service.h"
#include "http/http_server.h"

namespace ebb::cli {

namespace {

namespace fs = std::filesystem;

// A repository holding `model` as the server would serve it: a model folder's
// parent; for a bare file, a temporary folder `dir` with a model folder that
// links to it.
struct BenchRepository {
  std::string root, name;
  fs::path dir;  // removed at the end when set
};

Result<BenchRepository> RepositoryFor(const ModelArg& model) {
  std::error_code ec;
  if (!model.folder.empty()) {
    const fs::path folder = fs::absolute(model.folder, ec).lexically_normal();
    return BenchRepository{(folder.has_filename() ? folder : folder.parent_path()).parent_path().string(), model.name,
                           {}};
  }
  const fs::path dir = fs::temp_directory_path() / ("ebb_bench_http_" + std::to_string(getpid()));
  const fs::path folder = dir / "model";
  fs::create_directories(folder, ec);
  if (!ec) fs::create_symlink(fs::absolute(model.path, ec), folder / "model.onnx", ec);
  if (ec) return Internal("cannot make a repository for '" + model.path + "' in " + dir.string() + ": " + ec.message());
  return BenchRepository{dir.string(), "model", dir};
}

}  // namespace

int BenchHttp(const BenchOptions& options) {
  const int n = options.iterations ? options.iterations : 2000;
  auto resolved = ResolveModel(WithModel(options, "tiny").model, options.common);  // a small model by default
  if (!resolved.ok()) return Fail(resolved.status());
  auto served = RepositoryFor(*resolved);
  if (!served.ok()) return Fail(served.status());
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } cleanup{served->dir};
  const std::string& model = served->name;
  auto runtime = MakeRuntime(options.common);
  if (!runtime) return 1;
  auto service = server::InferenceService::Create(
      *runtime, {.root = served->root, .default_device = options.common.device}, {});
  if (!service.ok()) return Fail(service.status());
  server::ModelRepository& repository = (*service)->repository();
  if (Status st = repository.Load(model); !st.ok()) return Fail(st);
  server::RestApi api(**service);
  server::HttpServer http(api, {.port = 0});
  if (Status st = http.Bind(); !st.ok()) return Fail(st);
  std::thread serving([&http] { http.Serve(); });

  auto handle = repository.Acquire(model);
  if (!handle.ok()) return Fail(handle.status());
  const TensorInfo& in = handle->session()->inputs()[0];
  Shape shape = in.shape;
  for (int64_t& d : shape) d = d < 0 ? 1 : d;
  std::vector<float> values(static_cast<size_t>(ElementCount(shape)), 0.5f);
  std::vector<NamedTensor> inputs;
  inputs.push_back({in.name, Tensor::FromFloats(shape, values)});
  const std::string body =
      nlohmann::json{{"inputs", {{{"name", in.name}, {"shape", shape}, {"datatype", "FP32"}, {"data", values}}}}}.dump();
  const std::string path = "/v2/models/" + model + "/infer";

  httplib::Client client("127.0.0.1", http.port());
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  std::vector<double> local_us, http_us, live_us;
  int failures = 0;
  for (int i = 0; i < n + 50; ++i) {  // the first 50 of each warm up
    double t0 = NowMs();
    failures += handle->session()->Run(inputs).ok() ? 0 : 1;
    double t1 = NowMs();
    auto res = client.Post(path.c_str(), body, "application/json");
    double t2 = NowMs();
    failures += res && res->status == 200 ? 0 : 1;
    double t3 = NowMs();
    auto live = client.Get("/v2/health/live");  // the transport's own floor: a request that does nothing
    double t4 = NowMs();
    failures += live && live->status == 200 ? 0 : 1;
    if (i >= 50) {
      live_us.push_back((t4 - t3) * 1000);
      local_us.push_back((t1 - t0) * 1000);
      http_us.push_back((t2 - t1) * 1000);
    }
  }
  client.stop();  // close the keep-alive connection, or the server waits for it to time out
  http.Stop();
  serving.join();
  const double local_p50 = Median(local_us), http_p50 = Median(http_us);
  PrintJson({{"model", resolved->name},
             {"requests", n},
             {"failures", failures},
             {"in_process_p50_us", local_p50},
             {"http_p50_us", http_p50},
             {"http_p99_us", Percentile(http_us, 0.99)},
             {"overhead_p50_us", http_p50 - local_p50},
             {"health_live_p50_us", Median(live_us)},
             {"goal_overhead_p50_us_max", 150}});
  return failures ? 1 : 0;
}

}  // namespace ebb::cli
