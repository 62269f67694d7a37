#include "service.h"

#include <algorithm>
#include <chrono>

#include "classification.h"
#include "ebb/operation.h"
#include "ebb/tiler.h"
#include "ebb/version.h"
#include "model_configuration.h"

namespace ebb::server {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t NanosSince(Clock::time_point start) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
}

uint64_t MillisSinceEpoch() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

void Add(Duration* d, uint64_t ns) {
  ++d->count;
  d->ns += ns;
}

}  // namespace

// One model version's statistics. Guarded by InferenceService::stats_mu_.
struct InferenceService::Counters {
  ModelStatistics stats;
  uint64_t last_success_ns = 0;  // the last successful request's whole time in Infer (RunsAtOnce)
};

// Counts a call in flight for WaitIdle.
class InferenceService::InFlight {
 public:
  explicit InFlight(InferenceService* s) : s_(s) {
    std::lock_guard<std::mutex> lock(s_->idle_mu_);
    ++s_->in_flight_;
  }
  ~InFlight() {
    {
      std::lock_guard<std::mutex> lock(s_->idle_mu_);
      --s_->in_flight_;
    }
    s_->idle_cv_.notify_all();
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  InferenceService* s_;
};

InferenceService::InferenceService(Runtime& runtime, ServiceOptions options)
    : runtime_(runtime),
      options_(options),
      admission_(options.workers, options.queue),
      request_bytes_(options.max_request_bytes_in_flight),
      ocr_(std::make_unique<OcrModels>(runtime)) {}

InferenceService::~InferenceService() {
  runtime_.SetIdleReleaseListener({});  // waits for a call in progress
  sequences_.reset();
}

Result<std::unique_ptr<InferenceService>> InferenceService::Create(Runtime& runtime,
                                                                  ModelRepository::Options repository,
                                                                  ServiceOptions options) {
  std::unique_ptr<InferenceService> service(new InferenceService(runtime, options));
  InferenceService* self = service.get();
  repository.on_event = [self, forward = std::move(repository.on_event)](const PoolEvent& e) {
    self->CountPoolEvent(e);
    if (forward) forward(e);
  };
  auto opened = ModelRepository::Open(runtime, std::move(repository));
  if (!opened.ok()) return opened.status();
  service->repository_ = std::move(opened).value();
  service->sequences_ = std::make_unique<SequenceTable>(
      options.sequences, [self] { return self->runtime_.HoldIdleRelease(); },
      [self](const std::string& model, const std::string& version, const SequenceId&) {
        self->EndTimedOutSequence(model, version);
      });
  runtime.SetIdleReleaseListener([self](const std::string& pool_name) { self->CountIdleRelease(pool_name); });
  service->RegisterCollectors();
  return service;
}

bool InferenceService::Ready() const {
  if (shutting_down_) return false;
  for (const std::string& model : required_) {
    auto info = repository_->Info(model);
    if (!info.ok() || info->state != PoolState::kReady) return false;
  }
  return true;
}

ServerMetadata InferenceService::Metadata() const {
  return {"ebb",
          Version(),
          {"binary_tensor_data", "classification", "model_configuration", "model_repository",
           "model_repository(unload_dependents)", "statistics"}};
}

void InferenceService::WaitIdle() {
  std::unique_lock<std::mutex> lock(idle_mu_);
  idle_cv_.wait(lock, [this] { return in_flight_ == 0; });
}

Result<ModelMetadata> InferenceService::DescribeModel(const std::string& model, const std::string& version) {
  auto folder = repository_->Folder(model);
  if (!folder.ok()) return folder.status();
  auto signature = repository_->Signature(model, version);
  if (!signature.ok()) return signature.status();
  return ModelMetadata{model, folder->versions, "onnxruntime_onnx", signature->inputs, signature->outputs};
}

Result<bool> InferenceService::ModelReady(const std::string& model, const std::string& version) {
  auto info = repository_->Info(model, version);
  if (!info.ok()) return info.status();
  return info->state == PoolState::kReady;
}

Status InferenceService::Busy() const {
  return Unavailable("server busy: " + std::to_string(admission_.workers()) + " inferences running and " +
                     std::to_string(admission_.queue()) + " waiting; retry later");
}

bool InferenceService::RunsAtOnce(const std::string& model, const std::string& version,
                                  std::chrono::nanoseconds limit) {
  if (limit.count() <= 0 || shutting_down_) return false;
  {
    std::lock_guard<std::mutex> lock(idle_mu_);
    if (in_flight_ != 0) return false;  // another inference or a load: a worker or memory may be waited for
  }
  Result<std::string> resolved = repository_->ResolveVersion(model, version);
  if (!resolved.ok()) return false;
  {
    // First what is cheap to ask: a model whose last request was slow (or that was never
    // answered: how long it takes is not known) goes to a worker without the pool's status.
    std::lock_guard<std::mutex> lock(stats_mu_);
    const auto it = stats_.find({model, *resolved});
    if (it == stats_.end()) return false;
    const uint64_t last = it->second->last_success_ns;
    if (last == 0 || last >= static_cast<uint64_t>(limit.count())) return false;
  }
  auto info = repository_->Info(model, *resolved);
  return info.ok() && info->state == PoolState::kReady;  // not loaded: a load would come first
}

Result<ModelConfiguration> InferenceService::Configuration(const std::string& model, const std::string& version) {
  auto folder = repository_->Folder(model);
  if (!folder.ok()) return folder.status();
  auto info = repository_->Info(model, version);
  if (!info.ok()) return info.status();
  auto signature = repository_->Signature(model, info->version);
  if (!signature.ok()) return signature.status();
  ModelConfiguration c;
  c.name = model;
  for (const std::string& v : folder->versions) c.versions.push_back(std::stoll(v));
  if (folder->config.all_versions) {
    c.version_policy = ModelConfiguration::VersionPolicy::kAll;
  } else if (!folder->config.versions.empty()) {
    c.version_policy = ModelConfiguration::VersionPolicy::kSpecific;
  }
  c.inputs = signature->inputs;
  c.outputs = signature->outputs;
  if (!folder->labels->empty()) c.label_filename = "labels.txt";
  c.config = folder->config;
  if (c.config.device.empty()) c.config.device = repository_->default_device();  // the device it is loaded for
  c.config_from_request = folder->config_from_request;
  c.config_file = folder->config_file;
  c.charge_bytes = info->charge_bytes;
  return c;
}

ModelStatistics InferenceService::StatisticsOf(const ModelInfo& info) {
  ModelStatistics s;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    if (auto it = stats_.find({info.name, info.version}); it != stats_.end()) s = it->second->stats;
  }
  s.name = info.name;
  s.version = info.version;
  s.charge_bytes = info.charge_bytes;
  s.transient_peak_bytes = info.transient_bytes;
  s.need_points = info.need_points;
  s.arena_need_points = info.arena_need_points;
  s.predicted_need_bytes = info.last_need_bytes;
  s.predicted_arena_need_bytes = info.last_arena_need_bytes;
  s.reserved_bytes = info.reserved_bytes;
  s.waiting_for_memory = info.waiting_for_memory;
  s.out_of_memory = info.out_of_memory;
  s.loads = info.loads;
  s.state = PoolStateName(info.state);
  return s;
}

