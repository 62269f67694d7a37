// ebb/status.h — the one error channel of the library.
//
// Every fallible call in ebb returns a Status, or a Result<T> holding either a
// value or a non-OK Status. Nothing in the public API throws; exceptions from
// ONNX Runtime are caught at the one place that talks to it and turned into a
// Status with a readable message.
//
// Thread safety: Status and Result are plain values; distinct objects may be
// used from different threads freely.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace ebb {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller's input is wrong (shape, type, name, file)
  kNotFound,            // a model, file or tensor name does not exist
  kResourceExhausted,   // memory ran out (arena cap, device OOM, bad_alloc)
  kUnavailable,         // a device or provider cannot be used right now
  kFailedPrecondition,  // the object is not in a state that allows the call
  kCancelled,           // the caller asked to stop
  kInternal,            // ONNX Runtime or ebb failed in an unexpected way
};

// Short lower-case name of a code, e.g. "resource_exhausted".
const char* StatusCodeName(StatusCode code);

// Text a caller sent (a model or tensor name), as it goes into a message: whole up to `max` bytes,
// else its first `max` bytes and "... (N bytes)", so that an error never echoes a huge name back
// (a client then fails on the reply's size, and a log line grows without bound).
std::string Clip(std::string_view text, size_t max = 128);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "resource_exhausted: arena cap of 64 MiB reached ..."; "ok" when OK.
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// A value or the Status that explains why there is none.
// REQUIRES: value() only when ok(); constructing from an OK Status is a bug
// and yields an internal error.
template <typename T>
class [[nodiscard]] Result {
 public:
  // Implicit by design; a value moved in once (a by-value parameter would move it twice).
  Result(T&& value) : value_(std::move(value)) {}   // NOLINT
  Result(const T& value) : value_(value) {}         // NOLINT
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = Internal("Result built from an OK status without a value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace ebb

// Returns early from the enclosing function when `expr` yields a non-OK Status.
#define EBB_RETURN_IF_ERROR(expr)             \
  do {                                        \
    ::ebb::Status ebb_status_ = (expr);       \
    if (!ebb_status_.ok()) return ebb_status_; \
  } while (0)
