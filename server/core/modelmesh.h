// server/core/modelmesh.h — ebb as a ModelMesh model runtime, typed.
//
// ModelMesh (KServe ModelMesh Serving) places models across pods by the
// sizes runtimes report and drives each runtime through the model-runtime
// SPI, mmesh.ModelRuntime (server/grpc/proto/model-runtime.proto; the gRPC
// encoding is server/grpc/modelmesh_api.h). This class is its logic over the
// server core: models are attached to the repository (ModelRepository::
// Attach) under the model id and loaded by its ModelPool, so ModelMesh's
// models share the budget, the measured charges, eviction and the v2
// inference service with every other model of `ebb serve`.
//
//   RuntimeStatus     unloads every loaded model and forgets the attached
//                     ones (ModelMesh asks once, at its start: anything loaded
//                     then is left over from before), then reports READY,
//                     the capacity (the pool's CPU budget), loading
//                     concurrency 1 (the pool loads one model at a time so
//                     each charge is its own), the loading timeout, the
//                     default model size and ebb's version.
//   LoadModel         resolves the path under the model root (ResolveModelFile:
//                     kInvalidArgument / kFailedPrecondition, nothing loaded),
//                     attaches and loads it, and returns its measured charge.
//                     When the budget cannot fit it the pool evicts idle
//                     models, least recently used first (they stay attached
//                     and reload on their next request); kResourceExhausted
//                     when models in flight or pinned hold the budget, or
//                     the file alone exceeds it (refused before loading). A failed load
//                     leaves nothing attached. A load whose caller went away
//                     (`cancelled`) is undone when it ends and answers
//                     kCancelled.
//   UnloadModel       waits for a load of the same id still in progress, then
//                     unloads and forgets the model; OK for an unknown id
//                     (ModelMesh sends it after a cancelled load, and expects
//                     it to be idempotent). So a cancelled load followed by
//                     its unload leaves nothing loaded, in either order.
//   PredictModelSize  file size x kPredictFactor + kPredictBaseBytes, from a
//                     stat of the files (no load; the factor is measured by
//                     `ebb bench modelmesh`, see docs/server.md): model.onnx
//                     and the external-data files it names (ReadModelFiles;
//                     one missing, or outside the model's folder, is the
//                     error a load would give).
//   ModelSize         the model's measured charge now (load growth + the
//                     largest operation peak seen). kNotFound when unknown.
//
// Model ids are model names: [A-Za-z0-9._-], not starting with '.'
// (ModelMesh's ids, e.g. "mnist__isvc-6b2eb0b8bf", are of this form); any
// other id is kInvalidArgument.
//
// Thread safety: every method may be called concurrently.
// REQUIRES: `core` outlives this object.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "service.h"

namespace ebb::server {

// predictModelSize = file bytes x kPredictFactor + kPredictBaseBytes. Measured
// with `ebb bench modelmesh` on the bundled models and generated 10/100/300 MB
// conv models (docs/server.md, "KServe and ModelMesh"; actual = RSS growth over
// the load, or the peak of one inference if higher): weight-dominated models
// need at most 1.46x their file (conv_10mb; 1.02-1.03 for 100/300 MB), small
// models 0.7-1.8 MiB whatever their file, ppocr_det 12.4 MiB for a 4.5 MiB
// file; 1.5x + 16 MiB covers all of them. Not covered: models whose memory is
// their activations (waifu2x_scale2x: 127 MiB for one 64x64 inference, 1.1 MiB
// file); modelSize reports those once they ran.
inline constexpr double kPredictFactor = 1.5;
inline constexpr int64_t kPredictBaseBytes = int64_t{16} << 20;

struct ModelMeshOptions {
  std::string model_root;                                 // loadModel paths must resolve under it (--model-root)
  uint32_t model_loading_timeout_ms = 120'000;            // the 300 MB conv model loads in a few seconds here
  int64_t default_model_size_bytes = int64_t{128} << 20;  // most ONNX models ebb serves are below this
};

struct ModelMeshStatus {
  int64_t capacity_bytes = 0;  // the pool's CPU budget
  uint32_t max_loading_concurrency = 1;
  uint32_t model_loading_timeout_ms = 0;
  int64_t default_model_size_bytes = 0;
  std::string runtime_version;
};

struct ModelMeshLoad {
  std::string model_id;
  std::string model_type;  // not used: ebb serves ONNX (ModelMesh's "onnx")
  std::string model_path;  // a file or folder, absolute or relative to the model root
  std::string model_key;   // not used (storage details, for the puller)
};

class ModelMeshRuntime {
 public:
  ModelMeshRuntime(InferenceService& core, ModelMeshOptions options);

  ModelMeshStatus RuntimeStatus();
  // Returns the measured charge in bytes. `cancelled` says whether the caller
  // gave up (polled before and after the load).
  Result<int64_t> LoadModel(const ModelMeshLoad& request, const std::function<bool()>& cancelled);
  Status UnloadModel(const std::string& model_id);
  Result<int64_t> PredictModelSize(const ModelMeshLoad& request) const;
  Result<int64_t> ModelSize(const std::string& model_id);

  const ModelMeshOptions& options() const { return options_; }

 private:
  // Unloads and forgets, once no load of `model_id` is in progress.
  Status Forget(const std::string& model_id);

  InferenceService& core_;
  const ModelMeshOptions options_;
  std::mutex mu_;
  std::condition_variable loads_done_;
  std::map<std::string, int> loading_;  // loads in progress per id; guarded by mu_
};

}  // namespace ebb::server
