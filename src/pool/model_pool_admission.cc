// ModelPool: runs admitted by the memory they will need (see the file comment
// of ebb/model_pool.h): each device's line of runs, the limits a run's
// prediction is reserved against, and the measurements that teach a model's
// RunNeed.
#include <cstdio>

#include "log.h"
#include "model_pool_internal.h"

namespace ebb {
namespace {

std::string Mib(int64_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

// "512.0 MiB (536870912 bytes)": readable, and exact for whoever compares numbers.
std::string Bytes(int64_t bytes) { return Mib(bytes) + " (" + std::to_string(bytes) + " bytes)"; }

}  // namespace

ModelPool::Line& ModelPool::LineOf(const std::string& device) {
  // The CPU's, asked for several times by every run on it, is kept at hand (lines are never erased).
  const bool cpu = IsCpu(device);
  if (cpu && cpu_line_) return *cpu_line_;
  std::unique_ptr<Line>& line = lines_[device];
  if (!line) line = std::make_unique<Line>();
  if (cpu) cpu_line_ = line.get();
  return *line;
}

ModelPool::Limits ModelPool::RunLimitsLocked(const std::string& device, int64_t own_charge, bool alone,
                                             int64_t used) const {
  Limits limits;
  limits.device = device;
  limits.alone = alone;
  // The shared arena bounds every CPU session's runs together, whatever the budget says.
  if (IsCpu(device) && runtime_.policy().cpu.arena == CpuArenaMode::kShared) {
    if (const int64_t cap = runtime_.shared_arena_cap(); cap > 0) limits.arena = cap;
  }
  int64_t room = budget(device);  // 0: no budget (a GPU that NVML does not report)
  if (IsCpu(device)) {
    // The machine's memory, or the container's limit when lower (the cgroup reading).
    if (const int64_t physical = PhysicalMemoryBytes(); physical > 0 && (room <= 0 || physical < room)) {
      room = physical;
      limits.physical = true;
    }
  }
  if (room > 0) {
    limits.room = room;
    limits.charges = alone ? own_charge : used >= 0 ? used : UsedLocked(device);
    limits.memory = std::max<int64_t>(room - limits.charges, 0);
  }
  return limits;
}

std::string ModelPool::Limits::ArenaWhy() const { return "the shared CPU arena's cap of " + Bytes(arena); }

std::string ModelPool::Limits::MemoryWhy() const {
  const std::string why = physical ? "the memory this process may use (the machine's or its container's limit)"
                                    : "the memory budget on " + std::string(device);
  return why + " of " + Bytes(room) + " less " + Mib(charges) + " charged to " +
         (alone ? "the model itself" : "the models loaded there");
}

std::pair<std::optional<int64_t>, std::optional<int64_t>> ModelPool::PredictLocked(const Entry& e,
                                                                                   int64_t elements) const {
  const std::optional<int64_t> memory = e.need.Predict(elements);
  // Where no run raised the arena's peak yet, the memory need bounds the arena's from above.
  std::optional<int64_t> arena = e.arena_need.empty() ? memory : e.arena_need.Predict(elements);
  if (arena && memory) arena = std::min(*arena, *memory);
  return {memory, arena};
}

std::string ModelPool::WaitReasonLocked(const Entry& e, int64_t elements, bool retry) const {
  const auto [memory, arena] = PredictLocked(e, elements);
  std::string reason;
  if (retry) {
    reason = "to retry alone after running out of memory";
  } else if (!memory) {
    reason = "to run alone: a model's first run is measured alone, and '" + e.spec.name + "' has none yet";
  } else {
    reason = "a run of " + std::to_string(elements) + " input elements is predicted to need " + Bytes(*memory) +
             " of memory, " + Mib(*arena) + " of it in the arena";
  }
  auto it = lines_.find(e.device);
  if (it == lines_.end()) return reason;
  const Line& line = *it->second;
  const Limits limits = RunLimitsLocked(e.device, 0, false);
  reason += "; " + std::to_string(line.runs) + " runs in flight on " + e.device + " hold " + Mib(line.reserved);
  if (line.holds > 0) reason += ", " + std::to_string(line.holds) + " replies " + Mib(line.held);
  if (limits.memory >= 0) reason += " of the " + Mib(limits.memory) + " they may reserve (" + limits.MemoryWhy() + ")";
  if (limits.arena >= 0) reason += " and " + Mib(line.arena_reserved) + " of " + limits.ArenaWhy();
  return reason + ", " + std::to_string(line.waiting.size()) + " runs waiting";
}

ModelPool::Admit ModelPool::TryAdmitLocked(Entry& e, int64_t elements, uint64_t ticket, bool retry,
                                           Reserved* reserved, Status* refusal, std::vector<PoolEvent>* events) {
  Line& line = LineOf(e.device);
  const auto [memory, arena] = PredictLocked(e, elements);
  // Not measured yet (or retrying after an out-of-memory): it runs alone, to be measured. So do a
  // model's first few runs, and every run of a model whose need follows its inputs' values.
  bool alone = retry || !memory;
  if (memory && !retry && !e.value_dependent) {
    const Limits most = RunLimitsLocked(e.device, ChargeOf(e), /*alone=*/true);
    // Refused only on what it needs at least; a prediction (an upper bound) that cannot fit makes
    // it run alone, to be measured.
    const int64_t arena_least = e.arena_need.AtLeast(elements), memory_least = e.need.AtLeast(elements);
    std::string over;
    if (most.arena >= 0 && arena_least > most.arena) {
      over = Bytes(arena_least) + " of arena (predicted: " + Mib(*arena) + "), more than " + most.ArenaWhy();
    } else if (most.memory >= 0 && memory_least > most.memory) {
      over = Bytes(memory_least) + " of memory (predicted: " + Mib(*memory) + "), more than " + most.MemoryWhy() +
             " leaves for it (" + Bytes(most.memory) + ")";
    }
    if (!over.empty()) {
      ++line.refused;
      *refusal = ResourceExhausted("model '" + e.spec.name + "': a run of " + std::to_string(elements) +
                                   " input elements needs at least " + over +
                                   "; it cannot run even alone (from what its runs were measured to need at " +
                                   std::to_string(e.need.points().size()) + " sizes; a smaller input may fit)");
      return Admit::kRefused;
    }
    alone = (most.arena >= 0 && *arena > most.arena) || (most.memory >= 0 && *memory > most.memory);
  }
  if (e.value_dependent || e.measured_runs < kRunsMeasuredAlone) alone = true;
  // In arrival order: only the first in line may go (ticket 0: a run not in line, tried while the
  // line is empty), and nobody while a run holds the device alone.
  if ((ticket != 0 ? !line.First(ticket) : !line.waiting.empty()) || line.alone) return Admit::kWait;
  Reserved taken{0, 0, alone, memory.value_or(-1), arena.value_or(-1)};
  // When idle models' charges keep a predicted need out even with nothing else running, they go
  // (LRU first), for a run alone too; runs in flight are waited for, never evicted.
  // Unmeasured, nothing predicts its need: room for the most it can take (the shared arena's cap
  // bounds its arena; without one, the whole budget, so that every idle model goes).
  int64_t used = -1;  // UsedLocked(e.device), once read (the limits below need it too)
  if (const int64_t b = budget(e.device); b > 0) {
    int64_t room_for = b;
    if (memory) {
      room_for = *memory;
    } else if (const int64_t arena_cap = RunLimitsLocked(e.device, 0, false).arena; arena_cap >= 0) {
      room_for = std::min(arena_cap, b);
    }
    used = UsedLocked(e.device);
    if (used + room_for > b) {
      (void)MakeRoomLocked(e.device, room_for, e.spec.name, events);
      used = -1;  // evictions changed it
    }
  }
  if (alone) {
    if (line.runs > 0 || line.holds > 0) return Admit::kWait;  // it waits for the runs in flight to drain
    // Shown while it runs (within the limits: the device is its own anyway).
    const Limits limits = RunLimitsLocked(e.device, 0, false, used);
    taken.bytes = limits.memory >= 0 ? std::min(memory.value_or(0), limits.memory) : memory.value_or(0);
    taken.arena_bytes = limits.arena >= 0 ? std::min(arena.value_or(0), limits.arena) : arena.value_or(0);
  } else {
    taken.bytes = *memory;
    taken.arena_bytes = *arena;
    const Limits limits = RunLimitsLocked(e.device, 0, false, used);
    if (limits.memory >= 0 && line.reserved + line.held + taken.bytes > limits.memory) return Admit::kWait;
    if (limits.arena >= 0 && line.arena_reserved + taken.arena_bytes > limits.arena) return Admit::kWait;
  }
  *reserved = taken;
  line.reserved += taken.bytes;
  line.arena_reserved += taken.arena_bytes;
  ++line.runs;
  line.alone = alone;
  ++line.admitted;
  e.reserved_bytes += taken.bytes;
  e.last_run_elements = elements;
  e.last_need_bytes = alone ? 0 : taken.bytes;
  e.last_arena_need_bytes = alone ? 0 : taken.arena_bytes;
  return Admit::kAdmitted;
}

MemoryHold ModelPool::HoldMemory(const std::string& device, int64_t bytes) {
  if (!options_.admit_by_memory || bytes <= 0) return MemoryHold();
  std::lock_guard<std::mutex> lock(mu_);
  Line& line = LineOf(device);
  line.held += bytes;
  ++line.holds;
  holds_out_.fetch_add(1, std::memory_order_release);
  return MemoryHold(this, &line, bytes);
}

void ModelPool::ReleaseHold(const MemoryHold& hold) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Line& line = *static_cast<Line*>(hold.line_);
    line.held -= hold.bytes_;
    --line.holds;
    holds_out_.fetch_sub(1, std::memory_order_release);
  }
  changed_.notify_all();  // a run waiting for memory may go now
}

