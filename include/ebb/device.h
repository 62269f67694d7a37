// ebb/device.h — what a caller asks for, and what a session really runs on.
//
// A DeviceRequest is "auto", "cpu" or "cuda:N". A session records the
// ResolvedDevice it ACTUALLY runs on: when CUDA cannot be used (no provider
// library, no driver) a non-strict request falls back to CPU and the reason is
// kept in `fallback_reason` (and logged); a strict request fails instead.
//
// Thread safety: plain values.
#pragma once

#include <string>
#include <string_view>

#include "ebb/status.h"

namespace ebb {

enum class DeviceKind { kCpu, kCuda };

struct DeviceRequest {
  enum class Kind { kAuto, kCpu, kCuda };
  Kind kind = Kind::kAuto;
  int index = 0;  // CUDA device ordinal for kCuda; 0 for kAuto

  static DeviceRequest Cpu() { return {Kind::kCpu, 0}; }
  static DeviceRequest Cuda(int index) { return {Kind::kCuda, index}; }

  // "auto", "cpu", "cuda", "cuda:N".
  static Result<DeviceRequest> Parse(std::string_view text);
  std::string ToString() const;
  bool operator==(const DeviceRequest&) const = default;
};

struct ResolvedDevice {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;
  // ORT's provider name: "CPUExecutionProvider" or "CUDAExecutionProvider".
  std::string provider = "CPUExecutionProvider";
  // Non-empty when the request asked for something else and ebb fell back.
  std::string fallback_reason;

  std::string ToString() const;  // "cpu", "cuda:0"
};

}  // namespace ebb
