// The run boundary: Session::Run. See ebb/session.h for the contract.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "log.h"
#include "onnx_types.h"
#include "ort_api.h"
#include "session_state.h"

namespace ebb {
namespace detail {

// ORT's element types are ONNX's TensorProto.DataType numbers (onnx_types.h).
constexpr bool Same(ONNXTensorElementDataType ort, OnnxElementType onnx) {
  return static_cast<int>(ort) == static_cast<int>(onnx);
}
static_assert(Same(ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, kOnnxFloat) && Same(ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8, kOnnxUInt8) &&
              Same(ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8, kOnnxInt8) && Same(ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16, kOnnxUInt16) &&
              Same(ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16, kOnnxInt16) && Same(ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, kOnnxInt32) &&
              Same(ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, kOnnxInt64) && Same(ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING, kOnnxString) &&
              Same(ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL, kOnnxBool) && Same(ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, kOnnxFloat16) &&
              Same(ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE, kOnnxDouble) && Same(ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32, kOnnxUInt32) &&
              Same(ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64, kOnnxUInt64) &&
              Same(ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16, kOnnxBFloat16));

std::optional<DataType> FromOnnxType(ONNXTensorElementDataType type) { return DataTypeFromOnnx(type); }

ONNXTensorElementDataType ToOnnxType(DataType type) {
  return static_cast<ONNXTensorElementDataType>(OnnxTypeOf(type));
}

namespace {

bool ShapeMatches(const Shape& declared, const Shape& actual) {
  if (declared.size() != actual.size()) return false;
  for (size_t i = 0; i < declared.size(); ++i) {
    if (declared[i] >= 0 && declared[i] != actual[i]) return false;
  }
  return true;
}

std::string Names(const std::vector<TensorInfo>& infos) {
  std::string s;
  for (const TensorInfo& t : infos) s += (s.empty() ? "" : ", ") + t.name;
  return s;
}

// A new wrapper of the CPU tensor `t`, the caller's to release.
OrtValue* MakeWrapper(const Tensor& t) {
  static const Ort::MemoryInfo host = Ort::MemoryInfo::CreateCpu(OrtDeviceAllocator, OrtMemTypeDefault);
  OrtValue* value = nullptr;
  // ORT does not write to inputs; the const_cast only satisfies its C API.
  Ort::ThrowOnError(Ort::GetApi().CreateTensorWithDataAsOrtValue(host, const_cast<std::byte*>(t.data()), t.byte_size(),
                                                                 t.shape().data(), t.shape().size(),
                                                                 ToOnnxType(t.type()), &value));
  return value;
}

// A BYTES input as an ORT string tensor: ORT keeps strings as std::string, so
// they are copied (binary-safe) into a tensor from ORT's default CPU allocator.
Result<Ort::Value> MakeStringTensor(const Tensor& t, const std::string& name) {
  const std::vector<std::string_view> elements = t.strings();
  if (static_cast<int64_t>(elements.size()) != t.element_count()) {
    return InvalidArgument("input '" + name + "': malformed BYTES data");
  }
  try {
    Ort::AllocatorWithDefaultOptions allocator;
    Ort::Value value = Ort::Value::CreateTensor(allocator, t.shape().data(), t.shape().size(),
                                                ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING);
    for (size_t i = 0; i < elements.size(); ++i) {
      char* out = value.GetResizedStringTensorElementBuffer(i, elements[i].size());
      if (!elements[i].empty()) std::memcpy(out, elements[i].data(), elements[i].size());
    }
    return value;
  } catch (const Ort::Exception& e) {
    return StatusFromOrt(e, "input '" + name + "'", "CPU memory");
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory copying BYTES input '" + name + "'");
  }
}

// Copies an ORT string output into a caller-owned BYTES tensor.
Tensor CopyStringsOut(const Ort::Value& value, Shape shape) {
  const size_t count = value.GetTensorTypeAndShapeInfo().GetElementCount();
  std::vector<std::string> elements(count);
  for (size_t i = 0; i < count; ++i) elements[i] = value.GetStringTensorElement(i);
  return Tensor::FromStrings(std::move(shape), elements);
}

// Copies an ORT-allocated output into caller-owned memory.
Result<Tensor> CopyOut(const Ort::Value& value, const std::string& name) {
  auto info = value.GetTensorTypeAndShapeInfo();
  std::optional<DataType> type = FromOnnxType(info.GetElementType());
  if (!type) return InvalidArgument("output '" + name + "' has an element type ebb does not support");
  try {
    if (*type == DataType::kBytes) return CopyStringsOut(value, info.GetShape());
    Tensor t(*type, info.GetShape());
    if (t.byte_size()) std::memcpy(t.data(), value.GetTensorRawData(), t.byte_size());
    return t;
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory copying output '" + name + "'");
  } catch (const Ort::Exception& e) {
    return StatusFromOrt(e, "copying output '" + name + "'", "CPU memory");
  }
}

}  // namespace

TensorWrappers::~TensorWrappers() {
  for (Slot& slot : slots_) {
    if (slot.value) Ort::GetApi().ReleaseValue(slot.value);
  }
}

OrtValue* TensorWrappers::Lend(const Tensor& t, bool* kept) {
  *kept = false;
  const uint32_t misses = misses_.fetch_add(1, std::memory_order_relaxed);
  if (misses >= kMissesBeforePause && misses % kProbeEvery != 0) return MakeWrapper(t);  // paused
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Slot& slot : slots_) {
      if (slot.value && !slot.lent && slot.data == t.data() && slot.type == t.type() && slot.shape == t.shape()) {
        slot.lent = true;
        slot.used = ++lends_;
        misses_.store(0, std::memory_order_relaxed);
        *kept = true;
        return slot.value;
      }
    }
  }
  OrtValue* made = MakeWrapper(t);
  OrtValue* evicted = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot* free = nullptr;
    for (Slot& slot : slots_) {
      if (!slot.lent && (!free || slot.used < free->used)) free = &slot;
    }
    if (free) {
      try {
        free->shape = t.shape();
      } catch (const std::bad_alloc&) {
        return made;  // not kept: the caller's
      }
      evicted = std::exchange(free->value, made);
      free->data = t.data();
      free->type = t.type();
      free->lent = true;
      free->used = ++lends_;
      *kept = true;
    }
  }
  if (evicted) Ort::GetApi().ReleaseValue(evicted);
  return made;
}