void MemoryHold::Release() { std::exchange(pool_, nullptr)->ReleaseHold(*this); }

void ModelPool::LeaveLineLocked(RunPlace* place) {
  if (!place->ticket) return;
  LineOf(place->device).Leave(place->ticket);
  place->ticket = 0;
  changed_.notify_all();  // the next in line may go now
}

ModelPool::Admit ModelPool::AdmitOrWaitLocked(Entry& e, const AcquireOptions& options, int64_t elements, bool retry,
                                              PoolClock::time_point start, PoolClock::time_point deadline,
                                              std::unique_lock<std::mutex>& lock, RunPlace* place,
                                              Reserved* reserved, Status* failure, std::vector<PoolEvent>* events) {
  if (place->ticket && place->device != e.device) LeaveLineLocked(place);  // reloaded elsewhere (a CUDA fallback)
  if (!place->ticket && LineOf(e.device).waiting.empty()) {
    // Nobody in line (the usual case): tried at once, without taking a place and leaving it again. A
    // run that must wait takes its place below and is tried again (a second try makes no room the
    // first did not: the same need, the same evictions).
    const Admit admit = TryAdmitLocked(e, elements, /*ticket=*/0, retry, reserved, failure, events);
    if (admit != Admit::kWait) return admit;
  }
  if (!place->ticket) {
    place->ticket = ++next_ticket_;
    place->device = e.device;
    LineOf(e.device).Enqueue(place->ticket, retry, e.spec.name);
  }
  const Admit admit = TryAdmitLocked(e, elements, place->ticket, retry, reserved, failure, events);
  if (admit != Admit::kWait) {
    LeaveLineLocked(place);
    return admit;
  }
  // It waits for reservations to come back, in line, up to its deadline.
  place->waited = true;
  Line& line = LineOf(e.device);
  const std::string& name = e.spec.name;
  if (options.cancelled && options.cancelled()) {
    ++line.cancelled;
    *failure = Cancelled("model '" + name + "': the caller went away while its run waited for memory");
    LeaveLineLocked(place);
    return Admit::kRefused;
  }
  const auto now = PoolClock::now();
  if (now >= deadline) {
    ++line.timed_out;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count();
    *failure = Unavailable("model '" + name + "': waited " + std::to_string(ms) + " ms for memory, " +
                           WaitReasonLocked(e, elements, retry) + "; retry later");
    LeaveLineLocked(place);
    return Admit::kRefused;
  }
  // `e` may be erased meanwhile (Remove): the caller looks it up again, and leaves the line if it is gone.
  changed_.wait_until(lock, options.cancelled ? std::min(deadline, now + std::chrono::milliseconds(20)) : deadline);
  return Admit::kWait;
}

