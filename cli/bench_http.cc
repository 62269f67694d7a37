// `ebb bench http`: what the server itself costs. The same small model and
// request are run in-process through the run boundary and over HTTP/1.1 on
// loopback (keep-alive, one client); the difference of the medians is the
// server's overhead per request. The request goes as KServe JSON and in the
// binary form Triton's HTTP client sends by default (tensor bytes after a JSON
// header, outputs as binary data); a do-nothing GET is the transport's floor.
// With --size (an image-sized request) a raw loopback exchange of the binary
// form's bytes (RawExchange, bench_server.h) is timed among them, and the
// binary form's overhead is compared with it (the goal). The tiny request's
// figures have no goal.
#include <httplib.h>

#include <filesystem>
#include <algorithm>
#include <functional>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include "bench_goals.h"
#include "bench_server.h"
#include "port.h"
#include "serve_child.h"

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

// The bytes an HTTP/1.1 message puts on the wire: its first line, its headers and its body.
std::string WireText(const std::string& first_line, const httplib::Headers& headers, const std::string& body) {
  std::string text = first_line + "\r\n";
  for (const auto& [name, value] : headers) text += name + ": " + value + "\r\n";
  return text + "\r\n" + body;
}

// The bytes one binary request and its reply put on the wire, as the client sent them (its headers as
// it completed them) and the server answered; std::nullopt (the error printed) on failure.
struct WireExchange {
  std::string request, reply;
};
std::optional<WireExchange> WireBytesOf(httplib::Client& client, const std::string& path,
                                        const httplib::Headers& headers, const std::string& body) {
  WireExchange wire;
  client.set_logger([&](const httplib::Request& req, const httplib::Response& res) {
    wire.request = WireText(req.method + " " + req.path + " HTTP/1.1", req.headers, req.body);
    wire.reply = WireText(res.version + " " + std::to_string(res.status) + " " + res.reason, res.headers, res.body);
  });
  auto res = client.Post(path.c_str(), headers, body, "application/octet-stream");
  client.set_logger(nullptr);
  if (!res || res->status != 200 || wire.request.empty()) {
    return Fail(Internal("the binary request whose bytes the benchmark sends failed")), std::nullopt;
  }
  return wire;
}

// The page faults (minor + major) `ebb serve`, in its own process with its own defaults, takes per
// binary request of `request`'s bytes on one connection (the lean client): 20 requests to warm up
// (the first loads the model), then 100 counted from /proc/<pid>/stat (port::PageFaultsOf). Sets
// `*per_request` when measured; the figures, or a note saying why not.
nlohmann::json ServeFaults(const std::string& repository, const std::string& request, std::optional<double>* per_request) {
  constexpr int kWarmup = 20, kCounted = 100;
  auto child = ServeChild::Start("faults", {"--repository", repository, "--no-load", "--grpc-port", "0"});
  if (!child.ok()) return {{"note", child.status().message()}};
  std::unique_ptr<LeanHttpClient> client = LeanHttpClient::Connect((*child)->port(), request);
  if (!client) return {{"note", "cannot connect to ebb serve"}};
  int failures = 0;
  const int64_t at_start = port::PageFaultsOf((*child)->pid());
  for (int i = 0; i < kWarmup; ++i) failures += client->Exchange() ? 0 : 1;
  const int64_t before = port::PageFaultsOf((*child)->pid());
  std::vector<double> times_us;
  for (int i = 0; i < kCounted; ++i) {
    const double t0 = NowMs();
    failures += client->Exchange() ? 0 : 1;
    times_us.push_back((NowMs() - t0) * 1000);
  }
  const int64_t after = port::PageFaultsOf((*child)->pid());
  nlohmann::json figures = {{"requests", kCounted}, {"warmup_requests", kWarmup}, {"failures", failures},
                            {"p50_us", Median(times_us)}};
  if (failures) figures["note"] = "requests to ebb serve failed";
  else if (before < 0 || after < 0) figures["note"] = "this system does not tell another process's page faults";
  // The warm-up loaded a model (thousands of faults): a counter that stayed put counts nothing (Wine).
  else if (before == at_start) figures["note"] = "this system's page-fault counter did not move while a model loaded";
  else *per_request = static_cast<double>(after - before) / kCounted;
  return figures;
}

}  // namespace

