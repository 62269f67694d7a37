#include "model_path.h"

#include <algorithm>
#include <filesystem>
#include <vector>

namespace ebb::server {
namespace fs = std::filesystem;

namespace {

// Whether canonical `path` is `root` or below it (component-wise, so "/models2" is not under "/models").
bool Inside(const fs::path& root, const fs::path& path) {
  auto r = root.begin(), p = path.begin();
  for (; r != root.end(); ++r, ++p) {
    if (r->empty()) continue;  // a trailing separator
    if (p == path.end() || *r != *p) return false;
  }
  return true;
}

bool IsVersionName(const std::string& name) {
  return !name.empty() && name.size() <= 18 && name[0] != '0' &&
         std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

Result<ModelFile> ResolveModelFile(const std::string& root_text, const std::string& path_text) {
  if (path_text.empty()) return InvalidArgument("empty model path");
  std::error_code ec;
  const fs::path root = fs::canonical(root_text, ec);
  if (ec) return FailedPrecondition("model root '" + root_text + "' does not exist");
  const fs::path given(path_text);
  const fs::path candidate = given.is_absolute() ? given : root / given;
  // Refuse before looking: a path whose text leaves the root says so even when nothing is there.
  if (!Inside(root, candidate.lexically_normal())) {
    return InvalidArgument("model path '" + path_text + "' is outside the model root " + root.string());
  }
  const fs::path real = fs::canonical(candidate, ec);
  if (ec) return FailedPrecondition("model path '" + path_text + "' does not exist under " + root.string());
  if (!Inside(root, real)) {
    return InvalidArgument("model path '" + path_text + "' resolves outside the model root " + root.string() + " (to " +
                           real.string() + ")");
  }
  auto confined = [&](const fs::path& file, const std::string& version) -> Result<ModelFile> {
    const fs::path resolved = fs::canonical(file, ec);
    if (ec || !fs::is_regular_file(resolved, ec)) {
      return FailedPrecondition("model file '" + file.string() + "' cannot be read");
    }
    if (!Inside(root, resolved)) {
      return InvalidArgument("model file '" + file.string() + "' resolves outside the model root " + root.string());
    }
    return ModelFile{resolved.string(), version, root.string()};
  };
  if (fs::is_regular_file(real, ec)) return ModelFile{real.string(), "1", root.string()};
  if (!fs::is_directory(real, ec)) {
    return FailedPrecondition("model path '" + path_text + "' is neither a file nor a folder");
  }
  if (fs::exists(real / "model.onnx", ec)) return confined(real / "model.onnx", "1");
  std::vector<fs::path> onnx;
  std::vector<std::pair<int64_t, fs::path>> versions;
  for (const auto& entry : fs::directory_iterator(real, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() == ".onnx" && entry.is_regular_file(ec)) onnx.push_back(entry.path());
    if (IsVersionName(name) && entry.is_directory(ec) && fs::exists(entry.path() / "model.onnx", ec)) {
      versions.emplace_back(std::stoll(name), entry.path() / "model.onnx");
    }
  }
  if (onnx.size() == 1) return confined(onnx.front(), "1");
  if (onnx.size() > 1) {
    return FailedPrecondition("model folder '" + path_text + "' holds " + std::to_string(onnx.size()) +
                              " .onnx files and no model.onnx: name the file");
  }
  if (!versions.empty()) {
    const auto& highest = *std::max_element(versions.begin(), versions.end());
    return confined(highest.second, std::to_string(highest.first));
  }
  return FailedPrecondition("model folder '" + path_text +
                            "' holds no model (model.onnx, one .onnx file, or version folders N/model.onnx)");
}

}  // namespace ebb::server