void ModelPool::ReturnReservationLocked(const Lease& lease) {
  if (lease.r_.device.empty()) return;
  Line* found = IsCpu(lease.r_.device) ? cpu_line_ : nullptr;  // the CPU's, kept at hand (LineOf)
  if (!found) {
    const auto it = lines_.find(lease.r_.device);
    if (it != lines_.end()) found = it->second.get();
  }
  if (found) {
    Line& line = *found;
    line.reserved -= lease.r_.reserved;
    line.arena_reserved -= lease.r_.arena_reserved;
    --line.runs;
    if (lease.r_.alone) line.alone = false;
  }
  // A removed entry stays while a lease is out (Release erases it), so this is the lease's own.
  if (lease.entry_) lease.entry_->reserved_bytes -= lease.r_.reserved;
}

bool ModelPool::FirstMeasurementOverKeptArenaLocked(const Entry& e, const Lease& lease) const {
  if (!IsCpu(e.device) || in_flight_ != 1 || loading_ > 0) return false;
  // What its first measurements teach: a run's need at its first two sizes (a run lease: the line
  // through them is the lower bound beyond them, RunNeed::AtLeast), else, where charges hold one
  // transient peak (admission by memory off), that peak.
  const bool first = lease.r_.run_elements >= 0
                         ? e.need.points().size() < 2 && !e.need.Measured(lease.r_.run_elements)
                         : !options_.admit_by_memory && e.transient_bytes == 0;
  return first && SharedArenaKeptBytes() > kKeptArenaSlackBytes;
}

