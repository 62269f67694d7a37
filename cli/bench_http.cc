// `ebb bench http`: what the server itself costs. The same small model and
// request are run in-process through the run boundary and over HTTP/1.1 on
// loopback (keep-alive, one client); the difference of the medians is the
// server's overhead per request. The request goes as KServe JSON (the goal's)
// and, reported beside it, in the binary form Triton's HTTP client sends by
// default (tensor bytes after a JSON header, outputs as binary data).
#include <httplib.h>

#include <filesystem>
#include <algorithm>
#include <functional>
#include <random>
#include <thread>
#include <utility>

#include "bench_goals.h"
#include "bench_server.h"
#include "port.h"

namespace ebb::cli {

namespace {

namespace fs = std::filesystem;

// A repository holding `model` as the server would serve it: a model folder's
// parent; for a bare file, a temporary folder `dir` with a model folder that
// holds a hard link to it (or a copy).
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
  const fs::path dir = fs::temp_directory_path() / ("ebb_bench_http_" + std::to_string(port::ProcessId()));
  const fs::path folder = dir / "model";
  fs::create_directories(folder, ec);
  // A hard link (a copy across file systems): a repository follows no link that leads out of it.
  if (!ec) fs::create_hard_link(fs::absolute(model.path, ec), folder / "model.onnx", ec);
  if (ec) {
    ec.clear();
    fs::copy_file(fs::absolute(model.path, ec), folder / "model.onnx", ec);
  }
  if (ec) return Internal("cannot make a repository for '" + model.path + "' in " + dir.string() + ": " + ec.message());
  return BenchRepository{dir.string(), "model", dir};
}

}  // namespace

std::unique_ptr<BenchServer> BenchServer::Start(const BenchOptions& options) {
  std::unique_ptr<BenchServer> b(new BenchServer());
  auto resolved = ResolveModel(WithModel(options, "tiny").model, options.common);  // a small model by default
  if (!resolved.ok()) return Fail(resolved.status()), nullptr;
  auto served = RepositoryFor(*resolved);
  if (!served.ok()) return Fail(served.status()), nullptr;
  b->temp_dir_ = served->dir;
  b->model = served->name;
  b->model_label = resolved->name;
  b->runtime_ = MakeRuntime(options.common);
  if (!b->runtime_) return nullptr;
  auto service = server::InferenceService::Create(
      *b->runtime_, {.root = served->root, .default_device = options.common.device}, {});
  if (!service.ok()) return Fail(service.status()), nullptr;
  b->service_ = std::move(service).value();
  server::ModelRepository& repository = b->service_->repository();
  if (Status st = repository.Load(b->model); !st.ok()) return Fail(st), nullptr;
  b->api_ = std::make_unique<server::RestApi>(*b->service_);
  b->http_ = std::make_unique<server::HttpServer>(*b->api_, server::HttpOptions{.port = 0}, b->service_->request_bytes());
  if (Status st = b->http_->Bind(); !st.ok()) return Fail(st), nullptr;
  b->serving_ = std::thread([http = b->http_.get()] { http->Serve(); });

  auto handle = repository.Acquire(b->model);
  if (!handle.ok()) return Fail(handle.status()), nullptr;
  b->handle_.emplace(std::move(handle).value());
  const TensorInfo& in = b->session()->inputs()[0];
  b->input_name = in.name;
  b->shape = in.shape;
  // A dynamic dimension is 1, or --size for each but the first (the batch): `--model convnet --size 224`
  // sends a [1,3,224,224] image.
  for (size_t i = 0; i < b->shape.size(); ++i) {
    if (b->shape[i] < 0) b->shape[i] = i > 0 && options.size > 0 ? options.size : 1;
  }
  b->values.assign(static_cast<size_t>(ElementCount(b->shape)), 0.5f);
  b->inputs.push_back({in.name, Tensor::FromFloats(b->shape, b->values)});
  // The members in the order Triton's clients write them (name, shape, datatype, then data), so
  // that the data is decoded as it is read; nlohmann's sorted keys would put "data" first, which
  // the server reads too, in a second pass over it once the datatype is known.
  b->json_body =
      nlohmann::ordered_json{
          {"inputs", {{{"name", in.name}, {"shape", b->shape}, {"datatype", "FP32"}, {"data", b->values}}}}}
          .dump();
  b->infer_path = "/v2/models/" + b->model + "/infer";
  const std::string header =
      nlohmann::json{{"inputs",
                      {{{"name", in.name},
                        {"shape", b->shape},
                        {"datatype", "FP32"},
                        {"parameters", {{"binary_data_size", b->values.size() * sizeof(float)}}}}}},
                     {"parameters", {{"binary_data_output", true}}}}
          .dump();
  b->binary_header_length = header.size();
  b->binary_body = header;
  b->binary_body.append(reinterpret_cast<const char*>(b->values.data()), b->values.size() * sizeof(float));
  return b;
}

