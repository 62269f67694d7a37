// `ebb serve`: the KServe v2 inference server on a model repository folder.
// A thin layer: flags -> Runtime, InferenceService (the server core, which
// opens the repository), RestApi + HttpServer; SIGINT/SIGTERM stop it
// gracefully. At start-up it prints a request to paste, made for a model the
// repository really has.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <optional>
#include <thread>

#include "commands.h"

namespace ebb::cli {
namespace {

// The start-up hint's request: the loaded model whose inputs take the fewest
// values, with its real input names and datatypes, and shapes whose dynamic
// dims are made concrete: 1 for the first (the batch), 32 for the others
// (small, and a multiple of the strides image models downsample by). Values
// cycle 1, 2, 3, 4 (BOOL: true, false). No model needs more than this many.
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
    auto handle = repository.Acquire(m.name);  // as a metadata request would: it is loaded, so nothing loads
    if (!handle.ok()) continue;
    nlohmann::ordered_json inputs = nlohmann::ordered_json::array();
    int64_t values = 0;
    for (const TensorInfo& in : handle->session()->inputs()) {
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

// `text` as one single-quoted shell word.
std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

void PrintHint(server::ModelRepository& repository, const std::string& url) {
  std::optional<InferHint> hint = MakeInferHint(repository);
  std::printf("try:\n");
  if (hint) {
    std::printf("  curl -s %s/v2/models/%s/infer -H 'Content-Type: application/json' -d %s\n", url.c_str(),
                hint->model.c_str(), ShellQuote(hint->body).c_str());
  } else {
    std::printf("  curl -s -d '' %s/v2/repository/index   # no model is loaded: this lists them and why\n",
                url.c_str());
  }
  std::printf("  curl -s %s/metrics | grep ebb_arena\n", url.c_str());
}

}  // namespace

int Serve(const ServeOptions& o) {
  // Signals are taken by sigwait() below, never by a handler on a random thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto runtime = MakeRuntime(o.common);
  if (!runtime) return 1;
  server::ModelRepository::Options repo_options;
  repo_options.root = o.repository;
  repo_options.load_on_demand = o.load_on_demand;
  repo_options.default_device = o.common.device;
  repo_options.pool = o.pool;
  auto service = server::InferenceService::Create(*runtime, repo_options, o.service);
  if (!service.ok()) return Fail(service.status());
  server::ModelRepository& repository = (*service)->repository();
  if (o.load_all) {
    for (const auto& [name, status] : repository.LoadAll()) {
      std::fprintf(stderr, "ebb: model '%s' did not load: %s\n", name.c_str(), status.ToString().c_str());
    }
  }
  server::RestApi api(**service);
  server::HttpServer http(api, o.http);
  if (Status st = http.Bind(); !st.ok()) return Fail(st);

  const std::string url = "http://" + o.http.host + ":" + std::to_string(http.port());
  std::printf("ebb serve: %s (repository %s)\n", url.c_str(), repository.root().c_str());
  for (const server::ModelInfo& m : repository.Index()) {
    std::printf("  %-20s %s\n", m.name.c_str(), PoolStateName(m.state));
  }
  PrintHint(repository, url);
  std::fflush(stdout);

  std::thread serving([&http] { http.Serve(); });
  int signal = 0;
  sigwait(&signals, &signal);
  std::printf("ebb serve: %s received, finishing requests in flight\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
  std::fflush(stdout);
  (*service)->BeginShutdown();
  http.Stop();
  serving.join();
  return 0;
}

}  // namespace ebb::cli
