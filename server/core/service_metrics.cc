#include "service_metrics.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "ebb/memory_stats.h"

namespace ebb::server {
namespace {

using Samples = std::vector<std::pair<Labels, double>>;

// Every device a model is loaded on, and "cpu".
std::vector<std::string> Devices(const ModelPool& pool) {
  std::vector<std::string> devices = {"cpu"};
  for (const ModelStatus& m : pool.Snapshot()) {
    if (std::find(devices.begin(), devices.end(), m.device) == devices.end()) devices.push_back(m.device);
  }
  return devices;
}

}  // namespace

void ServiceMetrics::RecordOutcome(const std::string& model, const Status& status, uint64_t total_ns) {
  std::lock_guard<std::mutex> lock(outcome_mu_);  // ForgetModel removes the series under it
  auto it = outcome_.find(model);
  if (it == outcome_.end()) {
    it = outcome_.emplace(model, OutcomeSeries{&registry_.GetCounter("ebb_inference_requests_total",
                                                                     "Inference requests answered, per model.",
                                                                     {{"model", model}})})
             .first;
  }
  OutcomeSeries& series = it->second;
  series.requests->Increment();
  if (status.ok()) {
    if (!series.duration) {  // made at the first success: a model whose requests all failed shows none
      series.duration = &registry_.GetHistogram("ebb_inference_duration_seconds",
                                                "Time to answer a successful inference request.", LatencyBuckets(),
                                                {{"model", model}});
    }
    series.duration->Observe(static_cast<double>(total_ns) / 1e9);
  } else {
    registry_.Increment("ebb_inference_failures_total", "Inference requests that failed, per model and reason.",
                        {{"model", model}, {"code", StatusCodeName(status.code())}});
  }
}

void ServiceMetrics::CountPoolEvent(const PoolEvent& e) {
  const std::string name = ModelRepository::ModelOfPoolName(e.name);  // every version counts for its model
  const Labels model = {{"model", name}};
  if (e.kind == PoolEvent::Kind::kWait) {
    registry_.Observe("ebb_memory_wait_seconds",
                      "Time runs that waited for memory waited (admitted or not; runs that did not wait are not counted).",
                      LatencyBuckets(), {}, e.wait_ms / 1000);
    return;
  }
  if (e.kind == PoolEvent::Kind::kEvict) {
    registry_.Increment("ebb_model_evictions_total", "Models unloaded, per model and reason.",
                        {{"model", name}, {"reason", EvictReasonName(e.reason)}});
    return;
  }
  registry_.Increment("ebb_model_loads_total", "Models loaded, per model.", model);
  if (e.on_demand) {
    registry_.Increment("ebb_model_on_demand_loads_total", "Loads a request waited for, per model.", model);
    registry_
        .GetHistogram("ebb_model_switch_seconds", "Time a request waited for its model to load.", LatencyBuckets())
        .Observe(e.load_ms / 1000);
  }
}

void ServiceMetrics::CountRelease(const std::string& model) {
  registry_.Increment("ebb_releases_total",
                      "Releases that gave arena memory back: runs that ended an operation, idle releases, "
                      "timed-out sequences.",
                      {{"model", model}});
}

void ServiceMetrics::CountIdleRelease(const std::string& model) {
  registry_.Increment("ebb_idle_releases_total", "Idle releases (release mode idle) that gave a model's memory back.",
                      {{"model", model}});
}

void ServiceMetrics::CountTimedOutSequence(const std::string& model) {
  registry_.Increment("ebb_sequences_timed_out_total", "Sequences the server ended after --sequence-timeout-ms idle.",
                      {{"model", model}});
}

void ServiceMetrics::SetOperationProgress(const std::string& model, double done, std::optional<double> planned) {
  const Labels labels = {{"model", model}};
  registry_.Set("ebb_operation_runs_done", "Runs finished in the model's latest operation.", labels, done);
  if (planned) registry_.Set("ebb_operation_runs_planned", "Runs planned in the model's latest operation.", labels, *planned);
}

void ServiceMetrics::ForgetModel(const std::string& model) {
  std::lock_guard<std::mutex> lock(outcome_mu_);
  outcome_.erase(model);
  registry_.RemoveSeries("model", model);
}

void ServiceMetrics::RegisterCollectors(const Runtime& runtime, const Admission& admission,
                                        const ByteBudget& request_bytes, const SequenceTable& sequences,
                                        ModelRepository& repository) {
  const Runtime* const rt = &runtime;
  const Admission* const adm = &admission;
  const ByteBudget* const in_flight = &request_bytes;
  const SequenceTable* const seq = &sequences;
  ModelRepository* const repo = &repository;
  auto arena_field = [rt](int64_t ArenaStats::*field) {
    return [rt, field] {
      Samples samples;
      for (const ArenaStats& a : rt->ReadMemory().arenas) {
        samples.push_back({{{"arena", a.name}}, static_cast<double>(a.*field)});
      }
      return samples;
    };
  };
  registry_.AddCollector("ebb_arena_reserved_bytes", "Bytes an ONNX Runtime arena holds from the OS or driver.",
                         arena_field(&ArenaStats::reserved));
  registry_.AddCollector("ebb_arena_in_use_bytes", "Bytes of an arena handed out to live tensors.",
                         arena_field(&ArenaStats::in_use));
  registry_.AddCollector("ebb_arena_peak_in_use_bytes", "High-water mark of an arena's bytes in use.",
                         arena_field(&ArenaStats::peak_in_use));
  registry_.AddCollector("ebb_process_resident_memory_bytes", "Resident set size of the ebb process.", [] {
    return Samples{{{}, static_cast<double>(ReadRssBytes())}};
  });
  registry_.AddCollector("ebb_gpu_memory_used_bytes", "GPU memory in use, per device (NVML).", [] {
    Samples samples;
    for (const GpuMemory& g : ReadGpuMemory()) samples.push_back({{{"gpu", std::to_string(g.index)}}, double(g.used)});
    return samples;
  });
  registry_.AddCollector("ebb_inference_running", "Inferences running now.", [adm] {
    return Samples{{{}, static_cast<double>(adm->running())}};
  });
  registry_.AddCollector("ebb_inference_queued", "Inferences waiting for a worker now.", [adm] {
    return Samples{{{}, static_cast<double>(adm->waiting())}};
  });
  registry_.AddCollector("ebb_sequences_open", "Sequences of requests open now (--max-sequences).", [seq] {
    return Samples{{{}, static_cast<double>(seq->open())}};
  });
  registry_.AddCollector("ebb_request_bytes_in_flight",
                         "Request bytes held now by HTTP and gRPC together (--max-body-bytes-in-flight).", [in_flight] {
    return Samples{{{}, static_cast<double>(in_flight->held())}};
  });
  registry_.AddCollector("ebb_memory_budget_bytes", "Memory budget per device (0 = none).", [repo] {
    Samples samples;
    for (const std::string& d : Devices(repo->pool())) samples.push_back({{{"device", d}}, double(repo->pool().budget(d))});
    return samples;
  });
  registry_.AddCollector("ebb_memory_budget_used_bytes", "Sum of the charges of the models loaded on a device.", [repo] {
    Samples samples;
    for (const std::string& d : Devices(repo->pool())) samples.push_back({{{"device", d}}, double(repo->pool().used(d))});
    return samples;
  });
  registry_.AddCollector("ebb_model_charge_bytes", "A model's measured memory charge: what it holds while loaded (with admission by memory off, plus its transient peak); all versions.", [repo] {
    std::map<std::string, double> charge;
    for (const ModelStatus& m : repo->pool().Snapshot()) {
      charge[ModelRepository::ModelOfPoolName(m.name)] += static_cast<double>(m.charge_bytes);
    }
    Samples samples;
    for (const auto& [name, bytes] : charge) samples.push_back({{{"model", name}}, bytes});
    return samples;
  });
  auto admission_field = [repo](auto field) {
    return [repo, field] {
      Samples samples;
      for (const DeviceAdmission& d : repo->pool().Admission()) {
        samples.push_back({{{"device", d.device}}, static_cast<double>(field(d))});
      }
      return samples;
    };
  };
  // Against the budget (less the loaded models' charges) and against the shared arena's cap.
  auto against = [repo](bool limit) {
    return [repo, limit] {
      Samples samples;
      for (const DeviceAdmission& d : repo->pool().Admission()) {
        const int64_t budget = limit ? d.memory_limit_bytes : d.reserved_bytes;
        const int64_t arena = limit ? d.arena_cap_bytes : d.arena_reserved_bytes;
        if (!limit || budget >= 0) samples.push_back({{{"against", "budget"}, {"device", d.device}}, double(budget)});
        if (d.arena_cap_bytes > 0) samples.push_back({{{"against", "arena"}, {"device", d.device}}, double(arena)});
      }
      return samples;
    };
  };
  registry_.AddCollector("ebb_memory_reserved_bytes",
                         "Memory reserved by the runs in flight (admission by memory), per device, against the budget "
                         "and against the shared arena's cap.",
                         against(false));
  registry_.AddCollector("ebb_memory_run_limit_bytes",
                         "What runs may reserve in all now, per device: the budget (at most the machine's or "
                         "container's memory) less the loaded models' charges, and the shared arena's cap.",
                         against(true));
  registry_.AddCollector("ebb_runs_waiting_for_memory", "Runs waiting for memory now, per device.",
                         admission_field([](const DeviceAdmission& d) { return d.waiting; }));
  registry_.AddCollector("ebb_runs_admitted", "Runs admitted by memory so far, per device.",
                         admission_field([](const DeviceAdmission& d) { return d.admitted; }));
  registry_.AddCollector("ebb_runs_refused_memory", "Runs refused so far because they could never fit, per device.",
                         admission_field([](const DeviceAdmission& d) { return d.refused; }));
  // Over a model's versions: the largest (`sum` false) or the sum.
  auto model_field = [repo](auto field, bool sum) {
    return [repo, field, sum] {
      std::map<std::string, double> value;
      for (const ModelStatus& m : repo->pool().Snapshot()) {
        double& v = value[ModelRepository::ModelOfPoolName(m.name)];
        v = sum ? v + static_cast<double>(field(m)) : std::max(v, static_cast<double>(field(m)));
      }
      Samples samples;
      for (const auto& [name, v] : value) samples.push_back({{{"model", name}}, v});
      return samples;
    };
  };
  registry_.AddCollector("ebb_model_predicted_need_bytes",
                         "What the model's latest run was predicted to need and reserved against the budget (0: it ran "
                         "alone to be measured).",
                         model_field([](const ModelStatus& m) { return m.last_need_bytes; }, false));
  registry_.AddCollector("ebb_model_predicted_arena_need_bytes",
                         "What the model's latest run was predicted to need of the shared arena and reserved against its "
                         "cap (0: it ran alone to be measured).",
                         model_field([](const ModelStatus& m) { return m.last_arena_need_bytes; }, false));
  registry_.AddCollector("ebb_model_reserved_bytes", "Memory reserved by the model's runs in flight.",
                         model_field([](const ModelStatus& m) { return m.reserved_bytes; }, true));
  registry_.AddCollector("ebb_model_ready", "1 when a model (a version of it) is loaded and ready, else 0.", [repo] {
    std::map<std::string, double> ready;
    for (const ModelInfo& m : repo->Index()) {
      double& r = ready[m.name];
      r = std::max(r, m.state == PoolState::kReady ? 1.0 : 0.0);
    }
    Samples samples;
    for (const auto& [name, value] : ready) samples.push_back({{{"model", name}}, value});
    return samples;
  });
}

}  // namespace ebb::server
