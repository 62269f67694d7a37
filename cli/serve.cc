// `ebb serve`: the KServe v2 inference server on a model repository folder.
// A thin layer: flags -> Runtime, InferenceService (the server core, which
// opens the repository), RestApi + HttpServer and the gRPC service +
// GrpcServer over the same core; SIGINT, SIGTERM and SIGHUP stop both gracefully. At
// start-up it prints a request to paste, made for a model the repository
// really has.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "commands.h"
#include "port.h"
#ifndef EBB_NO_GRPC  // a build without gRPC (the Windows one) serves HTTP only: docs/windows.md
#include "grpc/grpc_server.h"
#include "grpc/inference_api.h"
#include "grpc/modelmesh_api.h"
#endif

namespace ebb::cli {
namespace {

// The start-up hint's request: the loaded model whose inputs take the fewest
// values, with its real input names and datatypes, and shapes whose dynamic
// dims are made concrete: 1 for the first (the batch), 32 for the others
// (small, and a multiple of the strides image models downsample by). Values
// cycle 1, 2, 3, 4 (BOOL: true, false; BYTES: "1", "2", ...). No model needs
// more than this many.
constexpr int64_t kHintMaxValues = 4096;

struct InferHint {
  std::string model;
  std::string body;  // the request's JSON
};

std::optional<InferHint> MakeInferHint(server::ModelRepository& repository) {
  std::optional<InferHint> best;
  int64_t best_values = kHintMaxValues + 1;
  for (const server::ModelInfo& m : repository.Index()) {
    if (m.state != PoolState::kReady) continue;
    auto signature = repository.Signature(m.name, m.version);  // as a metadata request: loads nothing
    if (!signature.ok()) continue;
    nlohmann::ordered_json inputs = nlohmann::ordered_json::array();
    int64_t values = 0;
    for (const TensorInfo& in : signature->inputs) {
      Shape shape = in.shape;
      for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] < 0) shape[d] = d == 0 ? 1 : 32;
      }
      const int64_t count = ElementCount(shape);
      values += count;
      if (values > kHintMaxValues) break;
      nlohmann::ordered_json data = nlohmann::ordered_json::array();
      for (int64_t i = 0; i < count; ++i) {
        if (in.type == DataType::kBool) {
          data.push_back(i % 2 == 0);
        } else if (in.type == DataType::kBytes) {
          data.push_back(std::to_string(i % 4 + 1));
        } else {
          data.push_back(i % 4 + 1);
        }
      }
      inputs.push_back({{"name", in.name}, {"shape", shape}, {"datatype", DataTypeName(in.type)}, {"data", data}});
    }
    if (values < best_values) {
      best_values = values;
      best = InferHint{m.name, nlohmann::ordered_json{{"inputs", inputs}}.dump()};
    }
  }
  return best;
}

void PrintHint(server::ModelRepository& repository, const std::string& url) {
  std::optional<InferHint> hint = MakeInferHint(repository);
  std::printf("try:\n");
  if (hint) {
    // Pastable into this system's shell: sh's quotes on POSIX, cmd.exe's on Windows.
    std::printf("  curl -s %s/v2/models/%s/infer -H %s -d %s\n", url.c_str(), hint->model.c_str(),
                port::ShellQuoted("Content-Type: application/json").c_str(), port::ShellQuoted(hint->body).c_str());
  } else {
    std::printf("  curl -s -d %s %s/v2/repository/index\n", port::ShellQuoted("").c_str(), url.c_str());
    std::printf("  (no model is loaded: that lists them and why)\n");
  }
  std::printf("  curl -s %s/metrics | %s ebb_arena\n", url.c_str(), port::kLineFilter);
}

// A port that cannot be bound is one line naming the port and the flag that moves it
// (`make run` passes PORT= and GRPC_PORT= to those flags).
Status NamingTheFlag(const Status& st, const std::string& transport, const std::string& flag) {
  if (st.code() != StatusCode::kUnavailable) return st;
  return Unavailable(transport + st.message() + " (choose another port with " + flag + ")");
}

}  // namespace

