// Internal: what src/pool/model_pool.cc (models, loads, leases) and
// src/pool/model_pool_admission.cc (runs admitted by memory) share. Everything here
// is guarded by ModelPool::mu_.
#pragma once

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "ebb/model_pool.h"
#include "ebb/run_need.h"

namespace ebb {

using PoolClock = std::chrono::steady_clock;

// Whether a device name is the CPU's (compared in place: this is asked several times a run).
inline bool IsCpu(std::string_view device) { return device == "cpu"; }

// How often a model's calls are measured after its first kMeasuredFirstCalls (Entry::measure_every).
inline constexpr uint64_t kMeasuredFirstCalls = 8;
inline constexpr uint64_t kMeasureEvery = 16;
inline constexpr uint64_t kMeasureEveryMost = 256;
// A scheduled measurement within this much of the need recorded (above it: 1/8 of it, plus this)
// finds nothing new.
inline constexpr int64_t kMeasureSteadySlackBytes = int64_t{1} << 20;

struct detail::PoolEntry {
  ModelSpec spec;
  PoolState state = PoolState::kUnloaded;
  std::shared_ptr<Session> session;
  std::string device;            // resolved device once loaded
  std::string requested_device;  // spec.load.device's name ("cpu", "cuda:N"), set with spec
  std::string reason;
  int64_t file_bytes = 0;        // the provisional charge before a first load (ModelBytes)
  int64_t load_bytes = 0;        // the largest load measured (see LoadLocked)
  bool load_quiet = false;       // load_bytes comes from loads with no lease out
  int64_t outside_bytes = 0;     // held for it outside the pool's measurement (SetOutsideBytes)
  int64_t transient_bytes = 0;
  bool loaded_once = false;
  int in_flight = 0;
  PoolClock::time_point last_used = PoolClock::now();
  int64_t keep_alive_ms = -1;    // effective keep-alive of the last call
  std::optional<ModelSignature> signature;  // of the last session loaded
  uint64_t loads = 0;
  uint64_t calls = 0;            // leases handed out
  // After its first calls, one call in measure_every is measured (StartMeasuringLocked): from
  // kMeasureEvery, doubled up to kMeasureEveryMost each time a scheduled measurement finds the
  // need already recorded, back to kMeasureEvery when one finds more.
  uint64_t measure_every = kMeasureEvery;
  bool removed = false;          // Remove()d while a lease was out: erased when the last one ends
  // Admission by memory. A RunNeed survives evictions and reloads (it is the
  // model's, not the session's); Add() with another file starts it afresh.
  RunNeed need;                  // memory (RSS) a run needs
  RunNeed arena_need;            // shared CPU arena a run needs (exact, from runs that raised its peak)
  int64_t last_run_elements = 0;
  int64_t last_need_bytes = 0;
  int64_t last_arena_need_bytes = 0;
  int64_t reserved_bytes = 0;    // by its run leases out
  uint64_t out_of_memory = 0;
  // Runs measured (alone in the process). The first kRunsMeasuredAlone run alone, so that a need
  // that follows the input's values rather than its size shows before runs go side by side.
  int measured_runs = 0;
  // Two measured runs of the same input size needed very different memory (kValueDependence):
  // the size does not predict the need, so every run of the model runs alone, measured. Kept, as
  // the RunNeed is, across evictions and reloads.
  bool value_dependent = false;
};

// The first runs of a model that run alone to be measured, whatever their predictions say.
inline constexpr int kRunsMeasuredAlone = 2;
// A measured run of a size measured before that needed more than twice the need recorded for it,
// plus this, marks its model value-dependent (a need that follows the input's values: an output
// sized by a value, as ConstantOfShape, Expand, Range, Resize with scales, NonMaxSuppression do).
// The slack keeps the noise of small RSS readings from marking anything.
inline constexpr int64_t kValueDependenceSlackBytes = int64_t{32} << 20;
// Free regions of the shared arena above this at a measured run's start make its RSS reading a
// lower bound (ModelPool::FirstMeasurementOverKeptArenaLocked, FinishMeasuringLocked).
inline constexpr int64_t kKeptArenaSlackBytes = int64_t{4} << 20;

// The runs of one device: what they reserved, and those waiting, in arrival
// order (out-of-memory retries ahead of the others, among themselves in order).
struct ModelPool::Line {
  struct Waiter {
    uint64_t ticket = 0;
    bool retry = false;
    std::string model;
  };
  std::deque<Waiter> waiting;
  int64_t reserved = 0;        // by runs in flight, against the budget
  int64_t arena_reserved = 0;  // and against the shared arena's cap
  int runs = 0;          // runs in flight with a reservation
  int64_t held = 0;      // by MemoryHolds (callers' outputs and replies), against the budget
  int holds = 0;
  bool alone = false;    // one of them holds the device alone
  uint64_t admitted = 0, waited = 0, refused = 0, timed_out = 0, cancelled = 0;
  double wait_seconds = 0;

  void Enqueue(uint64_t ticket, bool retry, const std::string& model) {
    auto at = waiting.end();
    if (retry) at = std::find_if(waiting.begin(), waiting.end(), [](const Waiter& w) { return !w.retry; });
    waiting.insert(at, Waiter{ticket, retry, model});
  }
  void Leave(uint64_t ticket) {
    std::erase_if(waiting, [ticket](const Waiter& w) { return w.ticket == ticket; });
  }
  bool First(uint64_t ticket) const { return !waiting.empty() && waiting.front().ticket == ticket; }
  int WaitingFor(const std::string& model) const {
    return static_cast<int>(std::count_if(waiting.begin(), waiting.end(), [&](const Waiter& w) { return w.model == model; }));
  }
};

namespace detail {

// Resets the process's RSS high-water mark (VmHWM) so that the next reading
// is the peak of what happens from now on.
void ResetPeakRss();
// Used memory of GPU `index` (NVML); 0 when unknown.
int64_t GpuUsed(int index);

}  // namespace detail
}  // namespace ebb
