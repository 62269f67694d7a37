// server/service.h — the KServe v2 endpoints, independent of HTTP.
//
// InferenceService answers each endpoint of the Open Inference Protocol (and
// its model-repository extension, and /metrics) with an HttpReply; the HTTP
// layer (http_server.h) only routes requests here. Every ebb Status becomes an
// HTTP status in exactly one place (ReplyFor in service.cc):
//   kInvalidArgument -> 400, kNotFound -> 404, kUnavailable and
//   kResourceExhausted -> 503, kCancelled -> 503, anything else -> 500,
// with a body {"error": "<message>"}.
//
// An inference request to an image_to_image model (config.json) runs the
// whole operation server-side — every frame of the batch, every tile — and
// releases memory once, at its end.
//
// Thread safety: every method may be called concurrently.
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "admission.h"
#include "ebb/runtime.h"
#include "metrics.h"
#include "protocol.h"
#include "repository.h"

namespace ebb::server {

struct HttpReply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
};

struct ServiceOptions {
  size_t workers = 4;                 // inferences running at once
  size_t queue = 64;                  // inferences waiting; beyond: 503
  int64_t max_input_elements = int64_t{1} << 30;  // per input tensor
};

class InferenceService {
 public:
  // REQUIRES: runtime, repository and metrics outlive the service.
  InferenceService(Runtime& runtime, ModelRepository& repository, MetricsRegistry& metrics, ServiceOptions options);

  HttpReply Live() const;
  HttpReply Ready() const;
  HttpReply ServerMetadata() const;
  HttpReply ModelMetadata(const std::string& model);
  HttpReply ModelReady(const std::string& model) const;
  // `header_length`: the Inference-Header-Content-Length header, if sent.
  HttpReply Infer(const std::string& model, std::string_view body, const std::optional<std::string>& header_length);
  HttpReply RepositoryIndex() const;
  HttpReply LoadModel(const std::string& model);
  HttpReply UnloadModel(const std::string& model);
  HttpReply Metrics() const;

  // From now on /v2/health/ready answers 503; requests in flight finish.
  void BeginShutdown() { shutting_down_ = true; }

  MetricsRegistry& metrics() { return metrics_; }

 private:
  Result<std::vector<NamedTensor>> Execute(const std::string& name, const ModelConfig& config,
                                           const std::shared_ptr<Session>& session, const InferRequest& request);
  Result<std::vector<NamedTensor>> ExecuteImageOperation(const std::string& name, const ModelConfig& config,
                                                         const std::shared_ptr<Session>& session,
                                                         const InferRequest& request);
  std::vector<std::string> Devices() const;
  // Counts the runs of `model` that gave memory back (ebb_releases_total).
  RunObserver ReleaseCounter(const std::string& model);
  void RegisterCollectors();

  Runtime& runtime_;
  ModelRepository& repository_;
  const ServiceOptions options_;
  Admission admission_;
  MetricsRegistry& metrics_;
  std::atomic<bool> shutting_down_{false};
};

// The one mapping from an ebb Status to an HTTP reply.
HttpReply ReplyFor(const Status& status);

}  // namespace ebb::server