Result<std::vector<ModelStatistics>> InferenceService::Statistics(const std::string& model,
                                                                  const std::string& version) {
  std::vector<ModelStatistics> all;
  if (model.empty()) {
    for (const ModelInfo& m : repository_->Index()) {
      if (!m.version.empty()) all.push_back(StatisticsOf(m));
    }
    return all;
  }
  auto folder = repository_->Folder(model);
  if (!folder.ok()) return folder.status();
  const std::vector<std::string> versions = version.empty() ? folder->versions : std::vector<std::string>{version};
  for (const std::string& v : versions) {
    auto info = repository_->Info(model, v);
    if (!info.ok()) return info.status();
    all.push_back(StatisticsOf(*info));
  }
  return all;
}

std::vector<ModelInfo> InferenceService::Index(bool ready_only) {
  std::vector<ModelInfo> models = repository_->Index();
  if (ready_only) std::erase_if(models, [](const ModelInfo& m) { return m.state != PoolState::kReady; });
  return models;
}

Status InferenceService::Load(const std::string& model, const Parameters& parameters) {
  InFlight in_flight(this);
  std::optional<ModelConfig> config;
  for (const auto& [key, value] : parameters) {
    if (key != "config") {
      return InvalidArgument("load parameter '" + key + "' is not supported: ebb loads models from its repository " +
                             "folder and reads only the parameter 'config'");
    }
    const std::string* text = std::get_if<std::string>(&value);
    if (!text) return InvalidArgument("load parameter 'config' must be a string holding a JSON model configuration");
    ModelConfiguration current;
    current.name = model;
    if (auto now = Configuration(model); now.ok()) {
      current = *now;
    } else if (now.status().code() == StatusCode::kNotFound) {
      return now.status();
    }
    auto parsed = ParseConfigOverride(*text, current);
    if (!parsed.ok()) return parsed.status();
    config = *parsed;
  }
  return repository_->Load(model, config);
}

