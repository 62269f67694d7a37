// server/core/service.h — the server core: every KServe v2 operation, typed.
//
// InferenceService answers the Open Inference Protocol's operations (health,
// metadata, inference) and the extensions ebb implements (model repository,
// model configuration, statistics, classification) with typed values and ebb
// Statuses; it knows no wire format. Front ends (server/http/, server/grpc/)
// decode requests into server/core/inference.h types, call one method here,
// and encode the answer, mapping a Status to their own status codes in
// exactly one place each (HTTP: ReplyFor in server/http/rest_api.cc; gRPC:
// GrpcStatusFor in server/grpc/inference_api.cc).
//
// What is decided once, here, for every front end:
//   * request bytes in flight: every front end charges what it holds of a
//     request before decoding it to one budget, request_bytes()
//     (byte_budget.h; --max-body-bytes-in-flight), so that it bounds HTTP and
//     gRPC together;
//   * admission: at most `workers` inferences run (the CPU bound), `queue`
//     more wait in arrival order, beyond that kUnavailable ("server busy") at
//     once. A request is decoded only once it has a worker: one waiting holds
//     its bytes, not its tensors. Then each run is admitted by the memory it
//     is predicted to need, in the pool (ebb/model_pool.h), so every front end
//     gets it: a request waits for a worker and for memory together up to
//     `queue_timeout` (kUnavailable after it), leaves both lines when its
//     caller goes away (Infer's `cancelled`: kCancelled), and a run that could
//     never fit fails at once (kResourceExhausted);
//   * the model and version: resolved through the ModelRepository and its
//     ModelPool (memory budget, on-demand loads, keep-alive, out-of-memory
//     recovery); looking at a model (metadata, config, ready, statistics,
//     index) never loads it or evicts another;
//   * how a model runs: a `tensor` model is one Session::Run; an
//     `image_to_image` model runs the whole batch — every frame, every tile —
//     as ONE operation and releases memory once, at its end; an `ocr` model
//     (ocr_model.h) runs every image of the request through its pipeline as
//     ONE operation too;
//   * operations that span requests (sequences.h): the requests of an open
//     sequence (Triton's sequence_id, sequence_start, sequence_end) do not
//     release, the one with sequence_end does, a sequence idle past its
//     timeout is ended and released; under the idle release mode
//     (MemoryPolicy::release = idle) the Runtime's idle release counts here
//     too, in the model's releases;
//   * classification of outputs (classification.h);
//   * statistics and metrics, counted together in one place (RecordOutcome),
//     so that statistics and /metrics agree: requests, failures by code,
//     latency, releases, pool events, scrape-time gauges (the metric
//     families themselves are named in service_metrics.h).
//
// Lifecycle: Create() opens the repository; BeginShutdown() makes Ready()
// false and refuses new inferences (kUnavailable); WaitIdle() returns once the
// calls in flight have ended.
// Thread safety: every method may be called concurrently.
// Ownership: the service owns its repository and metrics. REQUIRES: the
// Runtime outlives the service.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "admission.h"
#include "byte_budget.h"
#include "ebb/runtime.h"
#include "inference.h"
#include "ocr_model.h"
#include "repository.h"
#include "sequences.h"
#include "service_metrics.h"

namespace ebb::server {

struct ServiceOptions {
  size_t workers = 4;                             // inferences running at once (a CPU bound)
  size_t queue = 64;                              // inferences waiting; beyond: kUnavailable
  int64_t max_input_elements = int64_t{1} << 30;  // per input tensor; decoders enforce it
  // Request bytes held at once by every front end together (request_bytes()):
  // four requests at the default 256 MiB message limit (--max-body-bytes).
  size_t max_request_bytes_in_flight = size_t{1} << 30;
  // The longest a request waits for a worker and for memory, together; then
  // kUnavailable. A minute: longer than any run measured here, shorter than
  // the usual client timeouts.
  std::chrono::milliseconds queue_timeout{60000};
  // Operations that span requests (sequences.h): --max-sequences, --sequence-timeout-ms.
  SequenceOptions sequences;
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
  // In every method, `version` "" means the model's default (highest served)
  // version; a version that is not served is kNotFound naming those that are.
  bool Live() const { return true; }
  // False once BeginShutdown() was called, and while a model named by
  // RequireLoaded is not loaded.
  bool Ready() const;
  // Ready() only while these models are loaded (KServe's single-model form:
  // the pod is ready once its model is). REQUIRES: before serving starts.
  void RequireLoaded(std::vector<std::string> models) { required_ = std::move(models); }
  ServerMetadata Metadata() const;
  // A model's signature, without loading it. Errors: kInvalidArgument (bad
  // name, unreadable folder or model file), kNotFound.
  Result<ModelMetadata> DescribeModel(const std::string& model, const std::string& version = "");
  // Whether a model version is loaded and ready. Errors: kInvalidArgument, kNotFound.
  Result<bool> ModelReady(const std::string& model, const std::string& version = "");
  // The model configuration extension. Errors: as DescribeModel.
  Result<ModelConfiguration> Configuration(const std::string& model, const std::string& version = "");
  // The statistics extension: every served version of every model (model
  // ""), of one model (version ""), or one version. Errors: as ModelReady.
  Result<std::vector<ModelStatistics>> Statistics(const std::string& model = "", const std::string& version = "");