int TimeShuffled(const std::vector<TimedKind>& kinds, int rounds, int warmup) {
  std::vector<size_t> order(kinds.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::mt19937 shuffle_rng(24);
  int failures = 0;
  for (int i = 0; i < warmup + rounds; ++i) {
    std::shuffle(order.begin(), order.end(), shuffle_rng);
    for (size_t k : order) {
      const auto& [times, request] = kinds[k];
      const double t0 = NowMs();
      failures += request() ? 0 : 1;
      if (i >= warmup) times->push_back((NowMs() - t0) * 1000);
    }
  }
  return failures;
}

BenchServer::~BenchServer() {
  handle_.reset();
  if (http_) http_->Stop();
  if (serving_.joinable()) serving_.join();
  std::error_code ec;
  if (!temp_dir_.empty()) fs::remove_all(temp_dir_, ec);
}

int BenchHttp(const BenchOptions& options) {
  const int n = options.iterations ? options.iterations : 2000;
  std::unique_ptr<BenchServer> b = BenchServer::Start(options);
  if (!b) return 1;
  const std::string model = b->model_label;
  const std::string& body = b->json_body;
  const std::string& path = b->infer_path;
  const std::vector<NamedTensor>& inputs = b->inputs;
  auto* handle = b.get();

  httplib::Client client("127.0.0.1", b->http_port());
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  const httplib::Headers binary_headers = {
      {"Inference-Header-Content-Length", std::to_string(b->binary_header_length)}};
  std::vector<double> local_us, http_us, binary_us, live_us;
  int failures = 0;
  // In an order shuffled each round, so that no kind always follows the same one.
  const std::vector<TimedKind> kinds = {
      {&local_us, [&] { return handle->session()->Run(inputs).ok(); }},
      {&http_us,
       [&] {
         auto res = client.Post(path.c_str(), body, "application/json");
         return res && res->status == 200;
       }},
      {&binary_us,
       [&] {
         auto res = client.Post(path.c_str(), binary_headers, handle->binary_body, "application/octet-stream");
         return res && res->status == 200 && res->get_header_value("Inference-Header-Content-Length") != "";
       }},
      {&live_us,
       [&] {
         auto live = client.Get("/v2/health/live");  // the transport's own floor: a request that does nothing
         return live && live->status == 200;
       }},
  };
  failures += TimeShuffled(kinds, n);
  client.stop();  // close the keep-alive connection, or the server waits for it to time out
  b.reset();
  const double local_p50 = Median(local_us), http_p50 = Median(http_us), live_p50 = Median(live_us);
  const double overhead = http_p50 - local_p50;
  const double binary_overhead = Median(binary_us) - local_p50;
  Goals goals;
  goals.AtMost("overhead_p50_at_most_1_3x_health_live", overhead / live_p50, 1.3,
               "inference overhead p50 over the run boundary / GET /v2/health/live p50");
  return goals.Finish({{"model", model},
                       {"requests", n},
                       {"failures", failures},
                       {"in_process_p50_us", local_p50},
                       {"http_p50_us", http_p50},
                       {"http_p99_us", Percentile(http_us, 0.99)},
                       {"overhead_p50_us", overhead},
                       {"health_live_p50_us", live_p50},
                       {"overhead_over_health_live", overhead / live_p50},
                       // Not a goal: the is the JSON request's; this is what Triton's client sends.
                       {"binary_p50_us", Median(binary_us)},
                       {"binary_p99_us", Percentile(binary_us, 0.99)},
                       {"binary_overhead_p50_us", binary_overhead},
                       {"binary_overhead_over_health_live", binary_overhead / live_p50}},
                      failures ? 1 : 0);
}

}  // namespace ebb::cli