Status InferenceService::Unload(const std::string& model, const Parameters& parameters) {
  for (const auto& [key, value] : parameters) {
    if (key != "unload_dependents") {
      return InvalidArgument("unload parameter '" + key + "' is not supported (ebb reads 'unload_dependents')");
    }
    if (!std::holds_alternative<bool>(value)) return InvalidArgument("unload parameter 'unload_dependents' must be a bool");
    // No ebb model depends on another: there is nothing more to unload.
  }
  return repository_->Unload(model);
}

Status InferenceService::Forget(const std::string& model) {
  EBB_RETURN_IF_ERROR(repository_->Detach(model));
  // Its statistics and metric series go with it: ids come and go (ModelMesh), and each would
  // otherwise stay for good. A request that was in flight may record its outcome afterwards:
  // that leaves one series, dropped again when the id is next forgotten.
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    std::erase_if(stats_, [&](const auto& entry) { return entry.first.first == model; });
  }
  metrics_.RemoveSeries("model", model);
  return Status::Ok();
}

Result<InferResponse> InferenceService::Infer(const std::string& model, const std::string& version,
                                              const Decoder& decode, const CancelFn& cancelled) {
  InFlight in_flight(this);
  const auto start = Clock::now();
  if (shutting_down_) return Unavailable("server is shutting down; retry on another instance");
  // An unknown model or version is answered before any statistic or metric,
  // so that a client cannot create entries or label values at will.
  Result<std::string> resolved = repository_->ResolveVersion(model, version);
  if (!resolved.ok()) return resolved.status();
  Timings t;
  auto finish = [&](const Status& st) {
    t.total = NanosSince(start);
    RecordOutcome(model, *resolved, st, t);
    // A request that failed once admitted may have decoded large inputs into kept buffers
    // (detail::OutputBuffers, which only a release empties) and reached no run, so no release would
    // follow: they are freed now, and those its request still holds when they go.
    if (!st.ok() && t.admitted) detail::OutputBuffers::Drop();
    return st;
  };

  auto step = Clock::now();
  // One deadline for both waits: for a worker here, for memory in the pool.
  const auto deadline = step + options_.queue_timeout;
  Admission::Ticket ticket = admission_.Enter(deadline, cancelled);
  t.queue = NanosSince(step);
  switch (ticket.outcome()) {
    case Admission::Outcome::kAdmitted: break;
    case Admission::Outcome::kQueueFull: return finish(Busy());
    case Admission::Outcome::kTimedOut:
      return finish(Unavailable("server busy: waited " + std::to_string(options_.queue_timeout.count()) +
                                " ms (--queue-timeout-ms) for one of the " + std::to_string(admission_.workers()) +
                                " inference workers; retry later"));
    case Admission::Outcome::kCancelled:
      return finish(Cancelled("the client went away while its request waited for a worker"));
  }
  t.admitted = true;

  step = Clock::now();
  Result<InferRequest> request = decode();
  t.input = NanosSince(step);
  if (!request.ok()) return finish(request.status());
  for (const auto& [output, k] : request->classification) {
    if (k < 1) {
      return finish(InvalidArgument("output '" + output + "': parameters.classification must be a positive integer"));
    }
  }
  // A request of a sequence: checked and counted in before its run, out after it, whatever happened.
  const SequenceControl& sequence = request->sequence;
  if (sequence.in_sequence()) {
    if (Status entered = sequences_->Enter(model, *resolved, sequence); !entered.ok()) return finish(entered);
  }
  bool executed = false, succeeded = false;
  struct LeaveSequence {
    InferenceService* self;
    const std::string& model;
    const std::string& version;
    const SequenceControl& sequence;
    const bool& executed;
    const bool& succeeded;
    ~LeaveSequence() {
      if (!sequence.in_sequence()) return;
      self->sequences_->Leave(model, version, sequence);
      // The last request failed (no memory, cancelled, refused before or in its run): what the
      // sequence grew may still be held, so release here; counted when no run of it was reached.
      if (sequence.end && !succeeded && self->runtime_.policy().release != ReleaseMode::kNever) {
        (void)self->runtime_.Trim();
        if (!executed) self->CountRelease(model, version);
      }
    }
  } leave{this, model, *resolved, sequence, executed, succeeded};
  InferResponse response{model, *resolved, request->id, {}};
  AcquireOptions acquire;
  acquire.keep_alive_ms = request->keep_alive_ms;
  acquire.run_elements = InputElements(request->inputs);
  acquire.deadline = deadline;
  acquire.cancelled = cancelled;
  Status st = repository_->RunWithRecovery(
      model, *resolved, std::move(acquire),
      [&](const ModelConfig& config, const std::shared_ptr<Session>& session) {
        const auto run = Clock::now();
        executed = true;
        auto result = Execute(model, *resolved, config, session, *request);
        t.infer = NanosSince(run);
        if (!result.ok()) return result.status();
        response.outputs = std::move(result).value();
        // Held past the lease, while the front end encodes and sends the reply: the outputs, and
        // about as much again for the reply (binary; JSON text is larger), taken before the lease
        // ends so that no run is admitted into memory they still hold.
        int64_t bytes = 0;
        for (const NamedTensor& output : response.outputs) bytes += static_cast<int64_t>(output.tensor.byte_size());
        response.memory = std::make_shared<const MemoryHold>(repository_->pool().HoldMemory("cpu", 2 * bytes));
        return Status::Ok();
      });
  if (!st.ok()) return finish(st);
  succeeded = true;
  t.ran = true;
  step = Clock::now();
  st = ClassifyOutputs(model, *request, &response.outputs);
  t.output = NanosSince(step);
  if (!st.ok()) return finish(st);
  (void)finish(Status::Ok());
  return response;
}