  // --- Model repository extension -----------------------------------------
  // Every served version; only the ready ones when `ready_only`.
  std::vector<ModelInfo> Index(bool ready_only = false);
  // Load parameters: "config" (a string: Triton's JSON model configuration,
  // model_configuration.h), used instead of config.json until the next load
  // without one. Unload parameters: "unload_dependents" (a bool; nothing
  // depends on an ebb model). Any other parameter is kInvalidArgument.
  Status Load(const std::string& model, const Parameters& parameters = {});
  Status Unload(const std::string& model, const Parameters& parameters = {});
  // Detaches an attached model (ModelRepository::Detach) and drops its
  // statistics and metric series. Errors: as Detach.
  Status Forget(const std::string& model);

  // --- Inference ------------------------------------------------------------
  // A request makes two callback hops on its way through Infer: the front
  // end's Decoder (after admission), then the service's RunBody (inside the
  // pool, retried once after an out-of-memory).
  //
  // Hop 1, the front end's decode. Infer calls it at most once, on Infer's
  // thread, only once the model is known to exist, so that failures can be
  // counted against it, and once the request is admitted (has a worker), so
  // that only running requests hold decoded tensors. Its error is the
  // request's answer, counted as a failure. It may put large inputs into
  // reusable buffers (Tensor::Reusable): Infer frees them unless the request
  // succeeds.
  using Decoder = std::function<Result<InferRequest>()>;
  // Hop 2, the run of the decoded request (the model's Execute, then the hold
  // on the reply's memory), which the repository calls with the pool's
  // out-of-memory recovery: at most twice, the second time on a fresh load
  // (ModelRepository::RunBody states the contract).
  using RunBody = ModelRepository::RunBody;
  // Whether the caller went away (the client closed its connection, the gRPC
  // call was cancelled): polled while the request waits; cheap, any thread.
  using CancelFn = std::function<bool()>;
  // Checks the model and version, waits for a worker, decodes the request,
  // waits for the memory its run needs, runs it (with the pool's
  // out-of-memory recovery), classifies outputs, and records the outcome.
  // Errors: the decoder's, kInvalidArgument, kNotFound, kUnavailable (busy,
  // waited past queue_timeout, shutting down, not loaded, failed load),
  // kResourceExhausted (never fits, out of memory), kCancelled, kInternal.
  // `route`: where RunsAtOnce found this model version just now (the caller's, for this request),
  // run on without resolving it again; null, or a route of another model or version: resolved here.
  Result<InferResponse> Infer(const std::string& model, const std::string& version, const Decoder& decode,
                              const CancelFn& cancelled = {}, const ModelRepository::Route* route = nullptr);
  // Whether an inference of this model version would start at once and end within `limit`, by
  // what is known now: no other inference or load is in flight and no reply holds its outputs'
  // memory (so no worker, memory or load to wait for), the version is loaded, and its last
  // successful request took less than `limit` in Infer. A hint, for a front end that would rather
  // run such a request on the thread that received it than hand it to another (server/http: the
  // event loop); the next request may still take longer (larger inputs). False for a version never
  // answered. Cheap; any thread.
  // When true, *route (if given) is the version's route, for Infer; when false, its name is empty.
  bool RunsAtOnce(const std::string& model, const std::string& version, std::chrono::nanoseconds limit,
                  ModelRepository::Route* route = nullptr);
  Result<InferResponse> Infer(const std::string& model, const Decoder& decode) { return Infer(model, "", decode); }
  // How many inferences may be in the server at once: running (--workers) plus waiting (--queue).
  // A front end that hands requests to threads of its own before Infer sees them keeps at most
  // this many handed off, and answers the rest with Busy() at once (server/http).
  size_t InferencesAtOnce() const { return admission_.workers() + admission_.queue(); }
  // kUnavailable "server busy: ..." (HTTP 503, gRPC UNAVAILABLE), what a full queue answers.
  Status Busy() const;

