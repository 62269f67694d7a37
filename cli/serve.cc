// `ebb serve`: the KServe v2 inference server on a model repository folder.
// A thin layer: flags -> Runtime, InferenceService (the server core, which
// opens the repository), RestApi + HttpServer and the gRPC service +
// GrpcServer over the same core; SIGINT/SIGTERM stop both gracefully.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <thread>

#include "commands.h"
#include "grpc/grpc_server.h"
#include "grpc/inference_api.h"

namespace ebb::cli {

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
  for (const server::FolderProblem& p : repository.Problems()) {
    std::fprintf(stderr, "ebb: warning: folder '%s' of the repository is not served: %s\n", p.folder.c_str(),
                 p.reason.c_str());
  }
  if (o.load_all) {
    for (const auto& [name, status] : repository.LoadAll()) {
      std::fprintf(stderr, "ebb: model '%s' did not load: %s\n", name.c_str(), status.ToString().c_str());
    }
  }
  server::RestApi api(**service);
  server::HttpServer http(api, o.http);
  if (Status st = http.Bind(); !st.ok()) return Fail(st);
  std::unique_ptr<grpc::Service> inference = server::MakeGrpcInferenceService(**service);
  server::GrpcServer grpc_server({o.http.host, std::max(o.grpc_port, 0), o.http.max_body_bytes});
  if (o.grpc_port != 0) {
    grpc_server.AddService(inference.get(), server::kGrpcInferenceServiceName);
    if (Status st = grpc_server.Start(); !st.ok()) return Fail(st);
  }

  const std::string url = "http://" + o.http.host + ":" + std::to_string(http.port());
  std::printf("ebb serve: %s (repository %s)\n", url.c_str(), repository.root().c_str());
  if (o.grpc_port != 0) std::printf("ebb serve: grpc %s:%d\n", o.http.host.c_str(), grpc_server.port());
  for (const server::ModelInfo& m : repository.Index()) {
    std::printf("  %-20s %-3s %s\n", m.name.c_str(), m.version.c_str(), PoolStateName(m.state));
  }
  std::printf("try:\n  curl -s %s/v2/models/mixed/infer -H 'Content-Type: application/json' -d "
              "'{\"inputs\":[{\"name\":\"a\",\"shape\":[1,4],\"datatype\":\"FP32\",\"data\":[1,2,3,4]},"
              "{\"name\":\"b\",\"shape\":[1,4],\"datatype\":\"INT64\",\"data\":[10,20,30,40]},"
              "{\"name\":\"c\",\"shape\":[1,4],\"datatype\":\"UINT8\",\"data\":[0,0,0,1]},"
              "{\"name\":\"flag\",\"shape\":[1,4],\"datatype\":\"BOOL\",\"data\":[true,false,true,false]}]}'\n"
              "  curl -s %s/metrics | grep ebb_arena\n",
              url.c_str(), url.c_str());
  std::fflush(stdout);

  std::thread serving([&http] { http.Serve(); });
  int signal = 0;
  sigwait(&signals, &signal);
  std::printf("ebb serve: %s received, finishing requests in flight\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
  std::fflush(stdout);
  (*service)->BeginShutdown();    // not ready; new inferences refused
  grpc_server.SetServing(false);  // grpc.health.v1: NOT_SERVING
  http.Stop();                    // stops listening; HTTP requests in flight finish
  (*service)->WaitIdle();         // every inference and load in flight, over either front end
  grpc_server.Shutdown();         // stops listening, ends what is left (health watches)
  serving.join();
  return 0;
}

}  // namespace ebb::cli