Status InferenceService::ClassifyOutputs(const std::string& model, const InferRequest& request,
                                         std::vector<NamedTensor>* outputs) {
  if (request.classification.empty()) return Status::Ok();
  auto folder = repository_->Folder(model);
  if (!folder.ok()) return folder.status();
  for (NamedTensor& output : *outputs) {
    auto k = request.classification.find(output.name);
    if (k == request.classification.end()) continue;
    Result<Tensor> classes = Classify(output.tensor, k->second, *folder->labels, output.name);
    if (!classes.ok()) return classes.status();
    output.tensor = std::move(classes).value();
  }
  return Status::Ok();
}

void InferenceService::RecordOutcome(const std::string& model, const std::string& version, const Status& status,
                                     const Timings& t) {
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    std::unique_ptr<Counters>& c = stats_[{model, version}];
    if (!c) c = std::make_unique<Counters>();
    ModelStatistics& s = c->stats;
    if (t.admitted) Add(&s.queue, t.queue);
    if (status.ok()) {
      s.last_inference_ms = MillisSinceEpoch();
      ++s.inference_count;
      ++s.execution_count;
      Add(&s.success, t.total);
      c->last_success_ns = t.total;
      Add(&s.compute_input, t.input);
      Add(&s.compute_infer, t.infer);
      Add(&s.compute_output, t.output);
    } else {
      Add(&s.fail, t.total);
    }
  }
  const Labels labels = {{"model", model}};
  metrics_.Increment("ebb_inference_requests_total", "Inference requests answered, per model.", labels);
  if (status.ok()) {
    metrics_.Observe("ebb_inference_duration_seconds", "Time to answer a successful inference request.",
                     LatencyBuckets(), labels, static_cast<double>(t.total) / 1e9);
  } else {
    metrics_.Increment("ebb_inference_failures_total", "Inference requests that failed, per model and reason.",
                       {{"model", model}, {"code", StatusCodeName(status.code())}});
  }
}

