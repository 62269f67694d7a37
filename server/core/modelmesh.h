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
//                     The size answered (and ModelSize's) is the pool's
//                     charge, which includes the load's memory outside the
//                     pool's measurement (that spans the session's creation
//                     only): the repository's entry, the model's
//                     configuration and metric series, the call's own
//                     buffers. It is handed to the pool (SetOutsideBytes), so
//                     the models loaded together fit the capacity by the
//                     sizes ModelMesh is told, not only by the pool's own
//                     part. Measured on each load as the process's RSS growth
//                     over the whole LoadModel less the pool's part, when the
//                     pool ran nothing else meanwhile (no other load, no
//                     eviction, no run in flight at either end); otherwise
//                     (and as the estimate the load makes room for) the
//                     latest such measurement (0 before any). 0.05-0.31 MiB
//                     measured here: without it the sub-MiB models' sizes
//                     were 0.80-0.86 of the RSS their load adds, at the 20%
//                     goal's edge (`ebb bench modelmesh`, docs/server.md).
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
//   ModelSize         the model's charge now, with the load's memory outside
//                     the pool's measurement (above). The pool's charge is what the
//                     model holds loaded: its runs' memory is reserved per
//                     run (admission by memory), not part of it.
//                     kNotFound when unknown.
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
#include <optional>
#include <string>

#include "service.h"

namespace ebb::server {

// predictModelSize = file bytes x kPredictFactor + kPredictBaseBytes. Measured
// with `ebb bench modelmesh` on the bundled models and generated 10/100/300 MB
// conv models (docs/server.md, "KServe and ModelMesh"; actual = RSS growth over
// loadModel, what the model holds loaded): weight-dominated models need at
// most 1.11x their file (conv_10mb; 1.01-1.02 for 100/300 MB), the optimized
// OCR graphs 1.8x (ppocr_det 8.3 MiB for 4.5, ppocr_rec 18.4 MiB for 10.3),
// small models 0.7-3.8 MiB whatever their file; 1.5x + 16 MiB covers all of
// them (1.54x to 23x). An inference's memory (waifu2x_scale2x: 35 MiB for one
// 64x64 run, 2.3 MiB loaded) is not a model's size: runs reserve their own.
inline constexpr double kPredictFactor = 1.5;
inline constexpr int64_t kPredictBaseBytes = int64_t{16} << 20;

// The most a load's memory outside the pool's measurement is taken to be
// (LoadModel): a guard, so that something else that grew the process during a
// quiet load (a thread started, a scrape) cannot inflate every later size.
// 10x the largest measured (0.31 MiB).
inline constexpr int64_t kMaxOutsideBytes = int64_t{3} << 20;

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
  // A load's memory outside the pool's measurement: `measured` (clamped to
  // [0, kMaxOutsideBytes]) when given, which is remembered; else the latest
  // remembered.
  int64_t OutsideBytes(std::optional<int64_t> measured);

  InferenceService& core_;
  const ModelMeshOptions options_;
  std::mutex mu_;
  std::condition_variable loads_done_;
  std::map<std::string, int> loading_;  // loads in progress per id; guarded by mu_
  int64_t last_outside_ = 0;                // the latest measured; guarded by mu_
};

}  // namespace ebb::server
