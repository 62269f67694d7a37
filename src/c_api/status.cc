// The C API's error channel, versions and element types (include/ebb/c.h).
#include <cstdlib>
#include <cstring>

#include "c_api.h"
#include "ebb/version.h"

namespace ebb::c_api {
namespace {

// Handed out when a status cannot be allocated; never freed.
ebb_status_t kOutOfMemory{StatusCode::kResourceExhausted, "out of memory"};

constexpr int kLastCode = static_cast<int>(StatusCode::kInternal);
constexpr int kLastType = static_cast<int>(DataType::kBytes);

}  // namespace

ebb_status_t* OutOfMemory() { return &kOutOfMemory; }

ebb_status_t* Error(StatusCode code, std::string message) {
  if (code == StatusCode::kOk) code = StatusCode::kInternal;  // an error is never OK
  ebb_status_t* s = new (std::nothrow) ebb_status_t{code, {}};
  if (!s) return OutOfMemory();
  try {
    s->message = std::move(message);
  } catch (const std::bad_alloc&) {
    delete s;
    return OutOfMemory();
  }
  return s;
}

ebb_status_t* ToC(const Status& status) {
  if (status.ok()) return nullptr;
  try {
    return Error(status.code(), status.message());
  } catch (const std::bad_alloc&) {
    return OutOfMemory();
  }
}

char* NewCString(const std::string& text) {
  char* copy = static_cast<char*>(std::malloc(text.size() + 1));
  if (copy) std::memcpy(copy, text.c_str(), text.size() + 1);
  return copy;
}

ebb_status_t* ReturnString(const std::string& text, char** out) {
  *out = NewCString(text);
  return *out ? nullptr : OutOfMemory();
}

ebb_status_t* NullArgument(const char* function, const char* argument) {
  try {
    return Error(StatusCode::kInvalidArgument, std::string(function) + ": " + argument + " is NULL");
  } catch (const std::bad_alloc&) {
    return OutOfMemory();
  }
}

Status FromC(ebb_status_t* status) {
  if (!status) return Status::Ok();
  Status s(status->code, status->message);
  ebb_status_destroy(status);
  return s;
}

std::optional<DataType> ToDataType(ebb_dtype_t dtype) {
  const int v = static_cast<int>(dtype);
  if (v < 0 || v > kLastType) return std::nullopt;
  return static_cast<DataType>(v);
}

ebb_dtype_t ToC(DataType type) { return static_cast<ebb_dtype_t>(static_cast<int>(type)); }

// The enums of c.h are ebb's, value for value.
static_assert(EBB_INVALID_ARGUMENT == static_cast<int>(StatusCode::kInvalidArgument));
static_assert(EBB_RESOURCE_EXHAUSTED == static_cast<int>(StatusCode::kResourceExhausted));
static_assert(EBB_INTERNAL == static_cast<int>(StatusCode::kInternal));
static_assert(EBB_FLOAT32 == static_cast<int>(DataType::kFloat32));
static_assert(EBB_BYTES == static_cast<int>(DataType::kBytes));
static_assert(EBB_POOL_READY == static_cast<int>(PoolState::kReady));

}  // namespace ebb::c_api

using namespace ebb;
using namespace ebb::c_api;

extern "C" {

int ebb_abi_version(void) { return EBB_ABI_VERSION; }

const char* ebb_version(void) { return Version(); }

const char* ebb_ort_version(void) {
  try {
    static const std::string version = OrtVersion();
    return version.c_str();
  } catch (...) {
    return "";
  }
}

void ebb_free(void* p) { std::free(p); }

ebb_code_t ebb_status_code(const ebb_status_t* status) {
  return status ? static_cast<ebb_code_t>(static_cast<int>(status->code)) : EBB_OK;
}

const char* ebb_status_message(const ebb_status_t* status) { return status ? status->message.c_str() : ""; }

ebb_status_t* ebb_status_create(ebb_code_t code, const char* message) {
  if (code == EBB_OK) return nullptr;
  const int v = static_cast<int>(code);
  const StatusCode c = v > 0 && v <= kLastCode ? static_cast<StatusCode>(v) : StatusCode::kInternal;
  try {
    return Error(c, message ? message : "");
  } catch (const std::bad_alloc&) {
    return OutOfMemory();
  }
}

void ebb_status_destroy(ebb_status_t* status) {
  if (status != OutOfMemory()) delete status;
}

const char* ebb_code_name(ebb_code_t code) {
  const int v = static_cast<int>(code);
  if (v < 0 || v > kLastCode) return "unknown";
  return StatusCodeName(static_cast<StatusCode>(v));
}

const char* ebb_dtype_name(ebb_dtype_t dtype) {
  std::optional<DataType> t = ToDataType(dtype);
  return t ? DataTypeName(*t) : "";
}

size_t ebb_dtype_size(ebb_dtype_t dtype) {
  std::optional<DataType> t = ToDataType(dtype);
  return t ? ElementSize(*t) : 0;
}

}  // extern "C"