Result<std::vector<NamedTensor>> InferenceService::Execute(const std::string& name, const std::string& version,
                                                           const ModelConfig& config,
                                                           const std::shared_ptr<Session>& session,
                                                           const InferRequest& request) {
  if (config.kind == ModelKind::kImageToImage) return ExecuteImageOperation(name, version, config, session, request);
  if (config.kind == ModelKind::kOcr) {
    RunObserver observer = ReleaseCounter(name, version);
    OperationOptions options;
    options.observer = &observer;
    options.ends_operation = EndsOperation(request);
    options.release = ReleaseFor(request);
    return ocr_->Execute(name, repository_->root() + "/" + name, session, request, options);
  }
  RunObserver observer = ReleaseCounter(name, version);
  RunFlags flags;
  flags.outputs = request.outputs;
  flags.observer = &observer;
  flags.ends_operation = EndsOperation(request);
  flags.release = ReleaseFor(request);
  return session->Run(request.inputs, flags);
}

// A request outside a sequence is a whole operation; one of a sequence ends it only with sequence_end.
bool InferenceService::EndsOperation(const InferRequest& request) const {
  return !request.sequence.in_sequence() || request.sequence.end;
}

// Under the idle mode a sequence's runs release as the operation says (at its
// end, at once), not after the idle debounce; other modes stay as they are.
std::optional<ReleaseMode> InferenceService::ReleaseFor(const InferRequest& request) const {
  if (request.sequence.in_sequence() && runtime_.policy().release == ReleaseMode::kIdle) {
    return ReleaseMode::kOperationEnd;
  }
  return std::nullopt;
}

Result<std::vector<NamedTensor>> InferenceService::ExecuteImageOperation(const std::string& name,
                                                                        const std::string& version,
                                                                        const ModelConfig& config,
                                                                        const std::shared_ptr<Session>& session,
                                                                        const InferRequest& request) {
  const Session& s = *session;
  const std::string& out_name = s.outputs()[0].name;
  if (request.inputs.size() != 1 || request.inputs[0].name != s.inputs()[0].name) {
    return InvalidArgument("model '" + name + "' takes one input, '" + s.inputs()[0].name + "'");
  }
  const Tensor& batch = request.inputs[0].tensor;
  // Every dimension >= 1: a zero one would make N empty frames, each a run, from an empty body.
  const Shape& shape = batch.shape();
  if (shape.size() != 4 || std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 1; })) {
    return InvalidArgument("input '" + s.inputs()[0].name + "' must be [N,C,H,W] with every dimension >= 1, got " +
                           ShapeToString(shape));
  }
  for (const std::string& wanted : request.outputs) {
    if (wanted != out_name) return InvalidArgument("model '" + name + "' has one output, '" + out_name + "'");
  }
  RunObserver observer = ReleaseCounter(name, version);
  OperationOptions options;
  options.observer = &observer;
  options.ends_operation = EndsOperation(request);
  options.release = ReleaseFor(request);
  // Progress of the model's latest operation, for clients watching a long tiled request.
  const Labels labels = {{"model", name}};
  auto progress = [this, &labels](double done, std::optional<double> planned) {
    metrics_.Set("ebb_operation_runs_done", "Runs finished in the model's latest operation.", labels, done);
    if (planned) metrics_.Set("ebb_operation_runs_planned", "Runs planned in the model's latest operation.", labels, *planned);
  };
  progress(0, std::nullopt);
  options.on_progress = [&](const Progress& p) { progress(static_cast<double>(p.done), static_cast<double>(p.total)); };
  std::vector<Tensor> frames;
  for (int64_t n = 0; n < batch.shape()[0]; ++n) frames.push_back(BatchItem(batch, n));
  auto results = config.tile ? RunTiled(runtime_, session, frames, *config.tile, options)
                             : RunPerFrame(runtime_, session, frames, options);
  if (!results.ok()) return results.status();
  auto stacked = StackBatch(*results);
  if (!stacked.ok()) return stacked.status();
  std::vector<NamedTensor> outputs;
  outputs.push_back({out_name, std::move(stacked).value()});
  return outputs;
}

