// Internal: the one header that includes ONNX Runtime's (ort/ only, and bench/'s
// baselines): error translation, the one call of Ort::Session::Run, arena
// statistics, element types, and what a run's inputs become in ORT's values.
// The other headers of ort/ name ORT's classes without including it, so that
// runtime/ can hold a context and a session state without reaching ORT.
#pragma once

#include <memory_resource>

#include <onnxruntime_cxx_api.h>
#include <onnxruntime_run_options_config_keys.h>
#include <onnxruntime_session_options_config_keys.h>

#include <optional>
#include <string>
#include <vector>

#include "ebb/memory_policy.h"
#include "ebb/memory_stats.h"
#include "ebb/session.h"
#include "ebb/status.h"
#include "ort_context.h"
#include "session_state.h"

namespace ebb::detail {

// Turns an ORT failure into ebb's Status. Allocation failures (arena cap,
// CUDA OOM, bad_alloc) become kResourceExhausted with what ran out and how
// much was asked for; `where` names the operation ("run of 'convnet' on cpu").
Status StatusFromOrt(const Ort::Exception& e, const std::string& where, const std::string& arena_desc);
// Same for texts that did not come as Ort::Exception (std::exception).
Status StatusFromMessage(OrtErrorCode code, const std::string& message, const std::string& where,
                         const std::string& arena_desc);

// One ORT Run, with outputs either preallocated (output_values holds tensors)
// or left to ORT (output_values holds nulls; the caller owns what ORT writes there). `shrink_spec` empty means
// no shrink configuration is submitted at all. This is the ONLY function in
// ebb that calls Ort::Session::Run.
struct OrtRun {
  Ort::Session* session = nullptr;
  const char* const* input_names = nullptr;
  const OrtValue* const* input_values = nullptr;
  size_t input_count = 0;
  const char* const* output_names = nullptr;
  OrtValue** output_values = nullptr;  // null ones ORT allocates (and the caller then owns)
  size_t output_count = 0;
  std::string shrink_spec;
};
// Throws Ort::Exception on failure (callers translate with StatusFromOrt).
void InvokeOrtRun(const OrtRun& run);

// Reads an ORT arena's statistics through a session that uses it.
std::optional<ArenaStats> ReadArenaStats(const Ort::Session& session, const Ort::MemoryInfo& info,
                                         const std::string& name);
// The same through an allocator handle on the arena (kept by its owner, so not made per read).
std::optional<ArenaStats> ReadArenaStats(const OrtAllocator* allocator, const std::string& name);

// An arena that belongs to one session only (per-session CPU arena, CUDA).
struct OwnArena {
  std::string prefix;  // "cpu:", "gpu:0:"; the arena is reported as prefix + the model's name
  Ort::MemoryInfo info{nullptr};
};
// ONNX element type <-> ebb DataType.
std::optional<DataType> FromOnnxType(ONNXTensorElementDataType type);
ONNXTensorElementDataType ToOnnxType(DataType type);
GraphOptimizationLevel ToOrtLevel(GraphOptimization level);

// A few of something per run (inputs, outputs, arenas), from a memory resource that Session::Run
// keeps on its stack (RunMemory), so that a run of a small model allocates for its tensors alone.
template <typename T>
using PerRun = std::pmr::vector<T>;

// Room on the stack for a run's lists; beyond it, the heap.
class RunMemory {
 public:
  RunMemory() = default;
  RunMemory(const RunMemory&) = delete;
  RunMemory& operator=(const RunMemory&) = delete;
  std::pmr::memory_resource* get() { return &resource_; }

 private:
  alignas(std::max_align_t) std::byte room_[2048];
  std::pmr::monotonic_buffer_resource resource_{room_, sizeof(room_)};
};

// The ORT values one run passes: wrappers lent by the session's TensorWrappers (given back when
// this goes) and values made for the run alone (string tensors, uncached wrappers, the outputs ORT
// allocates), released when this goes.
class RunValues {
 public:
  RunValues(TensorWrappers& wrappers, std::pmr::memory_resource* memory)
      : wrappers_(wrappers), lent_(memory), owned_(memory) {}
  ~RunValues() {
    if (!lent_.empty()) wrappers_.GiveBack(lent_.data(), lent_.size());
  }
  RunValues(const RunValues&) = delete;
  RunValues& operator=(const RunValues&) = delete;

  // A wrapper of the CPU tensor `t` (a fixed-size type). Throws Ort::Exception.
  OrtValue* Wrap(const Tensor& t) {
    bool kept = false;
    OrtValue* value = wrappers_.Lend(t, &kept);
    try {
      if (kept) {
        lent_.push_back(value);
      } else {
        owned_.emplace_back(value);
      }
    } catch (...) {  // no room to note it (out of memory): given back or released here
      if (kept) {
        wrappers_.GiveBack(&value, 1);
      } else {
        Ort::GetApi().ReleaseValue(value);
      }
      throw;
    }
    return value;
  }
  // `value`, owned here from now on.
  OrtValue* Own(Ort::Value value) {
    owned_.push_back(std::move(value));
    return owned_.back();
  }

 private:
  TensorWrappers& wrappers_;
  PerRun<const OrtValue*> lent_;
  PerRun<Ort::Value> owned_;
};

// A run's inputs in model order, checked against what the model declares. `tensors` are the
// caller's: they outlive the PreparedInputs.
struct PreparedInputs {
  PreparedInputs(TensorWrappers& wrappers, std::pmr::memory_resource* memory = std::pmr::get_default_resource())
      : names(memory), values(memory), tensors(memory), owner(wrappers, memory) {}
  PerRun<const char*> names;
  PerRun<const OrtValue*> values;
  PerRun<const Tensor*> tensors;
  RunValues owner;  // of `values`

  // Their shapes (the output shape cache's key), made when asked.
  std::vector<Shape> Shapes() const {
    std::vector<Shape> shapes;
    shapes.reserve(tensors.size());
    for (const Tensor* t : tensors) shapes.push_back(t->shape());
    return shapes;
  }
};

// `model` is the caller's name for the model (Session::name()) in every message.
Status PrepareInputs(const SessionState& s, const std::string& model, const std::vector<NamedTensor>& given,
                     PreparedInputs* out);

}  // namespace ebb::detail
