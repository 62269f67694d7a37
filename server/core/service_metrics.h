// server/core/service_metrics.h — the inference service's metrics: every family's name, labels and
// help text, in one place.
//
// InferenceService (service.h) says what happened — a request answered, a release, a pool event,
// a sequence timed out, an operation's progress — through the named methods here, and registers
// the scrape-time gauges once (RegisterCollectors); it spells no metric name or help text itself.
// The families are those docs/server-api.md lists ("Metrics"); tests/unit/server/metrics_test.cc and the
// server's Python tests read them, so names, labels and help texts are part of the interface.
// Per-model series carry the label `model` (every version of a model counts for it), which is how
// ForgetModel finds them.
//
// Thread safety: every method may be called concurrently (MetricsRegistry's lock).
// Ownership: owns its registry. REQUIRES: what RegisterCollectors is given outlives the last
// Render().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "admission.h"
#include "byte_budget.h"
#include "ebb/model_pool.h"
#include "ebb/runtime.h"
#include "ebb/status.h"
#include "metrics.h"
#include "repository.h"
#include "sequences.h"

namespace ebb::server {

class ServiceMetrics {
 public:
  // --- Events -----------------------------------------------------------------
  // One inference request answered with `status` after `total_ns` in Infer:
  // ebb_inference_requests_total, then ebb_inference_duration_seconds (success) or
  // ebb_inference_failures_total{code} (failure).
  void RecordOutcome(const std::string& model, const Status& status, uint64_t total_ns);
  // A pool event of a model version (the repository's on_event): a load
  // (ebb_model_loads_total; on demand also ebb_model_on_demand_loads_total and
  // ebb_model_switch_seconds), an eviction (ebb_model_evictions_total{reason}) or a run's wait
  // for memory (ebb_memory_wait_seconds).
  void CountPoolEvent(const PoolEvent& event);
  // A release that gave arena memory back (ebb_releases_total).
  void CountRelease(const std::string& model);
  // An idle release of the model's memory (ebb_idle_releases_total; its release is counted by
  // CountRelease as well).
  void CountIdleRelease(const std::string& model);
  // A sequence ended by the server after its timeout (ebb_sequences_timed_out_total).
  void CountTimedOutSequence(const std::string& model);
  // Progress of the model's latest operation: ebb_operation_runs_done, and
  // ebb_operation_runs_planned when `planned` is given.
  void SetOperationProgress(const std::string& model, double done, std::optional<double> planned);
  // Drops every series of `model` (a forgotten model: ModelMesh ids come and go).
  void ForgetModel(const std::string& model);

  // --- Scrape time ------------------------------------------------------------
  // Registers the gauges read at every Render(): arenas, RSS, GPU memory, inferences running and
  // queued, open sequences, request bytes in flight, the memory budget and its use per device,
  // models' charges, readiness and predictions, and admission by memory (reserved bytes and
  // limits against the budget and the arena's cap, runs waiting, admitted, refused). Call once.
  void RegisterCollectors(const Runtime& runtime, const Admission& admission, const ByteBudget& request_bytes,
                          const SequenceTable& sequences, ModelRepository& repository);

  // The Prometheus text exposition of every metric.
  std::string Render() const { return registry_.Render(); }
  MetricsRegistry& registry() { return registry_; }

 private:
  // The two series every answered request of a model updates (RecordOutcome), found once instead
  // of by name and labels each time. Valid until ForgetModel removes them.
  struct OutcomeSeries {
    Counter* requests = nullptr;
    Histogram* duration = nullptr;  // from the model's first success
  };

  MetricsRegistry registry_;
  std::mutex outcome_mu_;
  std::map<std::string, OutcomeSeries, std::less<>> outcome_;  // by model; guarded by outcome_mu_
};

}  // namespace ebb::server