int64_t ModelPool::SharedArenaKeptBytes() const {
  if (runtime_.policy().cpu.arena != CpuArenaMode::kShared || runtime_.policy().release != ReleaseMode::kIdle) return 0;
  const std::optional<ArenaStats> shared = runtime_.ReadSharedArena();
  return shared ? shared->reserved - shared->in_use : 0;
}

void ModelPool::StartMeasuringLocked(Entry& e, Lease& lease) {
  // Measuring costs a few reads of /proc and of the arena's statistics (~40 us here): the first
  // calls of a model are measured, then one call in 16, so charges keep up as it runs (one in up
  // to 256 while measurements find nothing new: FinishMeasuringLocked); and a run of a size not
  // measured yet.
  // (e.calls counts the calls before this one.)
  lease.r_.scheduled_measurement = e.calls >= kMeasuredFirstCalls && e.calls % e.measure_every == 0;
  const bool scheduled = e.calls < kMeasuredFirstCalls || lease.r_.scheduled_measurement;
  const bool new_size = lease.r_.run_elements >= 0 && (lease.r_.alone || !e.need.Measured(lease.r_.run_elements));
  // Alone in the process: this call's peaks are its model's own. With others out, or a model
  // loading, nothing is measured (their peaks cannot be told apart).
  if (!(scheduled || new_size) || in_flight_ != 1 || loading_ > 0) return;
  lease.r_.measure_generation = generation_;
  if (IsCpu(e.device)) {
    detail::ResetPeakRss();
    lease.r_.rss_at_start = ReadRssBytes();
    if (runtime_.policy().cpu.arena == CpuArenaMode::kShared) {
      if (auto shared = runtime_.ReadSharedArena()) {
        lease.r_.arena_in_use_at_start = shared->in_use;
        lease.r_.arena_peak_at_start = shared->peak_in_use;
        lease.r_.arena_kept_at_start = shared->reserved - shared->in_use;
      }
    }
  } else if (lease.r_.run_elements >= 0 && e.session) {
    int64_t in_use = 0;
    for (const ArenaStats& a : e.session->ReadOwnArenas()) in_use += a.in_use;
    if (auto shared = e.session->ReadSharedDeviceArena()) in_use += shared->in_use;
    lease.r_.arena_in_use_at_start = in_use;
  }
}

