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
    self->metrics_.CountPoolEvent(e);
    if (e.kind == PoolEvent::Kind::kEvict) self->ocr_->Forget(ModelRepository::ModelOfPoolName(e.name));
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
  service->metrics_.RegisterCollectors(runtime, service->admission_, service->request_bytes_, *service->sequences_,
                                       *service->repository_);
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
                                  std::chrono::nanoseconds limit, ModelRepository::Route* route) {
  if (limit.count() <= 0 || shutting_down_) return false;
  {
    std::lock_guard<std::mutex> lock(idle_mu_);
    if (in_flight_ != 0) return false;  // another inference or a load: a worker or memory may be waited for
  }
  // A reply still on its way out holds its outputs' memory (InferResponse::memory), which a run
  // alone, or one that needs it, waits for; and the thread this one would run on (an HTTP event
  // loop) may be the one that has to finish sending that reply and let it go.
  if (repository_->pool().HoldingMemory()) return false;
  // A model not registered (its folder not read yet), or not loaded: a read or a load comes first.
  ModelRepository::Route local;
  ModelRepository::Route& found = route != nullptr ? *route : local;
  const bool quick = [&] {
    if (!repository_->PlacedNow(model, version, &found)) return false;
    // A model whose last request was slow (or that was never answered: how long it takes is not
    // known) goes to a worker.
    std::lock_guard<std::mutex> lock(stats_mu_);
    const auto it = stats_.find(VersionLess::View{model, found.version});
    if (it == stats_.end()) return false;
    const uint64_t last = it->second->last_success_ns;
    return last != 0 && last < static_cast<uint64_t>(limit.count());
  }();
  if (!quick) found.name.clear();  // a route is named only for a request that runs on it at once
  return quick;
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
  if (folder->config->all_versions) {
    c.version_policy = ModelConfiguration::VersionPolicy::kAll;
  } else if (!folder->config->versions.empty()) {
    c.version_policy = ModelConfiguration::VersionPolicy::kSpecific;
  }
  c.inputs = signature->inputs;
  c.outputs = signature->outputs;
  if (!folder->labels->empty()) c.label_filename = "labels.txt";
  c.config = *folder->config;
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
  metrics_.ForgetModel(model);
  return Status::Ok();
}

Result<InferResponse> InferenceService::Infer(const std::string& model, const std::string& version,
                                              const Decoder& decode, const CancelFn& cancelled,
                                              const ModelRepository::Route* found) {
  InFlight in_flight(this);
  const auto start = Clock::now();
  if (shutting_down_) return Unavailable("server is shutting down; retry on another instance");
  // An unknown model or version is answered before any statistic or metric,
  // so that a client cannot create entries or label values at will.
  // The route found here (or by RunsAtOnce just before) is the one the request runs on: one lookup
  // of the model a request.
  ModelRepository::Route resolved_here;
  if (found == nullptr || found->name != model || (!version.empty() && found->version != version)) {
    if (Status st = repository_->Resolve(model, version, &resolved_here); !st.ok()) return st;
    found = &resolved_here;
  }
  const ModelRepository::Route& route = *found;
  const std::string& resolved = route.version;
  Timings t;
  auto finish = [&](const Status& st) {
    t.total = NanosSince(start);
    RecordOutcome(model, resolved, st, t);
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

  // The decoder may put large inputs into reusable buffers (Tensor::Reusable), which only a
  // release frees: unless the request succeeds, its run having taken them over, they are freed
  // when it returns, after its tensors went (a request refused after decoding reaches no run).
  ReusableBufferScope input_buffers;
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
    if (Status entered = sequences_->Enter(model, resolved, sequence); !entered.ok()) return finish(entered);
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
  } leave{this, model, resolved, sequence, executed, succeeded};
  InferResponse response{model, resolved, request->id, {}};
  AcquireOptions acquire;
  acquire.keep_alive_ms = request->keep_alive_ms;
  acquire.run_elements = InputElements(request->inputs);
  acquire.deadline = deadline;
  acquire.cancelled = cancelled;
  // What the run's body reads and writes, behind one reference: a std::function holds a functor of
  // two pointers without an allocation.
  struct RunPlace {
    const std::string& model;
    const std::string& version;
    const InferRequest& request;
    Timings& t;
    InferResponse& response;
    bool& executed;
  } place{model, resolved, *request, t, response, executed};
  const RunBody run_body = [this, &place](const ModelConfig& config, const std::shared_ptr<Session>& session) {
    const auto run = Clock::now();
    place.executed = true;
    auto result = Execute(place.model, place.version, config, session, place.request);
    place.t.infer = NanosSince(run);
    if (!result.ok()) return result.status();
    InferResponse& response = place.response;
    response.outputs = std::move(result).value();
    // Held past the lease, while the front end encodes and sends the reply: the outputs, and what
    // the reply takes beyond them (InferRequest::reply_bytes), taken before the lease ends so
    // that no run is admitted into memory they still hold.
    int64_t bytes = 0;
    for (const NamedTensor& output : response.outputs) {
      bytes += static_cast<int64_t>(output.tensor.byte_size());
      if (place.request.reply_bytes) bytes += place.request.reply_bytes(output);
    }
    response.memory = repository_->pool().HoldMemory("cpu", bytes);
    return Status::Ok();
  };
  Status st = repository_->RunWithRecovery(route, std::move(acquire), run_body);
  if (!st.ok()) return finish(st);
  succeeded = true;
  t.ran = true;
  step = Clock::now();
  st = ClassifyOutputs(model, *request, &response.outputs);
  t.output = NanosSince(step);
  if (!st.ok()) return finish(st);
  input_buffers.Keep();
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
    Counters* c = &CountersLocked(model, version);
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
  metrics_.RecordOutcome(model, status, t.total);
}

