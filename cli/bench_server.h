// The in-process server both transport benchmarks (`bench http`, `bench grpc`)
// measure: the core with one small model loaded, the REST front end on a free
// loopback port, and the benchmark's input (one FP32 tensor of 0.5, dynamic
// dimensions 1) as tensors and as a KServe JSON body.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench.h"
#include "core/service.h"
#include "http/http_server.h"

namespace ebb::cli {

class BenchServer {
 public:
  // nullptr (the error printed) on failure. `--model` defaults to `tiny`; a
  // model file outside a model folder is served from a temporary repository.
  static std::unique_ptr<BenchServer> Start(const BenchOptions& options);
  ~BenchServer();  // stops the HTTP server

  server::InferenceService& service() { return *service_; }
  int http_port() const { return http_->port(); }
  const std::shared_ptr<Session>& session() const { return handle_->session(); }

  std::string model;        // its name in the server's repository
  std::string model_label;  // the name to report
  std::string input_name;
  Shape shape;
  std::vector<float> values;
  std::vector<NamedTensor> inputs;  // for in-process runs
  std::string json_body;            // the KServe JSON request
  // The same request as Triton's HTTP client sends it by default: the input's bytes after a JSON
  // header (Inference-Header-Content-Length), the outputs asked for as binary data.
  std::string binary_body;
  size_t binary_header_length = 0;
  std::string infer_path;           // /v2/models/<model>/infer

 private:
  std::unique_ptr<Runtime> runtime_;
  std::unique_ptr<server::InferenceService> service_;
  std::unique_ptr<server::RestApi> api_;
  std::unique_ptr<server::HttpServer> http_;
  std::thread serving_;
  std::optional<server::ModelHandle> handle_;  // holds the model for in-process runs
  std::filesystem::path temp_dir_;             // removed at the end when set
};

// A kind of request the transport benchmarks time: where its times (microseconds) go, and the
// request itself (true: it succeeded).
using TimedKind = std::pair<std::vector<double>*, std::function<bool()>>;

// Sends every kind warmup + rounds times, in an order shuffled each round (a fixed seed), so that
// no kind always follows the same one; the warm-up rounds' times are not kept. Returns the
// requests that failed, warm-up included.
int TimeShuffled(const std::vector<TimedKind>& kinds, int rounds, int warmup = 50);

}  // namespace ebb::cli
