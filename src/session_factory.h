// Internal: builds a SessionState (an ORT session plus what ebb tracks about
// it) from model bytes, applying the memory policy and resolving the device.
#pragma once

#include <memory>
#include <string>

#include "ebb/device.h"
#include "session_state.h"

namespace ebb::detail {

struct SessionSpec {
  std::string name;
  std::string source_path;
  DeviceRequest device;
  bool strict_device = false;
};

Result<std::unique_ptr<SessionState>> BuildSession(const std::shared_ptr<RuntimeContext>& ctx,
                                                   const std::string& bytes, const SessionSpec& spec);

}  // namespace ebb::detail
