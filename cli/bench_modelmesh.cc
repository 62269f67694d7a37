// `ebb bench modelmesh`: the sizes ebb reports to ModelMesh against the memory
// a model really takes. ModelMesh places models across pods by these numbers
// (predictModelSize before a load, loadModel's sizeInBytes and modelSize
// after), so they are the contract.
//
// For every bundled model (folders under --models) and the generated conv
// models (--sizes, MB of weights, from generated_models/ beside the binary),
// in a FRESH `ebb serve --modelmesh` child process each (this binary, loopback
// ports, a fresh optimized-model cache: every load is a first load, as in a
// new pod), over real gRPC:
//   runtimeStatus; RSS0 = the child's VmRSS; predictModelSize; its VmHWM reset
//   (/proc/<pid>/clear_refs); loadModel -> sizeInBytes; RSS1, HWM1 (the load's
//   peak); one ModelInfer with zeros (dynamic dims: 1 for the first, 64 for the
//   others); modelSize; HWM2 (the pool resets the high-water mark when the
//   inference starts, so HWM2 is the inference's peak); unloadModel; RSS2.
// actual = RSS1 - RSS0: what the model holds loaded, the size ModelMesh
// places it by. Its runs' memory is not part of it: the pool reserves each
// run's need against the budget when it runs (admission by memory), so HWM2
// (one inference's peak) is reported beside it, not judged.
// Goals: predicted >= actual (conservative), and loadModel's sizeInBytes and
// modelSize both within 20% of actual, for every model; misses are listed
// with the numbers.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "bench.h"
#include "bench_goals.h"
#include "core/modelmesh.h"
#include "grpc_service.grpc.pb.h"
#include "model-runtime.grpc.pb.h"
#include "spawn_self.h"

namespace ebb::cli {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

// `ebb serve --modelmesh` as a child process on loopback, with its gRPC port.
class Child {
 public:
  static Result<std::unique_ptr<Child>> Start(const std::string& model_root, const std::string& repository,
                                              const std::string& cache_dir, const CommonOptions& common) {
    std::vector<std::string> args = {"ebb",          "serve",    "--modelmesh", "--repository", repository,
                                     "--model-root", model_root, "--no-load",   "--port",       "0",
                                     "--grpc-port",  "-1",       "--device",    "cpu"};
    if (!common.policy_file.empty()) args.insert(args.end(), {"--policy", common.policy_file});
    auto spawned = SpawnSelf(std::move(args), {{"EBB_CACHE_DIR", cache_dir}});
    if (!spawned.ok()) return spawned.status();
    auto child = std::unique_ptr<Child>(new Child(std::move(spawned).value()));
    std::string line;
    while (child->process_.ReadStdoutLine(&line)) {
      int port = 0;
      if (std::sscanf(line.c_str(), "ebb serve: grpc 127.0.0.1:%d", &port) == 1) {
        child->port_ = port;
        break;
      }
    }
    if (child->port_ == 0) return Internal("ebb serve --modelmesh did not start");
    grpc::ChannelArguments channel_args;
    channel_args.SetMaxReceiveMessageSize(-1);
    child->channel_ = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(child->port_),
                                                grpc::InsecureChannelCredentials(), channel_args);
    return child;
  }
  ~Child() {
    process_.Stop();
    process_.Wait();
  }
  int64_t pid() const { return process_.id(); }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

 private:
  explicit Child(port::Child process) : process_(std::move(process)) {}
  port::Child process_;
  int port_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
};

int64_t ElementSize(const std::string& datatype) {
  if (datatype == "FP64" || datatype == "INT64" || datatype == "UINT64") return 8;
  if (datatype == "FP32" || datatype == "INT32" || datatype == "UINT32") return 4;
  if (datatype == "FP16" || datatype == "BF16" || datatype == "INT16" || datatype == "UINT16") return 2;
  return 1;  // INT8, UINT8, BOOL
}

