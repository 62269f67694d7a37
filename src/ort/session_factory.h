// Internal: builds a SessionState (an ORT session plus what ebb tracks about
// it) from a model file or bytes, applying the memory policy, resolving the
// device, and going through the optimized-model cache for CPU sessions.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ebb/device.h"
#include "external_data.h"
#include "model_file.h"
#include "session_state.h"

namespace ebb::detail {

struct SessionSpec {
  std::string name;
  std::string source_path;
  DeviceRequest device;
  bool strict_device = false;
  // The model's identity (session and optimized-model cache keys): its file's
  // SHA-256, or with external data the hash over every file (external_data.h).
  std::string model_sha256;
  // The graph optimization level: LoadOptions::graph_optimization, else the policy's.
  GraphOptimization graph_optimization = GraphOptimization::kExtended;
};

// Where the model comes from: its bytes in memory, or else the file at `path`,
// which ORT reads itself (ebb keeps no copy), with the external-data files it
// names. For a file, `identity` and `external` are what was hashed: if any of
// them changed by the time ORT has read it, the load fails with kUnavailable
// and nothing is cached.
struct ModelSource {
  const std::string* bytes = nullptr;
  std::string path;
  FileIdentity identity;
  std::vector<ExternalDataFile> external;
};

// The text of the session options that shape the optimized graph (part of the
// optimized-model cache key).
std::string GraphOptionsText(GraphOptimization level);

Result<std::unique_ptr<SessionState>> BuildSession(const std::shared_ptr<RuntimeContext>& ctx,
                                                   const ModelSource& source, const SessionSpec& spec);

}  // namespace ebb::detail
