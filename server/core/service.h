// server/core/service.h — the server core: every KServe v2 operation, typed.
//
// InferenceService answers the Open Inference Protocol's operations (health,
// metadata, inference, the model-repository extension) with typed values and
// ebb Statuses; it knows no wire format. Front ends (server/http/, and any
// other) decode requests into server/core/inference.h types, call one method
// here, and encode the answer, mapping a Status to their own status codes in
// exactly one place each (HTTP: server/http/rest_api.cc).
//
// What is decided once, here, for every front end:
//   * admission: at most `workers` inferences run, `queue` more wait, beyond
//     that kUnavailable ("server busy") at once;
//   * the model: resolved through the ModelRepository and its ModelPool
//     (memory budget, on-demand loads, keep-alive, out-of-memory recovery);
//   * how a model runs: a `tensor` model is one Session::Run; an
//     `image_to_image` model runs the whole batch — every frame, every tile —
//     as ONE operation and releases memory once, at its end;
//   * metrics: requests, failures by code, latency, releases, pool events
//     (loads, on-demand loads, switch time, evictions), and scrape-time gauges.
//
// Lifecycle: Create() opens the repository; BeginShutdown() makes Ready()
// false while requests in flight finish.
// Thread safety: every method may be called concurrently.
// Ownership: the service owns its repository and metrics. REQUIRES: the
// Runtime outlives the service.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "admission.h"
#include "ebb/runtime.h"
#include "inference.h"
#include "metrics.h"
#include "repository.h"

namespace ebb::server {

struct ServiceOptions {
  size_t workers = 4;                             // inferences running at once
  size_t queue = 64;                              // inferences waiting; beyond: kUnavailable
  int64_t max_input_elements = int64_t{1} << 30;  // per input tensor; decoders enforce it
};

class InferenceService {
 public:
  // Opens the model repository (its pool reports loads and evictions to the
  // service's metrics, then to `repository.on_event` if set).
  // Errors: kNotFound when the repository root is not a folder.
  static Result<std::unique_ptr<InferenceService>> Create(Runtime& runtime, ModelRepository::Options repository,
                                                          ServiceOptions options);
  ~InferenceService();
  InferenceService(const InferenceService&) = delete;
  InferenceService& operator=(const InferenceService&) = delete;

  const ServiceOptions& options() const { return options_; }

  // --- Health and metadata ------------------------------------------------
  bool Live() const { return true; }
  // False once BeginShutdown() was called.
  bool Ready() const { return !shutting_down_; }
  ServerMetadata Metadata() const;
  // A model's signature. Errors: kInvalidArgument (bad name), kNotFound, and
  // load errors when it had to be loaded to be described.
  Result<ModelMetadata> DescribeModel(const std::string& model);
  // Whether a model is loaded and ready. Errors: kInvalidArgument, kNotFound.
  Result<bool> ModelReady(const std::string& model);

  // --- Model repository extension -----------------------------------------
  std::vector<ModelInfo> Index();
  Status Load(const std::string& model);
  Status Unload(const std::string& model);

  // --- Inference ------------------------------------------------------------
  // Decodes the request on the calling thread; called only once the model is
  // known to exist, so that failures can be counted against it.
  using Decoder = std::function<Result<InferRequest>()>;
  // Checks the model, counts the request, decodes it, waits for admission and
  // runs it (with the pool's out-of-memory recovery).
  // Errors: the decoder's, kInvalidArgument, kNotFound, kUnavailable (busy,
  // not loaded, failed load), kResourceExhausted, kInternal.
  Result<InferResponse> Infer(const std::string& model, const Decoder& decode);

  // --- Operations -------------------------------------------------------------
  // The Prometheus text exposition of every metric.
  std::string RenderMetrics() const { return metrics_.Render(); }
  // From now on Ready() is false; requests in flight finish.
  void BeginShutdown() { shutting_down_ = true; }

  ModelRepository& repository() { return *repository_; }
  MetricsRegistry& metrics() { return metrics_; }

 private:
  InferenceService(Runtime& runtime, ServiceOptions options);
  Result<std::vector<NamedTensor>> Execute(const std::string& name, const ModelConfig& config,
                                           const std::shared_ptr<Session>& session, const InferRequest& request);
  Result<std::vector<NamedTensor>> ExecuteImageOperation(const std::string& name, const ModelConfig& config,
                                                         const std::shared_ptr<Session>& session,
                                                         const InferRequest& request);
  void CountPoolEvent(const PoolEvent& event);
  std::vector<std::string> Devices();
  // Counts the runs of `model` that gave memory back (ebb_releases_total).
  RunObserver ReleaseCounter(const std::string& model);
  void RegisterCollectors();

  Runtime& runtime_;
  const ServiceOptions options_;
  Admission admission_;
  MetricsRegistry metrics_;                       // before repository_: its pool reports into it
  std::unique_ptr<ModelRepository> repository_;
  std::atomic<bool> shutting_down_{false};
};

}  // namespace ebb::server