// A request of zeros for the model's inputs (BYTES: empty strings).
inference::ModelInferRequest ZerosFor(const std::string& model, const inference::ModelMetadataResponse& metadata) {
  inference::ModelInferRequest request;
  request.set_model_name(model);
  for (const auto& input : metadata.inputs()) {
    auto* tensor = request.add_inputs();
    tensor->set_name(input.name());
    tensor->set_datatype(input.datatype());
    int64_t count = 1;
    for (int i = 0; i < input.shape_size(); ++i) {
      const int64_t d = input.shape(i) >= 0 ? input.shape(i) : (i == 0 ? 1 : 64);
      tensor->add_shape(d);
      count *= d;
    }
    if (input.datatype() == "BYTES") {
      for (int64_t i = 0; i < count; ++i) tensor->mutable_contents()->add_bytes_contents("");
    } else {
      request.add_raw_input_contents(std::string(static_cast<size_t>(count * ElementSize(input.datatype())), '\0'));
    }
  }
  return request;
}

struct Measured {
  json row;
  bool conservative = false, within = false;
};

Result<Measured> MeasureOne(const std::string& name, const std::string& root, const std::string& repository,
                            const CommonOptions& common) {
  const std::string cache = repository + "_cache_" + name;
  auto child = Child::Start(root, repository, cache, common);
  if (!child.ok()) return child.status();
  const int64_t pid = (*child)->pid();
  auto mesh = mmesh::ModelRuntime::NewStub((*child)->channel());
  auto v2 = inference::GRPCInferenceService::NewStub((*child)->channel());
  auto call = [](auto method) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
    return method(&context);
  };
  mmesh::RuntimeStatusResponse status;
  grpc::Status st = call([&](grpc::ClientContext* c) { return mesh->runtimeStatus(c, {}, &status); });
  if (!st.ok()) return Internal("runtimeStatus: " + st.error_message());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // settle after start-up
  const int64_t rss0 = port::ResidentBytesOf(pid);
  mmesh::PredictModelSizeRequest predict_request;
  predict_request.set_modelid(name);
  predict_request.set_modelpath(name);
  mmesh::PredictModelSizeResponse predicted;
  st = call([&](grpc::ClientContext* c) { return mesh->predictModelSize(c, predict_request, &predicted); });
  if (!st.ok()) return Internal("predictModelSize of '" + name + "': " + st.error_message());
  const bool peak_reset = port::ResetPeakResidentOf(pid);
  mmesh::LoadModelRequest load_request;
  load_request.set_modelid(name);
  load_request.set_modeltype("onnx");
  load_request.set_modelpath(name);
  mmesh::LoadModelResponse loaded;
  const auto start = std::chrono::steady_clock::now();
  st = call([&](grpc::ClientContext* c) { return mesh->loadModel(c, load_request, &loaded); });
  if (!st.ok()) return Internal("loadModel of '" + name + "': " + st.error_message());
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const int64_t rss1 = port::ResidentBytesOf(pid);
  const int64_t hwm1 = port::PeakResidentBytesOf(pid);
  inference::ModelMetadataRequest metadata_request;
  metadata_request.set_name(name);
  inference::ModelMetadataResponse metadata;
  st = call([&](grpc::ClientContext* c) { return v2->ModelMetadata(c, metadata_request, &metadata); });
  if (!st.ok()) return Internal("ModelMetadata of '" + name + "': " + st.error_message());
  inference::ModelInferResponse inferred;
  const inference::ModelInferRequest infer_request = ZerosFor(name, metadata);
  st = call([&](grpc::ClientContext* c) { return v2->ModelInfer(c, infer_request, &inferred); });
  const bool inferred_ok = st.ok();
  const std::string infer_error = st.error_message();
  const int64_t hwm2 = port::PeakResidentBytesOf(pid);
  mmesh::ModelSizeRequest size_request;
  size_request.set_modelid(name);
  mmesh::ModelSizeResponse size;
  st = call([&](grpc::ClientContext* c) { return mesh->modelSize(c, size_request, &size); });
  if (!st.ok()) return Internal("modelSize of '" + name + "': " + st.error_message());
  mmesh::UnloadModelRequest unload_request;
  unload_request.set_modelid(name);
  mmesh::UnloadModelResponse unloaded;
  st = call([&](grpc::ClientContext* c) { return mesh->unloadModel(c, unload_request, &unloaded); });
  if (!st.ok()) return Internal("unloadModel of '" + name + "': " + st.error_message());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const int64_t rss2 = port::ResidentBytesOf(pid);
  child->reset();
  std::error_code ec;
  fs::remove_all(cache, ec);

  const int64_t actual = rss1 - rss0;
  const auto reported = static_cast<int64_t>(size.sizeinbytes());
  const auto load_size = static_cast<int64_t>(loaded.sizeinbytes());
  const auto predicted_bytes = static_cast<int64_t>(predicted.sizeinbytes());
  auto ratio = [](int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0; };
  auto within = [&](int64_t bytes) { return actual > 0 && std::abs(bytes - actual) <= actual / 5; };
  Measured m;
  m.conservative = predicted_bytes >= actual;
  m.within = within(load_size) && within(reported);
  m.row = {{"model", name},
           {"file_bytes", static_cast<int64_t>(fs::file_size(root + "/" + name + "/model.onnx", ec))},
           {"predicted_bytes", predicted_bytes},
           {"load_size_bytes", load_size},
           {"model_size_bytes", reported},
           {"rss_before_bytes", rss0},
           {"load_rss_growth_bytes", rss1 - rss0},
           {"load_peak_rss_growth_bytes", peak_reset ? json(hwm1 - rss0) : json(nullptr)},
           {"inference_peak_rss_growth_bytes", inferred_ok ? json(hwm2 - rss0) : json(nullptr)},
           {"actual_bytes", actual},
           {"rss_after_unload_growth_bytes", rss2 - rss0},
           {"load_ms", load_ms},
           {"predicted_over_actual", ratio(predicted_bytes, actual)},
           {"load_size_over_actual", ratio(load_size, actual)},
           {"reported_over_actual", ratio(reported, actual)},
           {"predicted_ge_actual", m.conservative},
           {"reported_within_20pct", m.within}};
  if (!inferred_ok) m.row["inference_error"] = infer_error;
  return m;
}

