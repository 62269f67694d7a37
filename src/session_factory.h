// Internal: builds a SessionState (an ORT session plus what ebb tracks about
// it) from a model file or bytes, applying the memory policy, resolving the
// device, and going through the optimized-model cache for CPU sessions.
#pragma once

#include <memory>
#include <string>

#include "ebb/device.h"
#include "model_file.h"
#include "session_state.h"

namespace ebb::detail {

struct SessionSpec {
  std::string name;
  std::string source_path;
  DeviceRequest device;
  bool strict_device = false;
  std::string model_sha256;  // the model's identity (session and optimized-model cache keys)
};

// Where the model comes from: its bytes in memory, or else the file at `path`,
// which ORT reads itself (ebb keeps no copy). For a file, `identity` is what
// was hashed: if the file changed by the time ORT has read it, the load fails
// with kUnavailable and nothing is cached.
struct ModelSource {
  const std::string* bytes = nullptr;
  std::string path;
  FileIdentity identity;
};

GraphOptimizationLevel ToOrtLevel(GraphOptimization level);

// The text of the session options that shape the optimized graph (part of the
// optimized-model cache key).
std::string GraphOptionsText(const MemoryPolicy& policy);

Result<std::unique_ptr<SessionState>> BuildSession(const std::shared_ptr<RuntimeContext>& ctx,
                                                   const ModelSource& source, const SessionSpec& spec);

}  // namespace ebb::detail
