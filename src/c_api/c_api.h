// What the files of the C API (include/ebb/c.h) share: the structs behind the
// opaque handles, the status conversions and the guard that keeps C++
// exceptions from crossing into C.
//
// The rule of this folder, as of python/: conversions only. Every behaviour is
// the library's, reached through include/ebb/ (nothing here includes another
// file of src/ or ONNX Runtime). A check made here is one the C++ API leaves to
// its caller as a REQUIRES (a NULL handle, a borrowed buffer's size and
// alignment), never one the library already makes.
#pragma once

#include <atomic>
#include <memory>
#include <new>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "ebb/c.h"
#include "ebb/memory_stats.h"
#include "ebb/model_pool.h"
#include "ebb/operation.h"
#include "ebb/runtime.h"
#include "ebb/session.h"
#include "ebb/status.h"
#include "ebb/tensor.h"

struct ebb_status_t {
  ebb::StatusCode code;
  std::string message;
};

struct ebb_tensor_t {
  ebb::Tensor tensor;
};

struct ebb_tensors_t {
  std::vector<std::string> names;
  std::vector<std::unique_ptr<ebb_tensor_t>> tensors;
};

struct ebb_runtime_t {
  std::shared_ptr<ebb::Runtime> runtime;
  std::string policy_json;  // MemoryPolicyToJson, written once
};

struct ebb_session_t {
  std::shared_ptr<ebb::Session> session;
  std::string device;  // ResolvedDevice::ToString(), kept for ebb_session_device
};

struct ebb_load_options_t {
  ebb::LoadOptions options;
};

struct ebb_memory_t {
  ebb::MemoryReading reading;
  std::string json;
};

struct ebb_control_t {
  std::stop_source stop;
  ebb_progress_fn progress = nullptr;
  void* user_data = nullptr;
};

struct ebb_operation_t {
  ebb::ScopedOperation operation;
};

struct ebb_pool_options_t {
  ebb::PoolOptions options;
  bool wait_events = false;  // ebb_pool_options_set_wait_events
};

// ModelPool::Create's pool: it keeps its runtime alive, and a lease keeps its pool.
struct ebb_pool_t {
  std::shared_ptr<ebb::ModelPool> pool;
};

struct ebb_lease_t {
  std::shared_ptr<ebb::ModelPool> pool;  // declared first: the pool outlives its lease
  std::optional<ebb::Lease> lease;
  ebb_session_t session;  // borrowed by the caller; destroyed before the lease
};

struct ebb_pool_snapshot_t {
  std::vector<ebb::ModelStatus> models;
};

namespace ebb::c_api {

// A status for C: NULL when OK. Never fails: when even the status cannot be
// allocated it is a static out-of-memory status (which ebb_status_destroy skips).
ebb_status_t* ToC(const Status& status);
ebb_status_t* Error(StatusCode code, std::string message);
// "ebb_session_run: session is NULL".
ebb_status_t* NullArgument(const char* function, const char* argument);
ebb_status_t* OutOfMemory();
// The Status of a C status, which is consumed (destroyed).
Status FromC(ebb_status_t* status);

// A copy of `text` the caller frees with ebb_free; NULL when out of memory.
char* NewCString(const std::string& text);
// *out = NewCString(text); an out-of-memory status when that fails.
ebb_status_t* ReturnString(const std::string& text, char** out);

// Runs `fn` (returning ebb_status_t*) with every exception turned into a status.
template <typename Fn>
ebb_status_t* Guard(const char* function, Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return OutOfMemory();
  } catch (const std::exception& e) {
    return Error(StatusCode::kInternal, std::string(function) + ": " + e.what());
  } catch (...) {
    return Error(StatusCode::kInternal, std::string(function) + ": unknown C++ exception");
  }
}

// ebb_dtype_t <-> DataType (the values are the same; out of range is nullopt).
std::optional<DataType> ToDataType(ebb_dtype_t dtype);
ebb_dtype_t ToC(DataType type);

// A view of a caller's tensor for one call: borrowed (no copy), except BYTES,
// whose serialisation is cloned (a BYTES Tensor cannot be borrowed).
Tensor View(const Tensor& tensor);

// The inputs of a run as NamedTensors over the caller's tensors.
// Errors: kInvalidArgument for NULL arrays or entries.
Result<std::vector<NamedTensor>> Inputs(const char* function, const char* const* names,
                                        const ebb_tensor_t* const* tensors, size_t count);
// Output names; NULL / 0 is none (all outputs). Errors: a NULL entry.
Result<std::vector<std::string>> Names(const char* function, const char* const* names, size_t count);
// Frames for a ready-made operation, as views.
Result<std::vector<Tensor>> Frames(const char* function, const ebb_tensor_t* const* frames, size_t count);

// A new list of the run's outputs (or of results, named "").
std::unique_ptr<ebb_tensors_t> ToList(std::vector<NamedTensor> outputs);
std::unique_ptr<ebb_tensors_t> ToList(std::vector<Tensor> results);
// A new handle on `session`.
std::unique_ptr<ebb_session_t> MakeSession(std::shared_ptr<Session> session);

// Operation options for `control` (may be null): its stop token, and a
// progress hook that calls its callback and cancels when that returns non-zero.
OperationOptions OptionsOf(ebb_control_t* control);

}  // namespace ebb::c_api