// A measured run of a size measured before that needed far more than that one (kValueDependence):
// its model's need follows its inputs' values. `basis` holds the measurements `seen` compares with.
void ModelPool::NoteValueDependenceLocked(Entry& e, const RunNeed& basis, const Lease& lease, int64_t seen) {
  if (e.value_dependent || lease.r_.retry || lease.r_.run_elements < 0 || !basis.Measured(lease.r_.run_elements)) return;
  const int64_t before = basis.Predict(lease.r_.run_elements).value_or(0);
  if (seen <= 2 * before + kValueDependenceSlackBytes) return;
  e.value_dependent = true;
  detail::LogWarning("model '" + Clip(e.spec.name) + "': a run of " + std::to_string(lease.r_.run_elements) +
                     " input elements needed " + Mib(seen) + " where one of the same size needed " + Mib(before) +
                     ": its memory follows its inputs' values, not their size; its runs run alone from now on");
}

void ModelPool::FinishMeasuringLocked(Entry& e, const Lease& lease) {
  const bool measured = lease.r_.measure_generation && lease.r_.measure_generation == generation_;
  int64_t peak = -1;
  // Whether the shared arena saw this run's allocations (CPU): its figures are exact, where RSS
  // also counts what the process did meanwhile (a server decoding other requests), so value
  // dependence is judged on them alone.
  bool by_arena = false;
  if (IsCpu(e.device)) {
    if (!measured) return;
    peak = ReadPeakRssBytes() - lease.r_.rss_at_start;
    by_arena = lease.r_.arena_peak_at_start >= 0;
    // The shared arena's peak, when this run raised it: its own (it was alone), exact, and counted
    // even where RSS did not grow (arena regions that heap pages already held).
    if (by_arena) {
      if (auto shared = runtime_.ReadSharedArena(); shared && shared->peak_in_use > lease.r_.arena_peak_at_start) {
        const int64_t arena = shared->peak_in_use - lease.r_.arena_in_use_at_start;
        peak = std::max(peak, arena);
        if (lease.r_.run_elements >= 0) {
          // Against the arena need at this size, else the memory need (an RSS reading, never below it).
          NoteValueDependenceLocked(e, e.arena_need.Measured(lease.r_.run_elements) ? e.arena_need : e.need, lease,
                                    arena);
          e.arena_need.Record(lease.r_.run_elements, lease.r_.retry ? std::max(arena, lease.r_.arena_predicted) : arena);
        }
      }
    }
  } else {
    int64_t peak_in_use = 0;
    std::vector<ArenaStats> arenas = e.session->ReadOwnArenas();
    if (auto shared = e.session->ReadSharedDeviceArena()) arenas.push_back(*shared);  // this run was alone
    for (const ArenaStats& a : arenas) {
      e.transient_bytes = std::max(e.transient_bytes, a.peak_in_use);
      peak_in_use += a.peak_in_use;
    }
    // The arena's peak is a high-water mark over the session's life: over what was in use at the
    // start it bounds this run's need from above.
    if (!measured || lease.r_.arena_in_use_at_start < 0) return;
    peak = peak_in_use - lease.r_.arena_in_use_at_start;
  }
  peak = std::max<int64_t>(peak, 0);
  e.transient_bytes = std::max(e.transient_bytes, peak);
  if (lease.r_.run_elements < 0) return;
  ++e.measured_runs;
  // A scheduled measurement that finds the need recorded for its size (or less) measures the
  // next one further off; one that finds more, or a size not measured yet, brings them back.
  if (lease.r_.scheduled_measurement) {
    const std::optional<int64_t> known =
        e.need.Measured(lease.r_.run_elements) ? e.need.Predict(lease.r_.run_elements) : std::nullopt;
    const bool steady = known && peak <= *known + *known / 8 + kMeasureSteadySlackBytes;
    e.measure_every = steady ? std::min(e.measure_every * 2, kMeasureEveryMost) : kMeasureEvery;
  }
  if (!by_arena) NoteValueDependenceLocked(e, e.need, lease, peak);
  // Over regions the shared arena kept (the idle release), the reading is a lower bound: it may
  // raise the prediction, never set one below it.
  if (lease.r_.arena_kept_at_start > kKeptArenaSlackBytes && !lease.r_.retry) {
    const std::optional<int64_t> predicted = e.need.Predict(lease.r_.run_elements);
    if (predicted && peak <= *predicted) return;
  }
  // An out-of-memory retry raises the prediction to what was seen, and never lowers it.
  e.need.Record(lease.r_.run_elements, lease.r_.retry ? std::max(peak, lease.r_.predicted) : peak);
}