int Serve(const ServeOptions& o) {
  // Stop requests are taken by port::WaitForStopSignal() below, never by a handler on a random thread:
  // SIGINT, SIGTERM and SIGHUP (a closed terminal or a supervisor's reload signal drains like SIGTERM,
  // instead of killing the server with its requests in flight; ebb serve has nothing to reload).
  port::BlockStopSignals();

#ifdef EBB_NO_GRPC
  if (o.grpc_port != 0 || o.modelmesh) {
    return Fail(InvalidArgument(
        "this build of ebb has no gRPC (it serves HTTP only): leave out --grpc-port and --modelmesh"));
  }
  std::printf("ebb serve: HTTP only: this build has no gRPC (gRPC is not built for Windows; docs/windows.md)\n");
#endif
  if (o.modelmesh && o.grpc_port == 0) {
    return Fail(InvalidArgument("--modelmesh serves ModelMesh's SPI on the gRPC port: it needs --grpc-port (not 0)"));
  }
  const bool single_model = !o.model_name.empty();
  std::optional<ModelFile> single_file;
  if (single_model) {
    auto file = ResolveModelFile(o.model_dir, o.model_dir);
    if (!file.ok()) return Fail(file.status());
    single_file = *file;
  }
  Result<MemoryPolicy> policy = ServerPolicy(o.common, o.release);  // common.h
  if (!policy.ok()) return Fail(policy.status());
  auto runtime = MakeRuntime(*policy);
  if (!runtime) return 1;
  server::ModelRepository::Options repo_options;
  repo_options.root = single_model ? o.model_dir : o.repository;
  repo_options.scan = !single_model;  // the single model only, not the folders beside it
  repo_options.confine_links = o.confine_links;
  repo_options.load_on_demand = o.load_on_demand;
  repo_options.default_device = o.common.device;
  repo_options.pool = o.pool;
  server::ServiceOptions service_options = o.service;
  // One request at the message limit always fits the budget of requests in flight.
  service_options.max_request_bytes_in_flight = std::max(o.service.max_request_bytes_in_flight, o.http.max_body_bytes);
  auto service = server::InferenceService::Create(*runtime, repo_options, service_options);
  if (!service.ok()) return Fail(service.status());
  server::ModelRepository& repository = (*service)->repository();
  if (single_model) {
    if (Status st = repository.Attach(o.model_name, *single_file, /*pinned=*/true); !st.ok()) return Fail(st);
    (*service)->RequireLoaded({o.model_name});  // ready once it is loaded (below, after the ports are open)
  }
#ifndef EBB_NO_GRPC
  std::unique_ptr<server::ModelMeshRuntime> modelmesh;
  if (o.modelmesh) {
    const std::string root = o.model_root.empty() ? repository.root() : o.model_root;
    std::error_code ec;
    if (!std::filesystem::is_directory(root, ec)) return Fail(NotFound("--model-root '" + root + "' is not a folder"));
    modelmesh = std::make_unique<server::ModelMeshRuntime>(**service, server::ModelMeshOptions{.model_root = root});
  }
#endif
  for (const server::FolderProblem& p : repository.Problems()) {
    std::fprintf(stderr, "ebb: warning: folder '%s' of the repository is not served: %s\n", p.folder.c_str(),
                 p.reason.c_str());
  }
  if (o.load_all && !single_model) {
    for (const auto& [name, status] : repository.LoadAll()) {
      std::fprintf(stderr, "ebb: model '%s' did not load: %s\n", name.c_str(), status.ToString().c_str());
    }
  }
  server::RestApi api(**service);
  server::HttpServer http(api, o.http, (*service)->request_bytes());
  if (Status st = http.Bind(); !st.ok()) return Fail(NamingTheFlag(st, "HTTP ", "--port"));
#ifndef EBB_NO_GRPC
  std::unique_ptr<server::AsyncService> inference = server::MakeGrpcInferenceService(
      **service, {.model_id_header = o.modelmesh, .threads = o.grpc_threads, .write_timeout_s = o.http.write_timeout_s});
  std::unique_ptr<server::AsyncService> model_runtime;
  server::GrpcServer grpc_server({o.http.host, std::max(o.grpc_port, 0), o.http.max_body_bytes,
                                  o.grpc_compressed_requests, std::chrono::seconds(o.http.write_timeout_s)});
  if (o.grpc_port != 0) {
    grpc_server.AddService(inference.get(), server::kGrpcInferenceServiceName);
    if (modelmesh) {
      model_runtime = server::MakeGrpcModelRuntimeService(*modelmesh);
      grpc_server.AddService(model_runtime.get(), server::kModelRuntimeServiceName);
    }
    if (Status st = grpc_server.Start(); !st.ok()) return Fail(NamingTheFlag(st, "", "--grpc-port"));
  }
#endif

  const std::string url = "http://" + o.http.host + ":" + std::to_string(http.port());
  std::printf("ebb serve: %s (repository %s)\n", url.c_str(), repository.root().c_str());
#ifndef EBB_NO_GRPC
  if (o.grpc_port != 0) std::printf("ebb serve: grpc %s:%d\n", o.http.host.c_str(), grpc_server.port());
  if (modelmesh) {
    std::printf("ebb serve: ModelMesh model runtime (mmesh.ModelRuntime) on the gRPC port, model root %s\n",
                modelmesh->options().model_root.c_str());
  }
#endif
  if (single_model) std::printf("ebb serve: model '%s' from %s\n", o.model_name.c_str(), o.model_dir.c_str());
  for (const server::ModelInfo& m : repository.Index()) {
    std::printf("  %-20s %-3s %s\n", m.name.c_str(), m.version.c_str(), PoolStateName(m.state));
  }
  if (!single_model) PrintHint(repository, url);  // the single model loads below
  std::fflush(stdout);

  std::thread serving([&http] { http.Serve(); });
  int exit_code = 0;
  if (single_model) {
    // Loaded while the ports answer (live, not ready), so that a slow load does not fail a liveness probe.
    if (Status st = (*service)->Load(o.model_name); !st.ok()) {
      std::fprintf(stderr, "ebb: model '%s' did not load: %s\n", o.model_name.c_str(), st.ToString().c_str());
      exit_code = 1;
    } else {
      std::printf("ebb serve: model '%s' loaded, ready\n", o.model_name.c_str());
      std::fflush(stdout);
    }
  }
  if (exit_code == 0) {
    const std::string name = port::WaitForStopSignal();
    std::printf("ebb serve: %s received, finishing requests in flight\n", name.c_str());
    std::fflush(stdout);
  }
  (*service)->BeginShutdown();    // not ready; new inferences refused
#ifndef EBB_NO_GRPC
  grpc_server.SetServing(false);  // grpc.health.v1: NOT_SERVING
#endif
  http.Stop();                    // stops listening; HTTP requests in flight finish
  (*service)->WaitIdle();         // every inference and load in flight, over either front end
#ifndef EBB_NO_GRPC
  grpc_server.Shutdown();         // stops listening, ends what is left (health watches)
#endif
  serving.join();
  return exit_code;
}

}  // namespace ebb::cli