std::vector<std::string> Split(const std::string& list) {
  std::vector<std::string> items;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

}  // namespace

int BenchModelMesh(const ModelMeshBenchOptions& options) {
  const std::string generated = GeneratedModelsDir(options.generated_dir);
  std::vector<std::pair<std::string, std::string>> models;  // name, root
  std::error_code ec;
  std::vector<std::string> bundled;
  for (const auto& entry : fs::directory_iterator(options.common.models_dir, ec)) {
    if (fs::exists(entry.path() / "model.onnx", ec)) bundled.push_back(entry.path().filename().string());
  }
  std::sort(bundled.begin(), bundled.end());
  for (const std::string& name : bundled) models.emplace_back(name, fs::canonical(options.common.models_dir).string());
  for (const std::string& mb : Split(options.sizes)) {
    const std::string name = "conv_" + mb + "mb";
    if (!fs::exists(generated + "/" + name + "/model.onnx", ec)) {
      return Fail(NotFound("no generated model '" + generated + "/" + name +
                           "/model.onnx' (built by the `generated_models` target; or --generated DIR)"));
    }
    models.emplace_back(name, fs::canonical(generated).string());
  }
  char pattern[] = "/tmp/ebb_bench_modelmesh_XXXXXX";
  if (!mkdtemp(pattern)) return Fail(Internal("mkdtemp failed"));
  const std::string repository = pattern;
  json rows = json::array(), misses = json::array();
  bool conservative = true, within = true;
  for (const auto& [name, root] : models) {
    Result<Measured> m = MeasureOne(name, root, repository, options.common);
    if (!m.ok()) {
      fs::remove_all(repository, ec);
      return Fail(m.status());
    }
    conservative &= m->conservative;
    within &= m->within;
    if (!m->conservative || !m->within) misses.push_back(name);
    rows.push_back(m->row);
  }
  fs::remove_all(repository, ec);
  Goals goals;
  const std::string none = "no model was measured";
  goals.Holds("predicted_ge_actual", rows.empty() ? std::nullopt : std::optional<bool>(conservative),
              rows.empty() ? none : "");
  goals.Holds("reported_within_20pct", rows.empty() ? std::nullopt : std::optional<bool>(within),
              rows.empty() ? none : "");
  return goals.Finish({{"benchmark", "modelmesh"},
                       {"predict", {{"factor", server::kPredictFactor}, {"base_bytes", server::kPredictBaseBytes}}},
                       {"models", rows},
                       {"missed_by", misses}});
}

}  // namespace ebb::cli