void InferenceService::CountPoolEvent(const PoolEvent& e) {
  const std::string name = ModelRepository::ModelOfPoolName(e.name);  // every version counts for its model
  const Labels model = {{"model", name}};
  if (e.kind == PoolEvent::Kind::kWait) {
    metrics_.Observe("ebb_memory_wait_seconds",
                     "Time runs that waited for memory waited (admitted or not; runs that did not wait are not counted).",
                     LatencyBuckets(), {}, e.wait_ms / 1000);
    return;
  }
  if (e.kind == PoolEvent::Kind::kEvict) {
    metrics_.Increment("ebb_model_evictions_total", "Models unloaded, per model and reason.",
                       {{"model", name}, {"reason", EvictReasonName(e.reason)}});
    return;
  }
  metrics_.Increment("ebb_model_loads_total", "Models loaded, per model.", model);
  if (e.on_demand) {
    metrics_.Increment("ebb_model_on_demand_loads_total", "Loads a request waited for, per model.", model);
    metrics_
        .GetHistogram("ebb_model_switch_seconds", "Time a request waited for its model to load.", LatencyBuckets())
        .Observe(e.load_ms / 1000);
  }
}

RunObserver InferenceService::ReleaseCounter(const std::string& model, const std::string& version) {
  return [this, model, version](const RunRecord& r) {
    if (r.release_spec.empty() && !r.trimmed) return;
    CountRelease(model, version);
  };
}

void InferenceService::CountRelease(const std::string& model, const std::string& version) {
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    std::unique_ptr<Counters>& c = stats_[{model, version}];
    if (!c) c = std::make_unique<Counters>();
    ++c->stats.releases;
  }
  metrics_.Increment("ebb_releases_total",
                     "Releases that gave arena memory back: runs that ended an operation, idle releases, "
                     "timed-out sequences.",
                     {{"model", model}});
}

void InferenceService::CountIdleRelease(const std::string& pool_name) {
  const std::string model = ModelRepository::ModelOfPoolName(pool_name);
  const size_t slash = pool_name.find('/');
  Result<std::string> version = repository_->ResolveVersion(model, slash == std::string::npos ? "" : pool_name.substr(slash + 1));
  if (!version.ok()) return;  // not a repository model (any more)
  CountRelease(model, *version);
  metrics_.Increment("ebb_idle_releases_total", "Idle releases (release mode idle) that gave a model's memory back.",
                     {{"model", model}});
}

void InferenceService::EndTimedOutSequence(const std::string& model, const std::string& version) {
  metrics_.Increment("ebb_sequences_timed_out_total", "Sequences the server ended after --sequence-timeout-ms idle.",
                     {{"model", model}});
  if (runtime_.policy().release == ReleaseMode::kNever) return;
  (void)runtime_.Trim();
  CountRelease(model, version);
}