std::unique_ptr<BenchServer> BenchServer::Start(const BenchOptions& options) {
  std::unique_ptr<BenchServer> b(new BenchServer());
  auto resolved = ResolveModel(WithModel(options, "tiny").model, options.common);  // a small model by default
  if (!resolved.ok()) return Fail(resolved.status()), nullptr;
  auto served = RepositoryFor(*resolved);
  if (!served.ok()) return Fail(served.status()), nullptr;
  b->temp_dir_ = served->dir;
  b->repository_root = served->root;
  b->model = served->name;
  b->model_label = resolved->name;
  // The release `ebb serve` runs with (idle unless --policy says otherwise): the in-process runs use
  // the same runtime, so both sides of the comparison run under it.
  Result<MemoryPolicy> policy = ServerPolicy(options.common);
  if (!policy.ok()) return Fail(policy.status()), nullptr;
  b->release_ = policy->release;
  b->runtime_ = MakeRuntime(*policy);
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
  // --size is an image's side: a model without a dynamic dimension beyond the batch (tiny's [1,64])
  // would be measured at its own size, and the image goals judged on that.
  if (options.size > 0 &&
      std::none_of(in.shape.begin() + std::min<size_t>(1, in.shape.size()), in.shape.end(), [](int64_t d) { return d < 0; })) {
    return Fail(InvalidArgument("--size " + std::to_string(options.size) + " needs a model whose input has a dynamic " +
                                "dimension beyond the batch (--model convnet); '" + b->model + "' takes " +
                                ShapeToString(in.shape))),
           nullptr;
  }
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
  // The binary form's bytes as cpp-httplib puts them on the wire, sent as they are by the lean
  // client (the form's figures and goal) on a connection of its own.
  std::optional<WireExchange> wire = WireBytesOf(client, path, binary_headers, handle->binary_body);
  std::unique_ptr<LeanHttpClient> lean = wire ? LeanHttpClient::Connect(b->http_port(), wire->request) : nullptr;
  if (!lean) {
    client.stop();
    return 1;
  }
  std::vector<double> local_us, http_us, binary_us, httplib_binary_us, live_us;
  int failures = 0;
  // In an order shuffled each round, so that no kind always follows the same one.
  std::vector<TimedKind> kinds = {
      {&local_us, [&] { return handle->session()->Run(inputs).ok(); }},
      {&http_us,
       [&] {
         auto res = client.Post(path.c_str(), body, "application/json");
         return res && res->status == 200;
       }},
      {&binary_us, [&] { return lean->Exchange(); }},
      {&httplib_binary_us,
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
  // An image-sized request (--size): the same bytes as the binary form's, exchanged raw over loopback.
  std::unique_ptr<RawExchange> raw;
  if (options.size > 0) {
    raw = RawExchange::Start(wire->request, wire->reply);
    if (!raw) {
      client.stop();
      return 1;
    }
    raw->AddKinds(&kinds);
  }
  failures += TimeShuffled(kinds, n);
  client.stop();  // close the keep-alive connections, or the server waits for them to time out
  lean.reset();
  const std::string release = ReleaseModeName(b->release());
  // An image-sized request: what `ebb serve` (its own process, its own defaults) faults per request.
  std::optional<double> serve_faults;
  nlohmann::json serve_figures;
  if (options.size > 0) serve_figures = ServeFaults(b->repository_root, wire->request, &serve_faults);
  b.reset();
  const double local_p50 = Median(local_us), http_p50 = Median(http_us), live_p50 = Median(live_us);
  const double overhead = http_p50 - local_p50;
  const double binary_overhead = Median(binary_us) - local_p50;
  const double httplib_binary_overhead = Median(httplib_binary_us) - local_p50;
  // The tiny request's goal against the do-nothing GET is retired (issue 38); its figures stay.
  Goals goals;
  nlohmann::json figures = {{"model", model},
                            {"requests", n},
                            {"failures", failures},
                            {"release", release},
                            {"in_process_p50_us", local_p50},
                            {"http_p50_us", http_p50},
                            {"http_p99_us", Percentile(http_us, 0.99)},
                            {"overhead_p50_us", overhead},
                            {"health_live_p50_us", live_p50},
                            {"overhead_over_health_live", overhead / live_p50},
                            // The form Triton's HTTP client sends by default, sent by the lean client.
                            {"binary_request_bytes", wire->request.size()},
                            {"binary_p50_us", Median(binary_us)},
                            {"binary_p99_us", Percentile(binary_us, 0.99)},
                            {"binary_overhead_p50_us", binary_overhead},
                            {"binary_overhead_over_health_live", binary_overhead / live_p50},
                            // The same bytes sent by cpp-httplib, whose own reading of the reply is part of it.
                            {"httplib_binary_p50_us", Median(httplib_binary_us)},
                            {"httplib_binary_p99_us", Percentile(httplib_binary_us, 0.99)},
                            {"httplib_binary_overhead_p50_us", httplib_binary_overhead}};
  if (raw) {
    const double raw_p50 = raw->p50_us();
    figures["raw_exchange"] = raw->Figures();
    figures["binary_overhead_over_raw"] = binary_overhead / raw_p50;
    figures["httplib_binary_overhead_over_raw"] = httplib_binary_overhead / raw_p50;
    figures["overhead_over_raw"] = overhead / raw_p50;  // the JSON form's, against the binary form's bytes
    goals.AtMost("http_binary_overhead_at_most_2x_raw", binary_overhead / raw_p50, 2,
                 "HTTP binary form's overhead p50 over the run (lean client) / p50 of a raw loopback exchange of "
                 "its bytes");
    figures["serve"] = serve_figures;
    figures["serve_faults_per_request"] = serve_faults ? nlohmann::json(*serve_faults) : nlohmann::json();
    goals.AtMost("serve_faults_per_request_at_most_20", serve_faults, 20,
                 "page faults (minor + major) of ebb serve per binary request, /proc/<pid>/stat over 100",
                 serve_figures.value("note", ""));
  }
  return goals.Finish(figures, failures ? 1 : 0);
}

}  // namespace ebb::cli
