// The OCR pipeline's folder and result format (include/ebb/ocr.h): plain
// file and JSON work, built on every platform (the pipeline itself needs
// OpenCV; src/ocr/ocr.cc, or src/ocr/ocr_unavailable.cc where it is absent).
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ebb/model_config.h"
#include "ebb/ocr.h"

namespace ebb {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string ModelIn(const fs::path& dir) { return (dir / "model.onnx").string(); }

}  // namespace

Result<OcrModelFiles> ReadOcrFolder(const std::string& folder) {
  const fs::path dir(folder);
  const fs::path path = dir / "config.json";
  std::error_code ec;
  if (!fs::exists(path, ec)) return NotFound("no OCR pipeline config " + path.string());
  // config.json's rules (a regular file, at most kMaxConfigFileBytes; the message names the file).
  Result<ModelConfig> config = LoadModelConfig(folder, "");
  if (!config.ok()) return InvalidArgument(config.status().message());
  if (config->kind != ModelKind::kOcr) return InvalidArgument(path.string() + ": kind is not \"ocr\"");
  const OcrParts& parts = config->ocr;
  auto model_in = [&](const std::string& part) { return ModelIn((dir / part).lexically_normal()); };
  return OcrModelFiles{model_in(parts.detector), model_in(parts.classifier), model_in(parts.recognizer),
                       (dir / parts.dictionary).lexically_normal().string(), config->graph_optimization};
}

bool IsOcrFolder(const std::string& folder) {
  std::ifstream in(fs::path(folder) / "config.json");
  if (!in) return false;
  json j = json::parse(in, nullptr, false);
  return !j.is_discarded() && j.is_object() && j.value("kind", "") == "ocr";
}

std::string OcrPagesToJson(const std::vector<OcrPage>& pages, const std::vector<std::string>& names) {
  json out = json::array();
  for (size_t i = 0; i < pages.size(); ++i) {
    json page = json::object();
    if (i < names.size()) page["image"] = names[i];
    json lines = json::array();
    for (const OcrLine& l : pages[i].lines) {
      json box = json::array();
      for (const auto& pt : l.box) box.push_back({pt[0], pt[1]});
      lines.push_back({{"text", l.text}, {"confidence", l.confidence}, {"box", box}});
    }
    page["lines"] = std::move(lines);
    out.push_back(std::move(page));
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace ebb