void TensorWrappers::GiveBack(const OrtValue* const* values, size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < count; ++i) {
    for (Slot& slot : slots_) {
      if (slot.value == values[i]) slot.lent = false;
    }
  }
}

Status PrepareInputs(const SessionState& s, const std::string& model, const std::vector<NamedTensor>& given,
                     PreparedInputs* out) {
  for (const NamedTensor& t : given) {
    bool known = false;
    for (const TensorInfo& info : s.inputs) known |= info.name == t.name;
    if (!known) {
      return InvalidArgument("model '" + model + "' has no input named '" + Clip(t.name) + "' (its inputs: " +
                             Names(s.inputs) + ")");
    }
  }
  out->names.reserve(s.inputs.size());
  out->values.reserve(s.inputs.size());
  out->tensors.reserve(s.inputs.size());
  for (const TensorInfo& info : s.inputs) {
    const NamedTensor* match = nullptr;
    for (const NamedTensor& t : given) {
      if (t.name != info.name) continue;
      if (match) return InvalidArgument("input '" + info.name + "' is given more than once");
      match = &t;
    }
    if (!match) return InvalidArgument("model '" + model + "' needs input '" + info.name + "', which is missing");
    const Tensor& t = match->tensor;
    if (t.type() != info.type) {
      return InvalidArgument("input '" + info.name + "' of model '" + model + "' must be " +
                             DataTypeName(info.type) + ", got " + DataTypeName(t.type()));
    }
    if (!ShapeMatches(info.shape, t.shape())) {
      return InvalidArgument("input '" + info.name + "' of model '" + model + "' must have shape " +
                             ShapeToString(info.shape) + " (-1 = any), got " + ShapeToString(t.shape()));
    }
    out->names.push_back(info.name.c_str());
    if (t.type() == DataType::kBytes) {
      Result<Ort::Value> strings = MakeStringTensor(t, info.name);
      if (!strings.ok()) return strings.status();
      out->values.push_back(out->owner.Own(std::move(strings).value()));
    } else {
      out->values.push_back(out->owner.Wrap(t));
    }
    out->tensors.push_back(&t);
  }
  return Status::Ok();
}