  // --- Operations -------------------------------------------------------------
  // The Prometheus text exposition of every metric.
  std::string RenderMetrics() const { return metrics_.Render(); }
  // From now on Ready() is false and new inferences are refused; calls in flight finish.
  void BeginShutdown() { shutting_down_ = true; }
  // Blocks until no inference or load is in flight.
  void WaitIdle();

  ModelRepository& repository() { return *repository_; }
  MetricsRegistry& metrics() { return metrics_.registry(); }
  // The budget of request bytes in flight, which every front end charges.
  ByteBudget& request_bytes() { return request_bytes_; }
  // The open sequences (sequences.h).
  const SequenceTable& sequences() const { return *sequences_; }

 private:
  // Time spent in each step of one request, in nanoseconds.
  struct Timings {
    uint64_t total = 0, queue = 0, input = 0, infer = 0, output = 0;
    bool admitted = false, ran = false;
  };
  struct Counters;  // one model version's statistics
  class InFlight;   // counts calls in flight for WaitIdle

  InferenceService(Runtime& runtime, ServiceOptions options);
  Result<std::vector<NamedTensor>> Execute(const std::string& name, const std::string& version,
                                           const ModelConfig& config, const std::shared_ptr<Session>& session,
                                           const InferRequest& request);
  Result<std::vector<NamedTensor>> ExecuteImageOperation(const std::string& name, const std::string& version,
                                                         const ModelConfig& config,
                                                         const std::shared_ptr<Session>& session,
                                                         const InferRequest& request);
  Status ClassifyOutputs(const std::string& model, const InferRequest& request, std::vector<NamedTensor>* outputs);
  // Statistics and metrics of one finished request, together.
  void RecordOutcome(const std::string& model, const std::string& version, const Status& status,
                     const Timings& timings);
  ModelStatistics StatisticsOf(const ModelInfo& info);
  // Counts the runs of a model version that gave memory back (ebb_releases_total and its statistics).
  // A model version for ReleaseCounter; the caller keeps it while the observer lives (a pointer to
  // it keeps the observer small enough for std::function to hold without an allocation).
  struct ModelVersion {
    const std::string& model;
    const std::string& version;
  };
  RunObserver ReleaseCounter(const ModelVersion* counted);
  void CountRelease(const std::string& model, const std::string& version);
  // The Runtime's idle release gave back memory a model's runs used (on its timer thread).
  void CountIdleRelease(const std::string& pool_name);
  // A sequence timed out (on the sequence table's thread): release and count.
  void EndTimedOutSequence(const std::string& model, const std::string& version);
  // How a request's runs release: whether they end the operation, and the mode.
  bool EndsOperation(const InferRequest& request) const;
  std::optional<ReleaseMode> ReleaseFor(const InferRequest& request) const;

  Runtime& runtime_;
  const ServiceOptions options_;
  Admission admission_;
  ByteBudget request_bytes_;
  ServiceMetrics metrics_;                        // before repository_: its pool reports into it
  std::unique_ptr<ModelRepository> repository_;
  std::unique_ptr<OcrModels> ocr_;                // models of kind "ocr" (ocr_model.h)
  std::atomic<bool> shutting_down_{false};
  std::vector<std::string> required_;  // set before serving, read-only after

  // (model, version) keys, looked up by views too: every request reads its entry.
  struct VersionLess {
    using is_transparent = void;
    using View = std::pair<std::string_view, std::string_view>;
    static View Of(const std::pair<std::string, std::string>& key) { return {key.first, key.second}; }
    static View Of(const View& key) { return key; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const { return Of(a) < Of(b); }
  };
  // The entry of `model` `version`, made when missing. REQUIRES: stats_mu_ held.
  Counters& CountersLocked(const std::string& model, const std::string& version);

  std::mutex stats_mu_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<Counters>, VersionLess> stats_;  // guarded by stats_mu_

  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
  int in_flight_ = 0;  // guarded by idle_mu_

  std::unique_ptr<SequenceTable> sequences_;  // last: its thread stops before what it reports into
};

}  // namespace ebb::server
