#include "ebb/device.h"

#include <charconv>

namespace ebb {

Result<DeviceRequest> DeviceRequest::Parse(std::string_view text) {
  if (text == "auto") return DeviceRequest{Kind::kAuto, 0};
  if (text == "cpu") return Cpu();
  if (text == "cuda") return Cuda(0);
  constexpr std::string_view kCudaPrefix = "cuda:";
  if (text.starts_with(kCudaPrefix)) {
    std::string_view digits = text.substr(kCudaPrefix.size());
    int index = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() && index >= 0) {
      return Cuda(index);
    }
  }
  return InvalidArgument("unknown device '" + std::string(text) + "' (expected auto, cpu or cuda:N)");
}

std::string DeviceRequest::ToString() const {
  switch (kind) {
    case Kind::kAuto: return "auto";
    case Kind::kCpu: return "cpu";
    case Kind::kCuda: return "cuda:" + std::to_string(index);
  }
  return "?";
}

std::string ResolvedDevice::ToString() const {
  return kind == DeviceKind::kCpu ? "cpu" : "cuda:" + std::to_string(index);
}

}  // namespace ebb
