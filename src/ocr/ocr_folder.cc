// The OCR pipeline's folder and result format (include/ebb/ocr.h): plain
// file and JSON work, built on every platform (the pipeline itself needs
// OpenCV; src/ocr/ocr.cc, or src/ocr/ocr_unavailable.cc where it is absent).
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ebb/ocr.h"

namespace ebb {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string ModelIn(const fs::path& dir) { return (dir / "model.onnx").string(); }

}  // namespace

Result<OcrModelFiles> ReadOcrFolder(const std::string& folder) {
  const fs::path dir(folder);
  const fs::path config = dir / "config.json";
  std::ifstream in(config);
  if (!in) return NotFound("no OCR pipeline config " + config.string());
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(config.string() + " is not a JSON object");
  if (j.value("kind", "") != "ocr") return InvalidArgument(config.string() + ": kind is not \"ocr\"");
  OcrModelFiles files;
  for (auto [key, out] : {std::pair{"detector", &files.detector}, std::pair{"classifier", &files.classifier},
                          std::pair{"recognizer", &files.recognizer}, std::pair{"dictionary", &files.dictionary}}) {
    if (!j.contains(key) || !j[key].is_string()) {
      return InvalidArgument(config.string() + ": \"" + key + "\" is missing or not a string");
    }
    const fs::path p = dir / j[key].get<std::string>();
    *out = std::string(key) == "dictionary" ? p.lexically_normal().string() : ModelIn(p.lexically_normal());
  }
  return files;
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