Result<std::vector<NamedTensor>> InferenceService::Execute(const std::string& name, const std::string& version,
                                                           const ModelConfig& config,
                                                           const std::shared_ptr<Session>& session,
                                                           const InferRequest& request) {
  if (config.kind == ModelKind::kImageToImage) return ExecuteImageOperation(name, version, config, session, request);
  if (config.kind == ModelKind::kOcr) {
    const ModelVersion counted{name, version};
    RunObserver observer = ReleaseCounter(&counted);
    OperationOptions options;
    options.observer = &observer;
    options.ends_operation = EndsOperation(request);
    options.release = ReleaseFor(request);
    return ocr_->Execute(name, repository_->root() + "/" + name, session, request, options);
  }
  const ModelVersion counted{name, version};
  RunObserver observer = ReleaseCounter(&counted);
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
// end, at once), not after the idle debounce, and every other request releases
// after the debounce, even one run as an operation of several runs (frames,
// tiles, an OCR page), which would release at its end by default
// (OperationReleaseMode); other modes stay as they are.
std::optional<ReleaseMode> InferenceService::ReleaseFor(const InferRequest& request) const {
  if (runtime_.policy().release != ReleaseMode::kIdle) return std::nullopt;
  return request.sequence.in_sequence() ? ReleaseMode::kOperationEnd : ReleaseMode::kIdle;
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
  const ModelVersion counted{name, version};
  RunObserver observer = ReleaseCounter(&counted);
  OperationOptions options;
  options.observer = &observer;
  options.ends_operation = EndsOperation(request);
  options.release = ReleaseFor(request);
  // Progress of the model's latest operation, for clients watching a long tiled request.
  metrics_.SetOperationProgress(name, 0, std::nullopt);
  options.on_progress = [&](const Progress& p) {
    metrics_.SetOperationProgress(name, static_cast<double>(p.done), static_cast<double>(p.total));
  };
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

RunObserver InferenceService::ReleaseCounter(const ModelVersion* counted) {
  return [this, counted](const RunRecord& r) {
    if (r.release_spec.empty() && !r.trimmed) return;
    CountRelease(counted->model, counted->version);
  };
}

InferenceService::Counters& InferenceService::CountersLocked(const std::string& model, const std::string& version) {
  auto it = stats_.find(VersionLess::View{model, version});
  if (it == stats_.end()) it = stats_.emplace(std::pair(model, version), std::make_unique<Counters>()).first;
  return *it->second;
}

void InferenceService::CountRelease(const std::string& model, const std::string& version) {
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++CountersLocked(model, version).stats.releases;
  }
  metrics_.CountRelease(model);
}

void InferenceService::CountIdleRelease(const std::string& pool_name) {
  const std::string model = ModelRepository::ModelOfPoolName(pool_name);
  const size_t slash = pool_name.find('/');
  Result<std::string> version = repository_->ResolveVersion(model, slash == std::string::npos ? "" : pool_name.substr(slash + 1));
  if (!version.ok()) return;  // not a repository model (any more)
  CountRelease(model, *version);
  metrics_.CountIdleRelease(model);
}

void InferenceService::EndTimedOutSequence(const std::string& model, const std::string& version) {
  metrics_.CountTimedOutSequence(model);
  if (runtime_.policy().release == ReleaseMode::kNever) return;
  (void)runtime_.Trim();
  CountRelease(model, version);
}

}  // namespace ebb::server