ModelStatus ModelPool::StatusLocked(const std::string& name, const Entry& e) const {
  ModelStatus s{name,        e.state,         DeviceOf(e),  e.reason, ChargeOf(e), e.load_bytes, e.transient_bytes,
                e.in_flight, e.spec.pinned,   e.loads};
  s.need_points = e.need.points();
  s.arena_need_points = e.arena_need.points();
  s.last_run_elements = e.last_run_elements;
  s.last_need_bytes = e.last_need_bytes;
  s.last_arena_need_bytes = e.last_arena_need_bytes;
  s.reserved_bytes = e.reserved_bytes;
  s.out_of_memory = e.out_of_memory;
  s.measured_runs = e.measured_runs;
  s.value_dependent = e.value_dependent;
  for (const auto& [device, line] : lines_) s.waiting_for_memory += line->WaitingFor(name);
  return s;
}

Result<std::optional<NeedPrediction>> ModelPool::PredictNeed(const std::string& name, int64_t input_elements) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Entry* e = FindLocked(name);
  if (!e) return NotFound("unknown model '" + name + "'");
  const int64_t x = std::max<int64_t>(input_elements, 1);
  const auto [memory, arena] = PredictLocked(*e, x);
  if (!memory) return std::optional<NeedPrediction>();
  return std::optional<NeedPrediction>(NeedPrediction{*memory, *arena, e->need.AtLeast(x), e->arena_need.AtLeast(x)});
}

std::vector<DeviceAdmission> ModelPool::Admission() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<DeviceAdmission> out;
  auto add = [&](const std::string& device, const Line* line) {
    DeviceAdmission d;
    d.device = device;
    const Limits limits = RunLimitsLocked(device, 0, false);
    d.memory_limit_bytes = limits.memory;
    d.arena_cap_bytes = std::max<int64_t>(limits.arena, 0);
    if (line) {
      d.reserved_bytes = line->reserved;
      d.held_bytes = line->held;
      d.arena_reserved_bytes = line->arena_reserved;
      d.runs = line->runs;
      d.alone = line->alone;
      d.waiting = static_cast<int>(line->waiting.size());
      d.admitted = line->admitted;
      d.waited = line->waited;
      d.wait_seconds = line->wait_seconds;
      d.refused = line->refused;
      d.timed_out = line->timed_out;
      d.cancelled = line->cancelled;
    }
    out.push_back(std::move(d));
  };
  if (!lines_.count("cpu")) add("cpu", nullptr);  // the CPU is always there, runs or not
  for (const auto& [device, line] : lines_) add(device, line.get());
  return out;
}

}  // namespace ebb
