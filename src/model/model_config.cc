#include "ebb/model_config.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <utility>

#include "file_access.h"

namespace ebb {
namespace {

using nlohmann::json;

// An integer JSON value in [min, max] (unsigned values beyond int64 included in the check).
Result<int64_t> ReadInteger(const json& value, const std::string& name, int64_t min, int64_t max) {
  const auto range = "config." + name + " must be an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (value.is_number_unsigned()) {
    const auto u = value.get<uint64_t>();
    if (!std::in_range<int64_t>(u) || static_cast<int64_t>(u) > max) return InvalidArgument(range);
    return static_cast<int64_t>(u);
  }
  if (!value.is_number_integer()) return InvalidArgument(range);
  const auto v = value.get<int64_t>();
  if (v < min || v > max) return InvalidArgument(range);
  return v;
}

Status ReadTile(const json& j, TileOptions* tile) {
  if (!j.is_object()) return InvalidArgument("config.tile must be an object");
  for (const auto& [key, value] : j.items()) {
    const bool per_run = key == "tiles_per_run";
    Result<int64_t> v = ReadInteger(value, "tile." + key, per_run ? 1 : 0, per_run ? kMaxTilesPerRun : kMaxTileSide);
    if (!v.ok()) return v.status();
    if (key == "size") {
      tile->tile = *v;
    } else if (key == "overlap") {
      tile->overlap = *v;
    } else if (per_run) {
      tile->tiles_per_run = static_cast<int>(*v);
    } else {
      return InvalidArgument("unknown key 'config.tile." + key + "'");
    }
  }
  return PlanTiles(1, 1, *tile).status();  // validates the combination
}

Status ReadVersions(const json& value, ModelConfig* c) {
  if (value == "all") {
    c->all_versions = true;
    return Status::Ok();
  }
  const char* what = "config.versions must be \"all\" or a non-empty list of version numbers (positive integers)";
  if (!value.is_array() || value.empty()) return InvalidArgument(what);
  for (const json& v : value) {
    if (!v.is_number_integer() || v.get<int64_t>() < 1) return InvalidArgument(what);
    c->versions.push_back(v.get<int64_t>());
  }
  return Status::Ok();
}

Status ReadField(const std::string& key, const json& value, ModelConfig* c) {
  if (key == "kind") {
    if (value == "image_to_image") {
      c->kind = ModelKind::kImageToImage;
    } else if (value == "tensor") {
      c->kind = ModelKind::kTensor;
    } else if (value == "ocr") {
      c->kind = ModelKind::kOcr;
    } else {
      return InvalidArgument("config.kind must be \"tensor\", \"image_to_image\" or \"ocr\"");
    }
  } else if (key == "detector" || key == "classifier" || key == "recognizer" || key == "dictionary") {
    if (!value.is_string()) return InvalidArgument("config." + key + " must be a string");
    (key == "detector" ? c->ocr.detector : key == "classifier" ? c->ocr.classifier
     : key == "recognizer" ? c->ocr.recognizer : c->ocr.dictionary) = value.get<std::string>();
  } else if (key == "device") {
    if (!value.is_string()) return InvalidArgument("config.device must be a string");
    c->device = value.get<std::string>();
  } else if (key == "tile") {
    TileOptions tile;
    EBB_RETURN_IF_ERROR(ReadTile(value, &tile));
    tile.scale = c->tile ? c->tile->scale : 0;
    c->tile = tile;
  } else if (key == "scale") {
    Result<int64_t> scale = ReadInteger(value, "scale", 1, kMaxScale);
    if (!scale.ok()) return scale.status();
    if (!c->tile) c->tile = TileOptions{};
    c->tile->scale = *scale;
  } else if (key == "keep_alive_ms") {
    Result<int64_t> ms = ReadInteger(value, "keep_alive_ms", std::numeric_limits<int64_t>::min(), kMaxKeepAliveMs);
    if (!ms.ok()) return ms.status();
    c->keep_alive_ms = *ms;
  } else if (key == "pinned") {
    if (!value.is_boolean()) return InvalidArgument("config.pinned must be true or false");
    c->pinned = value.get<bool>();
  } else if (key == "versions") {
    return ReadVersions(value, c);
  } else if (key == "graph_optimization") {
    std::optional<GraphOptimization> level =
        value.is_string() ? ParseGraphOptimization(value.get<std::string>()) : std::nullopt;
    if (!level) return InvalidArgument("config.graph_optimization must be \"all\", \"extended\", \"basic\" or \"disabled\"");
    c->graph_optimization = level;
  } else {
    return InvalidArgument("unknown key 'config." + key + "'");
  }
  return Status::Ok();
}

}  // namespace