std::vector<std::string> InferenceService::Devices() {
  std::vector<std::string> devices = {"cpu"};
  for (const ModelStatus& m : repository_->pool().Snapshot()) {
    if (std::find(devices.begin(), devices.end(), m.device) == devices.end()) devices.push_back(m.device);
  }
  return devices;
}

void InferenceService::RegisterCollectors() {
  auto arena_field = [this](int64_t ArenaStats::*field) {
    return [this, field] {
      std::vector<std::pair<Labels, double>> samples;
      for (const ArenaStats& a : runtime_.ReadMemory().arenas) {
        samples.push_back({{{"arena", a.name}}, static_cast<double>(a.*field)});
      }
      return samples;
    };
  };
  metrics_.AddCollector("ebb_arena_reserved_bytes", "Bytes an ONNX Runtime arena holds from the OS or driver.",
                        arena_field(&ArenaStats::reserved));
  metrics_.AddCollector("ebb_arena_in_use_bytes", "Bytes of an arena handed out to live tensors.",
                        arena_field(&ArenaStats::in_use));
  metrics_.AddCollector("ebb_arena_peak_in_use_bytes", "High-water mark of an arena's bytes in use.",
                        arena_field(&ArenaStats::peak_in_use));
  metrics_.AddCollector("ebb_process_resident_memory_bytes", "Resident set size of the ebb process.", [] {
    return std::vector<std::pair<Labels, double>>{{{}, static_cast<double>(ReadRssBytes())}};
  });
  metrics_.AddCollector("ebb_gpu_memory_used_bytes", "GPU memory in use, per device (NVML).", [] {
    std::vector<std::pair<Labels, double>> samples;
    for (const GpuMemory& g : ReadGpuMemory()) samples.push_back({{{"gpu", std::to_string(g.index)}}, double(g.used)});
    return samples;
  });
  metrics_.AddCollector("ebb_inference_running", "Inferences running now.", [this] {
    return std::vector<std::pair<Labels, double>>{{{}, static_cast<double>(admission_.running())}};
  });
  metrics_.AddCollector("ebb_inference_queued", "Inferences waiting for a worker now.", [this] {
    return std::vector<std::pair<Labels, double>>{{{}, static_cast<double>(admission_.waiting())}};
  });
  metrics_.AddCollector("ebb_sequences_open", "Sequences of requests open now (--max-sequences).", [this] {
    return std::vector<std::pair<Labels, double>>{{{}, static_cast<double>(sequences_->open())}};
  });
  metrics_.AddCollector("ebb_request_bytes_in_flight",
                        "Request bytes held now by HTTP and gRPC together (--max-body-bytes-in-flight).", [this] {
    return std::vector<std::pair<Labels, double>>{{{}, static_cast<double>(request_bytes_.held())}};
  });
  metrics_.AddCollector("ebb_memory_budget_bytes", "Memory budget per device (0 = none).", [this] {
    std::vector<std::pair<Labels, double>> samples;
    for (const std::string& d : Devices()) samples.push_back({{{"device", d}}, double(repository_->pool().budget(d))});
    return samples;
  });
  metrics_.AddCollector("ebb_memory_budget_used_bytes", "Sum of the charges of the models loaded on a device.", [this] {
    std::vector<std::pair<Labels, double>> samples;
    for (const std::string& d : Devices()) samples.push_back({{{"device", d}}, double(repository_->pool().used(d))});
    return samples;
  });
  metrics_.AddCollector("ebb_model_charge_bytes", "A model's measured memory charge: what it holds while loaded (with admission by memory off, plus its transient peak); all versions.", [this] {
    std::map<std::string, double> charge;
    for (const ModelStatus& m : repository_->pool().Snapshot()) {
      charge[ModelRepository::ModelOfPoolName(m.name)] += static_cast<double>(m.charge_bytes);
    }
    std::vector<std::pair<Labels, double>> samples;
    for (const auto& [name, bytes] : charge) samples.push_back({{{"model", name}}, bytes});
    return samples;
  });
  auto admission_field = [this](auto field) {
    return [this, field] {
      std::vector<std::pair<Labels, double>> samples;
      for (const DeviceAdmission& d : repository_->pool().Admission()) {
        samples.push_back({{{"device", d.device}}, static_cast<double>(field(d))});
      }
      return samples;
    };
  };
  // Against the budget (less the loaded models' charges) and against the shared arena's cap.
  auto against = [this](bool limit) {
    return [this, limit] {
      std::vector<std::pair<Labels, double>> samples;
      for (const DeviceAdmission& d : repository_->pool().Admission()) {
        const int64_t budget = limit ? d.memory_limit_bytes : d.reserved_bytes;
        const int64_t arena = limit ? d.arena_cap_bytes : d.arena_reserved_bytes;
        if (!limit || budget >= 0) samples.push_back({{{"against", "budget"}, {"device", d.device}}, double(budget)});
        if (d.arena_cap_bytes > 0) samples.push_back({{{"against", "arena"}, {"device", d.device}}, double(arena)});
      }
      return samples;
    };
  };
  metrics_.AddCollector("ebb_memory_reserved_bytes",
                        "Memory reserved by the runs in flight (admission by memory), per device, against the budget "
                        "and against the shared arena's cap.",
                        against(false));
  metrics_.AddCollector("ebb_memory_run_limit_bytes",
                        "What runs may reserve in all now, per device: the budget (at most the machine's or "
                        "container's memory) less the loaded models' charges, and the shared arena's cap.",
                        against(true));
  metrics_.AddCollector("ebb_runs_waiting_for_memory", "Runs waiting for memory now, per device.",
                        admission_field([](const DeviceAdmission& d) { return d.waiting; }));
  metrics_.AddCollector("ebb_runs_admitted", "Runs admitted by memory so far, per device.",
                        admission_field([](const DeviceAdmission& d) { return d.admitted; }));
  metrics_.AddCollector("ebb_runs_refused_memory", "Runs refused so far because they could never fit, per device.",
                        admission_field([](const DeviceAdmission& d) { return d.refused; }));
  // Over a model's versions: the largest (`sum` false) or the sum.
  auto model_field = [this](auto field, bool sum) {
    return [this, field, sum] {
      std::map<std::string, double> value;
      for (const ModelStatus& m : repository_->pool().Snapshot()) {
        double& v = value[ModelRepository::ModelOfPoolName(m.name)];
        v = sum ? v + static_cast<double>(field(m)) : std::max(v, static_cast<double>(field(m)));
      }
      std::vector<std::pair<Labels, double>> samples;
      for (const auto& [name, v] : value) samples.push_back({{{"model", name}}, v});
      return samples;
    };
  };
  metrics_.AddCollector("ebb_model_predicted_need_bytes",
                        "What the model's latest run was predicted to need and reserved against the budget (0: it ran "
                        "alone to be measured).",
                        model_field([](const ModelStatus& m) { return m.last_need_bytes; }, false));
  metrics_.AddCollector("ebb_model_predicted_arena_need_bytes",
                        "What the model's latest run was predicted to need of the shared arena and reserved against its "
                        "cap (0: it ran alone to be measured).",
                        model_field([](const ModelStatus& m) { return m.last_arena_need_bytes; }, false));
  metrics_.AddCollector("ebb_model_reserved_bytes", "Memory reserved by the model's runs in flight.",
                        model_field([](const ModelStatus& m) { return m.reserved_bytes; }, true));
  metrics_.AddCollector("ebb_model_ready", "1 when a model (a version of it) is loaded and ready, else 0.", [this] {
    std::map<std::string, double> ready;
    for (const ModelInfo& m : repository_->Index()) {
      double& r = ready[m.name];
      r = std::max(r, m.state == PoolState::kReady ? 1.0 : 0.0);
    }
    std::vector<std::pair<Labels, double>> samples;
    for (const auto& [name, value] : ready) samples.push_back({{{"model", name}}, value});
    return samples;
  });
}

}  // namespace ebb::server