namespace {

Status SelectOutputs(const SessionState& s, const std::string& model, const std::vector<std::string>& wanted,
                     PerRun<size_t>* index) {
  index->reserve(wanted.empty() ? s.outputs.size() : wanted.size());
  if (wanted.empty()) {
    for (size_t i = 0; i < s.outputs.size(); ++i) index->push_back(i);
    return Status::Ok();
  }
  for (const std::string& name : wanted) {
    size_t i = 0;
    while (i < s.outputs.size() && s.outputs[i].name != name) ++i;
    if (i == s.outputs.size()) {
      return InvalidArgument("model '" + model + "' has no output named '" + Clip(name) + "' (its outputs: " +
                             Names(s.outputs) + ")");
    }
    // As the server refuses it: each output once (outputs are few, a linear search is enough).
    if (std::find(index->begin(), index->end(), i) != index->end()) {
      return InvalidArgument("output '" + Clip(name) + "' of model '" + model + "' is requested twice");
    }
    index->push_back(i);
  }
  return Status::Ok();
}

// The idle timer that releases what this session's runs use: only when every
// arena it allocates from is one the timer can shrink (the shared CPU arena;
// not a CUDA arena, nor an env_allocator device pool).
IdleReleaser* IdleReleaserFor(const SessionState& s) {
  IdleReleaser* idle = s.ctx->idle();
  if (!idle || s.gates.empty() || s.device_pool) return nullptr;  // a device pool: released by its runs
  for (const auto& gate : s.gates) {
    if (!gate->can_trim()) return nullptr;
  }
  return idle;
}

// Output shapes for these inputs when they are known before running: the
// model declares them fully, or a run with the same input shapes saw them
// (copied into `*cached`). Null when not known.
const std::vector<Shape>* KnownOutputShapes(SessionState& s, const PreparedInputs& in, std::vector<Shape>* cached) {
  if (s.has_bytes_outputs) return nullptr;  // ORT keeps strings itself: they are always copied out
  if (s.static_output_shapes) return &s.output_shapes;
  return s.shape_cache_usable && s.shape_cache.Find(in.Shapes(), cached) ? cached : nullptr;
}

// Enters every arena the session allocates from; the run carries the release
// for those on which it is alone (see ArenaGate): `*carried` says which (a
// byte a flag: vector<bool>'s bits cost a loop to fill), and `*entries` what
// each gate saw as it entered. With `alone_until`: waits until no run is on any
// of them and enters each alone (a retry after running out of memory beside
// other runs); false, with nothing entered, when that deadline passed first.
bool EnterArenas(SessionState& s, RunRecord* record, PerRun<uint8_t>* carried_out, PerRun<ArenaGate::Entry>* entries,
                 std::optional<std::chrono::steady_clock::time_point> alone_until = std::nullopt) {
  record->release_spec.clear();
  record->release_deferred = false;
  PerRun<uint8_t>& carried = *carried_out;
  carried.assign(s.gates.size(), false);
  entries->assign(s.gates.size(), {});
  for (size_t i = 0; i < s.gates.size(); ++i) {
    if (!alone_until) {
      carried[i] = s.gates[i]->Enter(record->release_wanted, &(*entries)[i]);
    } else if (bool carry = false; s.gates[i]->EnterAlone(record->release_wanted, *alone_until, &carry)) {
      carried[i] = carry;
    } else {
      for (size_t k = 0; k < i; ++k) (void)s.gates[k]->Exit(false);
      return false;
    }
    if (carried[i]) {
      record->release_spec += (record->release_spec.empty() ? "" : ";") + s.gates[i]->spec();
    } else if (record->release_wanted) {
      record->release_deferred = true;
    }
  }
  if (!record->release_spec.empty()) ++s.releases;
  return true;
}

// Whether the releases this run carries (`carried`, from EnterArenas) include the shared CPU arena's.
bool CarriedSharedArena(const SessionState& s, const PerRun<uint8_t>& carried) {
  const ArenaGate* shared = s.ctx->shared_cpu_gate().get();
  for (size_t i = 0; i < s.gates.size(); ++i) {
    if (carried[i] && s.gates[i].get() == shared) return true;
  }
  return false;
}

// ORT's shrink list for the releases this run carries (`carried`, from EnterArenas): every carried
// arena's entry but the device arena's, which ORT's list cannot find and which is shrunk by a call
// after the run instead (SessionState::device_arena); `*shrink_device` says whether it was carried.
std::string OrtShrinkSpec(const SessionState& s, const PerRun<uint8_t>& carried, bool* shrink_device) {
  std::string spec;
  *shrink_device = false;
  for (size_t i = 0; i < s.gates.size(); ++i) {
    if (!carried[i]) continue;
    if (s.device_arena && s.gates[i].get() == s.device_arena_gate) {
      *shrink_device = true;
    } else {
      spec += (spec.empty() ? "" : ";") + s.gates[i]->spec();
    }
  }
  return spec;
}

// Gives the device arena's free regions back (OrtAllocator::Shrink, ORT 1.25+).
Status ShrinkDeviceArena(const SessionState& s) {
  try {
    Ort::UnownedAllocator(s.device_arena).Shrink();
  } catch (const Ort::Exception& e) {
    return StatusFromOrt(e, "shrinking the shared CUDA arena " + s.shared_device_arena, s.arena_desc);
  }
  return Status::Ok();
}

// Whether another run was on one of the session's arenas while this one was.
bool Overlapped(const SessionState& s, const PerRun<ArenaGate::Entry>& entries) {
  for (size_t i = 0; i < s.gates.size(); ++i) {
    if (s.gates[i]->Overlapped(entries[i])) return true;
  }
  return false;
}

// Leaves the arenas. A release still owed (deferred, or a region pinned by an
// ORT-allocated output during the shrink) stays pending; returns whether this
// run, the last one out, must trim the shared arena now.
bool LeaveArenas(SessionState& s, const RunRecord& record, const PerRun<uint8_t>& carried, bool outputs_pinned) {
  bool trim = false;
  for (size_t i = 0; i < s.gates.size(); ++i) {
    const bool still_wanted = (record.release_wanted && !carried[i]) ||
                              (carried[i] && outputs_pinned && s.gates[i]->can_trim());
    trim |= s.gates[i]->Exit(still_wanted);
  }
  return trim;
}

// One ORT run. With `known` output shapes the outputs are written into
// caller-owned tensors; without, ORT allocates them and they are copied out
// (and their shapes remembered for the next run with these input shapes).
// ORT's output Values are freed before returning, so before the arenas are left. With
// `reuse_buffers` (a run that does not end its operation) the caller-owned tensors take their
// bytes from Tensor::Reusable: the buffers the operation's previous outputs gave back.
Status RunOnce(SessionState& s, const std::string& model, const PreparedInputs& in,
               const PerRun<size_t>& out_index, const std::string& shrink_spec, const std::vector<Shape>* known,
               bool reuse_buffers, PerRun<Tensor>* results) {
  results->clear();
  std::pmr::memory_resource* const memory = results->get_allocator().resource();
  PerRun<const char*> out_names(memory);
  out_names.reserve(out_index.size());
  for (size_t i : out_index) out_names.push_back(s.output_names[i]);
  // Preallocated outputs' wrappers (lent by `owner`), or nulls where ORT allocates them (then `allocated`).
  PerRun<OrtValue*> values(known ? 0 : out_index.size(), nullptr, memory);
  values.reserve(out_index.size());
  RunValues owner(s.wrappers, memory);
  // What ORT allocates, owned (and released when this returns) as soon as the run ends: the room
  // for it is made before, so that taking it over cannot fail.
  PerRun<Ort::Value> allocated(memory);
  results->reserve(out_index.size());
  try {
    if (!known) allocated.reserve(out_index.size());
    for (size_t i = 0; known && i < out_index.size(); ++i) {
      const DataType type = s.outputs[out_index[i]].type;
      const Shape& shape = (*known)[out_index[i]];
      results->push_back(reuse_buffers ? Tensor::Reusable(type, shape) : Tensor(type, shape));
      values.push_back(owner.Wrap(results->back()));
    }
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("run of model '" + model + "': out of memory allocating its outputs");
  }
  try {
    InvokeOrtRun({s.session.get(), in.names.data(), in.values.data(), in.values.size(), out_names.data(),
                  values.data(), values.size(), shrink_spec});
  } catch (const Ort::Exception& e) {
    const std::string where = "run of model '" + model + "' on " + s.device.ToString();
    // ebb's own device pool says why it refused (ORT only sees a null block).
    if (std::string why = s.device_pool ? s.device_pool->TakeFailure() : ""; !why.empty()) {
      return ResourceExhausted(where + ": out of memory: " + why + " (ORT: " + e.what() + ")");
    }
    return StatusFromOrt(e, where, s.arena_desc);
  } catch (const std::exception& e) {  // e.g. std::bad_alloc from ORT's C++ glue
    return StatusFromMessage(ORT_FAIL, e.what(), "run of model '" + model + "'", s.arena_desc);
  }
  if (known) return Status::Ok();
  for (OrtValue* value : values) allocated.emplace_back(value);
  std::vector<Shape> seen(s.outputs.size());
  for (size_t k = 0; k < allocated.size(); ++k) {
    Result<Tensor> t = CopyOut(allocated[k], s.outputs[out_index[k]].name);
    if (!t.ok()) return t.status();
    seen[out_index[k]] = t->shape();
    results->push_back(std::move(t).value());
  }
  if (out_index.size() == s.outputs.size()) s.shape_cache.Insert(in.Shapes(), seen);
  return Status::Ok();
}

}  // namespace

