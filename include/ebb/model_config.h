// ebb/model_config.h — how one model of a model folder is to be served.
//
// A model folder holds `model.onnx` (or numeric version folders, each with a
// `model.onnx`) and, optionally, `config.json` and `labels.txt`:
//
//   {"kind": "image_to_image", "device": "auto",
//    "tile": {"size": 128, "overlap": 8, "tiles_per_run": 1}, "scale": 2,
//    "keep_alive_ms": 300000, "pinned": false, "versions": [1, 3],
//    "graph_optimization": "all"}
//
// An OCR pipeline folder (kind "ocr", ebb/ocr.h) names its parts instead of
// holding a model.onnx: {"kind": "ocr", "detector": "../ppocr_det",
// "classifier": "../ppocr_cls", "recognizer": "../ppocr_rec", "dictionary":
// "keys.txt"}; its graph_optimization applies to all three parts.
//
// Every field is optional; unknown keys are errors. `ebb run` and `ebb serve`
// read it once, at the edge, into this struct. Integers are range-checked as
// they are read (tile size and overlap <= kMaxTileSide, tiles_per_run and scale
// in [1, kMaxTilesPerRun] / [1, kMaxScale], keep_alive_ms <= kMaxKeepAliveMs),
// so nothing downstream computes with an absurd value.
//
// The files beside a model are read confined to a root folder (the
// repository, the model root; the model's own folder for `ebb run`): a link
// out of it is refused, and so is anything but a regular file (a FIFO or a
// device is refused without blocking) and a file over its size limit
// (kMaxConfigFileBytes, kMaxLabelsFileBytes). The message names the file and
// the rule.
//
// Thread safety: plain values; the functions are reentrant.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ebb/memory_policy.h"
#include "ebb/status.h"
#include "ebb/tiler.h"

namespace ebb {

// The longest keep-alive accepted anywhere (config.json, a request's parameters.keep_alive,
// `ebb serve --keep-alive-ms`): 365 days in milliseconds. Negative values mean "never unload".
inline constexpr int64_t kMaxKeepAliveMs = int64_t{365} * 24 * 60 * 60 * 1000;
// Limits of config.json's tile fields.
inline constexpr int64_t kMaxTileSide = 1 << 16;
inline constexpr int64_t kMaxTilesPerRun = 1024;
inline constexpr int64_t kMaxScale = 64;
// The largest config.json read: a real one is well under 1 KiB; 64 KiB is also
// the limit on a load request's configuration parameter.
inline constexpr uint64_t kMaxConfigFileBytes = 64 * 1024;
// The largest labels.txt read, and the most lines kept from it: the largest
// label sets in use have tens of thousands of classes (ImageNet-21k: 21,843).
inline constexpr uint64_t kMaxLabelsFileBytes = 4 * 1024 * 1024;
inline constexpr size_t kMaxLabels = 1 << 18;

enum class ModelKind {
  kTensor,        // tensors in, tensors out (one run per request)
  kImageToImage,  // [N,C,H,W] in and out; frames run as one operation, tiled when `tile` is set
  kOcr,           // an OCR pipeline folder (ebb/ocr.h): encoded images in, lines of text out
};

// Kind "ocr": the pipeline's parts, paths relative to its folder (model
// folders holding model.onnx; the dictionary a text file).
struct OcrParts {
  std::string detector, classifier, recognizer, dictionary;
};

struct ModelConfig {
  ModelKind kind = ModelKind::kTensor;
  std::string device;               // "auto", "cpu", "cuda:N"; empty = the caller's default (--device)
  std::optional<TileOptions> tile;  // tiled operation when set (image_to_image only)
  // Idle time after which the model is unloaded; negative = never, 0 = right
  // after each request. Unset = the server's default.
  std::optional<int64_t> keep_alive_ms;
  bool pinned = false;              // never evicted to fit a memory budget
  // Which version folders a server serves: empty and !all_versions = only the
  // highest ("versions": [1, 3] lists them; "versions": "all" serves every one).
  std::vector<int64_t> versions;
  bool all_versions = false;
  OcrParts ocr;  // kind "ocr" only (all four required then)
  // ONNX Runtime's graph optimization level for this model (LoadOptions::graph_optimization);
  // unset = the policy's.
  std::optional<GraphOptimization> graph_optimization;
};

// Parses config.json text.
Result<ModelConfig> ParseModelConfig(std::string_view json_text);
// The config as config.json text with every field (ParseModelConfig reads it back).
std::string ModelConfigToJson(const ModelConfig& config);
// Reads `<folder>/config.json`, confined to `root` (the folder or one above
// it; "": not confined, a link is followed wherever it leads: the operator's
// repository without --confine-links); defaults when there is nothing at that path. Errors: the file's rules
// broken (kInvalidArgument, see above), or its content (ParseModelConfig's).
Result<ModelConfig> LoadModelConfig(const std::string& folder, const std::string& root);
// Reads `<folder>/labels.txt` (line i names class i; a trailing "\r" is
// dropped), confined to `root` as config.json; empty when there is nothing at
// that path. Errors: the file's rules broken, or more than kMaxLabels lines
// (kInvalidArgument).
Result<std::vector<std::string>> LoadModelLabels(const std::string& folder, const std::string& root);

}  // namespace ebb
