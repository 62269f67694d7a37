#include "service.h"

#include <algorithm>
#include <chrono>

#include "ebb/operation.h"
#include "ebb/tiler.h"
#include "ebb/version.h"

namespace ebb::server {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

InferenceService::InferenceService(Runtime& runtime, ServiceOptions options)
    : runtime_(runtime), options_(options), admission_(options.workers, options.queue) {}

InferenceService::~InferenceService() = default;

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
  service->RegisterCollectors();
  return service;
}

ServerMetadata InferenceService::Metadata() const {
  return {"ebb", Version(), {"binary_tensor_data", "model_repository"}};
}

Result<ModelMetadata> InferenceService::DescribeModel(const std::string& model) {
  auto handle = repository_->Acquire(model);
  if (!handle.ok()) return handle.status();
  const Session& s = *handle->session();
  return ModelMetadata{model, {"1"}, "onnxruntime_onnx", s.inputs(), s.outputs()};
}

Result<bool> InferenceService::ModelReady(const std::string& model) {
  auto info = repository_->Info(model);
  if (!info.ok()) return info.status();
  return info->state == PoolState::kReady;
}

std::vector<ModelInfo> InferenceService::Index() { return repository_->Index(); }

Status InferenceService::Load(const std::string& model) { return repository_->Load(model); }

Status InferenceService::Unload(const std::string& model) { return repository_->Unload(model); }

Result<InferResponse> InferenceService::Infer(const std::string& model, const Decoder& decode) {
  const auto start = std::chrono::steady_clock::now();
  if (auto info = repository_->Info(model); !info.ok()) return info.status();  // unknown: no metrics label
  const Labels labels = {{"model", model}};
  metrics_.GetCounter("ebb_inference_requests_total", "Inference requests received, per model.", labels).Increment();
  auto fail = [&](const Status& st) {
    metrics_
        .GetCounter("ebb_inference_failures_total", "Inference requests that failed, per model and reason.",
                    {{"model", model}, {"code", StatusCodeName(st.code())}})
        .Increment();
    return st;
  };

  Result<InferRequest> request = decode();
  if (!request.ok()) return fail(request.status());

  Admission::Ticket ticket = admission_.Enter();
  if (!ticket.admitted()) {
    return fail(Unavailable("server busy: " + std::to_string(admission_.workers()) + " inferences running and " +
                            std::to_string(admission_.queue()) + " waiting; retry later"));
  }
  InferResponse response{model, "1", request->id, {}};
  Status st = repository_->RunWithRecovery(
      model, request->keep_alive_ms, [&](const ModelConfig& config, const std::shared_ptr<Session>& session) {
        auto result = Execute(model, config, session, *request);
        if (result.ok()) response.outputs = std::move(result).value();
        return result.status().ok() ? Status::Ok() : result.status();
      });
  if (!st.ok()) return fail(st);
  metrics_
      .GetHistogram("ebb_inference_duration_seconds", "Time to answer a successful inference request.",
                    LatencyBuckets(), labels)
      .Observe(SecondsSince(start));
  return response;
}

Result<std::vector<NamedTensor>> InferenceService::Execute(const std::string& name, const ModelConfig& config,
                                                           const std::shared_ptr<Session>& session,
                                                           const InferRequest& request) {
  if (config.kind == ModelKind::kImageToImage) return ExecuteImageOperation(name, config, session, request);
  RunObserver observer = ReleaseCounter(name);
  RunFlags flags;
  flags.outputs = request.outputs;
  flags.observer = &observer;
  return session->Run(request.inputs, flags);
}

Result<std::vector<NamedTensor>> InferenceService::ExecuteImageOperation(const std::string& name,
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
  RunObserver observer = ReleaseCounter(name);
  OperationOptions options;
  options.observer = &observer;
  // Progress of the model's latest operation, for clients watching a long tiled request.
  Gauge& done = metrics_.GetGauge("ebb_operation_runs_done", "Runs finished in the model's latest operation.",
                                  {{"model", name}});
  Gauge& total = metrics_.GetGauge("ebb_operation_runs_planned", "Runs planned in the model's latest operation.",
                                   {{"model", name}});
  done.Set(0);
  options.on_progress = [&](const Progress& p) {
    done.Set(p.done);
    total.Set(p.total);
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

void InferenceService::CountPoolEvent(const PoolEvent& e) {
  const Labels model = {{"model", e.name}};
  if (e.kind == PoolEvent::Kind::kEvict) {
    metrics_
        .GetCounter("ebb_model_evictions_total", "Models unloaded, per model and reason.",
                    {{"model", e.name}, {"reason", EvictReasonName(e.reason)}})
        .Increment();
    return;
  }
  metrics_.GetCounter("ebb_model_loads_total", "Models loaded, per model.", model).Increment();
  if (e.on_demand) {
    metrics_.GetCounter("ebb_model_on_demand_loads_total", "Loads a request waited for, per model.", model)
        .Increment();
    metrics_
        .GetHistogram("ebb_model_switch_seconds", "Time a request waited for its model to load.", LatencyBuckets())
        .Observe(e.load_ms / 1000);
  }
}

RunObserver InferenceService::ReleaseCounter(const std::string& model) {
  Counter& releases = metrics_.GetCounter("ebb_releases_total", "Runs that gave arena memory back.", {{"model", model}});
  return [&releases](const RunRecord& r) {
    if (!r.release_spec.empty() || r.trimmed) releases.Increment();
  };
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
  metrics_.AddCollector("ebb_model_charge_bytes", "A model's measured memory charge (load + transient peak).", [this] {
    std::vector<std::pair<Labels, double>> samples;
    for (const ModelStatus& m : repository_->pool().Snapshot()) {
      samples.push_back({{{"model", m.name}}, static_cast<double>(m.charge_bytes)});
    }
    return samples;
  });
  metrics_.AddCollector("ebb_model_ready", "1 when a model is loaded and ready, else 0.", [this] {
    std::vector<std::pair<Labels, double>> samples;
    for (const ModelInfo& m : repository_->Index()) {
      samples.push_back({{{"model", m.name}}, m.state == PoolState::kReady ? 1.0 : 0.0});
    }
    return samples;
  });
}

}  // namespace ebb::server
