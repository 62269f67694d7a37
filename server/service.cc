#include "service.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>

#include "ebb/operation.h"
#include "ebb/tiler.h"
#include "ebb/version.h"

namespace ebb::server {
namespace {

using nlohmann::json;

HttpReply JsonReply(int status, const json& body) { return {status, body.dump(), "application/json", {}}; }

json Describe(const std::vector<TensorInfo>& infos) {
  json list = json::array();
  for (const TensorInfo& t : infos) list.push_back({{"name", t.name}, {"datatype", DataTypeName(t.type)}, {"shape", t.shape}});
  return list;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

HttpReply ReplyFor(const Status& status) {
  int code = 500;
  switch (status.code()) {
    case StatusCode::kOk: code = 200; break;
    case StatusCode::kInvalidArgument: code = 400; break;
    case StatusCode::kNotFound: code = 404; break;
    case StatusCode::kUnavailable:
    case StatusCode::kResourceExhausted:
    case StatusCode::kCancelled: code = 503; break;
    case StatusCode::kFailedPrecondition: code = 400; break;
    case StatusCode::kInternal: code = 500; break;
  }
  return {code, EncodeError(status.message()), "application/json", {}};
}

InferenceService::InferenceService(Runtime& runtime, ModelRepository& repository, MetricsRegistry& metrics,
                                   ServiceOptions options)
    : runtime_(runtime),
      repository_(repository),
      options_(options),
      admission_(options.workers, options.queue),
      metrics_(metrics) {
  RegisterCollectors();
}

HttpReply InferenceService::Live() const { return JsonReply(200, {{"live", true}}); }

HttpReply InferenceService::Ready() const {
  return shutting_down_ ? JsonReply(503, {{"ready", false}}) : JsonReply(200, {{"ready", true}});
}

HttpReply InferenceService::ServerMetadata() const {
  return JsonReply(200, {{"name", "ebb"}, {"version", Version()}, {"extensions", {"binary_tensor_data", "model_repository"}}});
}

HttpReply InferenceService::ModelMetadata(const std::string& model) {
  auto handle = repository_.Acquire(model);
  if (!handle.ok()) return ReplyFor(handle.status());
  const Session& s = *handle->session();
  return JsonReply(200, {{"name", model},
                         {"versions", {"1"}},
                         {"platform", "onnxruntime_onnx"},
                         {"inputs", Describe(s.inputs())},
                         {"outputs", Describe(s.outputs())}});
}

HttpReply InferenceService::ModelReady(const std::string& model) const {
  auto info = repository_.Info(model);
  if (!info.ok()) return ReplyFor(info.status());
  const bool ready = info->state == PoolState::kReady;
  return JsonReply(ready ? 200 : 400, {{"name", model}, {"ready", ready}});
}

HttpReply InferenceService::RepositoryIndex() const {
  json list = json::array();
  for (const ModelInfo& m : repository_.Index()) {
    json entry = {{"name", m.name}, {"version", "1"}, {"state", PoolStateName(m.state)},
                  {"charge_bytes", m.charge_bytes}, {"in_flight", m.in_flight}, {"pinned", m.pinned}};
    if (!m.reason.empty()) entry["reason"] = m.reason;
    list.push_back(entry);
  }
  return JsonReply(200, list);
}

HttpReply InferenceService::LoadModel(const std::string& model) {
  if (Status st = repository_.Load(model); !st.ok()) return ReplyFor(st);
  return JsonReply(200, json::object());
}

HttpReply InferenceService::UnloadModel(const std::string& model) {
  if (Status st = repository_.Unload(model); !st.ok()) return ReplyFor(st);
  return JsonReply(200, json::object());
}

HttpReply InferenceService::Metrics() const {
  return {200, metrics_.Render(), "text/plain; version=0.0.4; charset=utf-8", {}};
}

HttpReply InferenceService::Infer(const std::string& model, std::string_view body,
                                  const std::optional<std::string>& header_length) {
  const auto start = std::chrono::steady_clock::now();
  if (auto info = repository_.Info(model); !info.ok()) return ReplyFor(info.status());  // unknown: no metrics label
  const Labels labels = {{"model", model}};
  metrics_.GetCounter("ebb_inference_requests_total", "Inference requests received, per model.", labels).Increment();
  auto fail = [&](const Status& st) {
    metrics_
        .GetCounter("ebb_inference_failures_total", "Inference requests that failed, per model and reason.",
                    {{"model", model}, {"code", StatusCodeName(st.code())}})
        .Increment();
    return ReplyFor(st);
  };

  std::optional<size_t> json_length;
  if (header_length) {
    auto parsed = ParseHeaderContentLength(*header_length);
    if (!parsed.ok()) return fail(parsed.status());
    json_length = *parsed;
  }
  auto request = ParseInferRequest(body, json_length, {options_.max_input_elements});
  if (!request.ok()) return fail(request.status());

  Admission::Ticket ticket = admission_.Enter();
  if (!ticket.admitted()) {
    return fail(Unavailable("server busy: " + std::to_string(admission_.workers()) + " inferences running and " +
                            std::to_string(admission_.queue()) + " waiting; retry later"));
  }
  std::vector<NamedTensor> outputs;
  Status st = repository_.RunWithRecovery(
      model, request->keep_alive_ms, [&](const ModelConfig& config, const std::shared_ptr<Session>& session) {
        auto result = Execute(model, config, session, *request);
        if (result.ok()) outputs = std::move(result).value();
        return result.status().ok() ? Status::Ok() : result.status();
      });
  if (!st.ok()) return fail(st);
  EncodedResponse encoded = EncodeInferResponse(model, "1", *request, outputs);
  HttpReply reply{200, std::move(encoded.body), "application/json", {}};
  if (encoded.header_length) {
    reply.content_type = "application/octet-stream";
    reply.headers.emplace_back(std::string(kInferenceHeaderContentLength), std::to_string(*encoded.header_length));
  }
  metrics_
      .GetHistogram("ebb_inference_duration_seconds", "Time to answer a successful inference request.",
                    LatencyBuckets(), labels)
      .Observe(SecondsSince(start));
  return reply;
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
  if (batch.shape().size() != 4 || batch.shape()[0] < 1) {
    return InvalidArgument("input '" + s.inputs()[0].name + "' must be [N,C,H,W] with N >= 1, got " +
                           ShapeToString(batch.shape()));
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

RunObserver InferenceService::ReleaseCounter(const std::string& model) {
  Counter& releases = metrics_.GetCounter("ebb_releases_total", "Runs that gave arena memory back.", {{"model", model}});
  return [&releases](const RunRecord& r) {
    if (!r.release_spec.empty() || r.trimmed) releases.Increment();
  };
}

std::vector<std::string> InferenceService::Devices() const {
  std::vector<std::string> devices = {"cpu"};
  for (const ModelStatus& m : repository_.pool().Snapshot()) {
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
    for (const std::string& d : Devices()) samples.push_back({{{"device", d}}, double(repository_.pool().budget(d))});
    return samples;
  });
  metrics_.AddCollector("ebb_memory_budget_used_bytes", "Sum of the charges of the models loaded on a device.", [this] {
    std::vector<std::pair<Labels, double>> samples;
    for (const std::string& d : Devices()) samples.push_back({{{"device", d}}, double(repository_.pool().used(d))});
    return samples;
  });
  metrics_.AddCollector("ebb_model_charge_bytes", "A model's measured memory charge (load + transient peak).", [this] {
    std::vector<std::pair<Labels, double>> samples;
    for (const ModelStatus& m : repository_.pool().Snapshot()) {
      samples.push_back({{{"model", m.name}}, static_cast<double>(m.charge_bytes)});
    }
    return samples;
  });
  metrics_.AddCollector("ebb_model_ready", "1 when a model is loaded and ready, else 0.", [this] {
    std::vector<std::pair<Labels, double>> samples;
    for (const ModelInfo& m : repository_.Index()) {
      samples.push_back({{{"model", m.name}}, m.state == PoolState::kReady ? 1.0 : 0.0});
    }
    return samples;
  });
}

}  // namespace ebb::server