Result<ModelConfig> ParseModelConfig(std::string_view json_text) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("config.json is not a JSON object");
  ModelConfig config;
  bool has_tile = j.contains("tile");
  for (const auto& [key, value] : j.items()) EBB_RETURN_IF_ERROR(ReadField(key, value, &config));
  if (!has_tile) config.tile.reset();  // "scale" alone does not make a model tiled
  const OcrParts& o = config.ocr;
  const bool any_part = !o.detector.empty() || !o.classifier.empty() || !o.recognizer.empty() || !o.dictionary.empty();
  if (config.kind == ModelKind::kOcr && (o.detector.empty() || o.classifier.empty() || o.recognizer.empty() ||
                                         o.dictionary.empty())) {
    return InvalidArgument("config of kind \"ocr\" needs detector, classifier, recognizer and dictionary");
  }
  if (config.kind != ModelKind::kOcr && any_part) {
    return InvalidArgument("config.detector, classifier, recognizer and dictionary are for kind \"ocr\" only");
  }
  return config;
}

std::string ModelConfigToJson(const ModelConfig& c) {
  const char* kind = c.kind == ModelKind::kImageToImage ? "image_to_image" : c.kind == ModelKind::kOcr ? "ocr" : "tensor";
  json j = {{"kind", kind}, {"pinned", c.pinned}};
  if (c.kind == ModelKind::kOcr) {
    j["detector"] = c.ocr.detector;
    j["classifier"] = c.ocr.classifier;
    j["recognizer"] = c.ocr.recognizer;
    j["dictionary"] = c.ocr.dictionary;
  }
  if (!c.device.empty()) j["device"] = c.device;
  if (c.tile) {
    j["tile"] = {{"size", c.tile->tile}, {"overlap", c.tile->overlap}, {"tiles_per_run", c.tile->tiles_per_run}};
    if (c.tile->scale) j["scale"] = c.tile->scale;
  }
  if (c.keep_alive_ms) j["keep_alive_ms"] = *c.keep_alive_ms;
  if (c.graph_optimization) j["graph_optimization"] = GraphOptimizationName(*c.graph_optimization);
  if (c.all_versions) {
    j["versions"] = "all";
  } else if (!c.versions.empty()) {
    j["versions"] = c.versions;
  }
  return j.dump();
}

namespace {

// The text of `<folder>/<name>` under the rules for files beside a model, or
// nullopt when there is nothing at that path. No root: a link is followed
// (what it resolves to is read under the other rules).
Result<std::optional<std::string>> ReadBesideModel(const std::string& folder, const std::string& root,
                                                    const char* name, uint64_t max_bytes) {
  std::string path = folder + "/" + name;
  if (root.empty()) {
    if (Result<std::string> real = port::RealPath(path); real.ok()) path = *real;
  }
  Result<std::string> text = detail::ReadCheckedFile(path, {.what = name, .root = root, .max_bytes = max_bytes});
  if (text.ok()) return std::optional<std::string>(std::move(text).value());
  if (text.status().code() == StatusCode::kNotFound) return std::optional<std::string>();
  return text.status();
}

}  // namespace

Result<ModelConfig> LoadModelConfig(const std::string& folder, const std::string& root) {
  auto text = ReadBesideModel(folder, root, "config.json", kMaxConfigFileBytes);
  if (!text.ok()) return text.status();
  if (!text->has_value()) return ModelConfig{};
  Result<ModelConfig> config = ParseModelConfig(**text);
  if (!config.ok()) return Status(config.status().code(), folder + "/config.json: " + config.status().message());
  return config;
}

Result<std::vector<std::string>> LoadModelLabels(const std::string& folder, const std::string& root) {
  auto text = ReadBesideModel(folder, root, "labels.txt", kMaxLabelsFileBytes);
  if (!text.ok()) return text.status();
  std::vector<std::string> labels;
  if (!text->has_value()) return labels;
  const std::string& all = **text;
  for (size_t begin = 0; begin < all.size();) {
    size_t end = all.find('\n', begin);
    if (end == std::string::npos) end = all.size();
    if (labels.size() == kMaxLabels) {
      return InvalidArgument(folder + "/labels.txt has more than " + std::to_string(kMaxLabels) +
                             " lines, the limit for labels.txt: refused");
    }
    std::string_view line(all.data() + begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    labels.emplace_back(line);
    begin = end + 1;
  }
  return labels;
}

}  // namespace ebb