SessionState::~SessionState() {
  session.reset();
  model_bytes.reset();
  OutputBuffers::Drop();
  if (ctx) ctx->TrimHeap(/*force=*/true);
}

}  // namespace detail

using detail::SessionState;

Session::Session(std::unique_ptr<SessionState> state)
    : state_(std::move(state)), name_(state_->name), source_path_(state_->source_path) {}
Session::Session(const Session& shared, std::string name, std::string source_path)
    : state_(shared.state_), name_(std::move(name)), source_path_(std::move(source_path)) {}
Session::~Session() = default;

const std::string& Session::name() const { return name_; }
const std::string& Session::source_path() const { return source_path_; }
const ResolvedDevice& Session::device() const { return state_->device; }
const std::vector<TensorInfo>& Session::inputs() const { return state_->inputs; }
const std::vector<TensorInfo>& Session::outputs() const { return state_->outputs; }
const LoadRecord& Session::load_record() const { return state_->load; }
uint64_t Session::run_count() const { return state_->runs; }
uint64_t Session::release_count() const { return state_->releases; }
int Session::in_flight() const { return state_->in_flight; }

std::string Session::metadata(const std::string& key) const {
  auto it = state_->metadata.find(key);
  return it == state_->metadata.end() ? "" : it->second;
}

std::vector<std::string> Session::release_targets() const {
  std::vector<std::string> specs;
  for (const auto& gate : state_->gates) specs.push_back(gate->spec());
  return specs;
}

bool Session::IsSameModel(const Session& other) const { return other.state_ == state_; }

bool Session::SharesArenaWith(const Session& other) const {
  if (other.state_ == state_) return true;
  for (const auto& mine : state_->gates) {
    for (const auto& theirs : other.state_->gates) {
      if (mine == theirs) return true;
    }
  }
  return false;
}

std::vector<ArenaStats> Session::ReadOwnArenas() const {
  std::vector<ArenaStats> stats;
  for (const detail::OwnArena& a : state_->own_arenas) {
    if (auto s = detail::ReadArenaStats(*state_->session, a.info, a.prefix + name_)) stats.push_back(*s);
  }
  return stats;
}

std::optional<ArenaStats> Session::ReadSharedDeviceArena() const {
  if (state_->shared_device_arena.empty()) return std::nullopt;
  for (ArenaStats& a : state_->ctx->ReadCudaArenas()) {
    if (a.name == state_->shared_device_arena) return std::move(a);
  }
  return std::nullopt;
}

Result<std::vector<NamedTensor>> Session::Run(const std::vector<NamedTensor>& inputs, const RunFlags& flags) {
  SessionState& s = *state_;
  const auto start = std::chrono::steady_clock::now();
  RunRecord record;
  record.sequence = ++s.runs;
  record.ends_operation = flags.ends_operation;
  ReleaseMode mode = flags.release.value_or(s.ctx->policy().release);
  detail::IdleReleaser* const idle = mode == ReleaseMode::kIdle ? detail::IdleReleaserFor(s) : nullptr;
  if (mode == ReleaseMode::kIdle && !idle) mode = ReleaseMode::kOperationEnd;  // no trim of its own arenas
  record.release_wanted = mode == ReleaseMode::kEveryRun || (mode == ReleaseMode::kOperationEnd && flags.ends_operation);

  auto finish = [&](Status status) {
    record.status = status.code();
    record.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (flags.observer) (*flags.observer)(record);
    if (status.code() == StatusCode::kResourceExhausted && s.on_exhausted) s.on_exhausted(name_);
    return status;
  };

  detail::RunMemory memory;  // the lists below, on the stack
  detail::PreparedInputs prepared(s.wrappers, memory.get());
  detail::PerRun<size_t> out_index(memory.get());
  if (Status st = detail::PrepareInputs(s, name_, inputs, &prepared); !st.ok()) return finish(st);
  if (Status st = detail::SelectOutputs(s, name_, flags.outputs, &out_index); !st.ok()) return finish(st);

  // Outputs of a run that ends no operation are written into the buffers earlier ones gave back; a
  // releasing run's are not (they outlive the release, and their buffers go back to the OS).
  const bool reuse_buffers = !record.release_wanted;
  detail::PerRun<Tensor> results(memory.get());
  detail::PerRun<uint8_t> carried(memory.get());
  detail::PerRun<detail::ArenaGate::Entry> entries(memory.get());
  // One run on the arenas, entered as `alone_until` says (see EnterArenas); whether it ran
  // beside another run is left in `overlapped`.
  bool overlapped = false;
  detail::IdleReleaser* const idle_releaser = s.ctx->idle();
  auto attempt = [&](std::optional<std::chrono::steady_clock::time_point> alone_until) -> Status {
    const uint64_t idle_mark = idle_releaser ? idle_releaser->Mark() : 0;  // before the arenas are entered
    if (!detail::EnterArenas(s, &record, &carried, &entries, alone_until)) {
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start).count();
      return Unavailable("run of model '" + name_ + "': it ran out of memory beside other runs on " + s.arena_desc +
                         " and waited " + std::to_string(waited) + " ms for them to end, to run alone; retry later");
    }
    ++s.in_flight;
    std::vector<Shape> cached;
    const std::vector<Shape>* known = detail::KnownOutputShapes(s, prepared, &cached);
    bool preallocate = known != nullptr;
    bool shrink_device = false;
    const std::string shrink_spec = detail::OrtShrinkSpec(s, carried, &shrink_device);
    Status status = detail::RunOnce(s, name_, prepared, out_index, shrink_spec, known, reuse_buffers, &results);
    if (!status.ok() && preallocate && status.code() != StatusCode::kResourceExhausted) {
      // The shapes written into may be wrong: a cached one (data-dependent outputs), or one the
      // model declares (a wrong declaration, which plain ORT runs). Run once more with ORT's
      // outputs; if that works, stop trusting where the shapes came from, for this model.
      const bool declared = s.static_output_shapes;
      if (!declared) s.shape_cache_usable = false;
      preallocate = false;
      status = detail::RunOnce(s, name_, prepared, out_index, shrink_spec, nullptr, reuse_buffers, &results);
      if (status.ok() && declared && s.static_output_shapes.exchange(false)) {
        detail::LogWarning("model '" + name_ + "' declares output shapes its runs do not have; its outputs are " +
                           "allocated by ONNX Runtime from now on");
      }
    }
    record.outputs_preallocated = preallocate;
    overlapped = !alone_until && detail::Overlapped(s, entries);
    if (shrink_device) {
      if (Status st = detail::ShrinkDeviceArena(s); !st.ok() && status.ok()) status = st;
    }
    const bool trim = detail::LeaveArenas(s, record, carried, /*outputs_pinned=*/!preallocate);
    --s.in_flight;
    if (record.release_wanted) {
      detail::OutputBuffers::Drop();                 // the operation ends: its kept buffers go too
      if (s.device_pool) s.device_pool->Release();  // and the device pool's kept blocks (env_allocator)
    }
    if (trim) {
      record.trimmed = true;
      if (Status st = s.ctx->TrimSharedArena(); !st.ok() && status.ok()) status = st;
    } else if (!record.release_spec.empty()) {
      s.ctx->TrimHeap();
    }
    // The shared CPU arena went back (this run carried its release, or trimmed it as the last one
    // out): the idle release pending for the runs that ended before this one entered is done.
    if (idle_releaser && (trim || detail::CarriedSharedArena(s, carried))) idle_releaser->Covered(idle_mark);
    return status;
  };
  Status status = attempt(std::nullopt);
  if (status.code() == StatusCode::kResourceExhausted && overlapped) {
    // Other runs held memory of its arenas: it may fit alone. It waits for them to end (runs that
    // arrive meanwhile wait behind it) and runs again alone; only a run that cannot fit alone
    // fails with kResourceExhausted (and drops the session).
    record.waited_alone = true;
    status = attempt(flags.memory_deadline.value_or(start + kWaitForMemory));
  }
  if (idle) idle->RanOn(state_);

  if (!status.ok()) return finish(status);
  std::vector<NamedTensor> named;
  named.reserve(results.size());
  for (size_t k = 0; k < results.size(); ++k) named.push_back({s.outputs[out_index[k]].name, std::move(results[k])});
  (void)finish(Status::Ok());
  return named;
}

}  // namespace ebb
