// The one model resolver (ebb/model_location.h): what a model folder holds (ReadModelFolder), a
// model as a person names it (ResolveModel) and as a remote caller does, confined to a root
// (ResolveModelFile). Confinement is ResolveUnder's (ebb/confined_path.h), on port::RealPath.
#include "ebb/model_location.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "ebb/confined_path.h"
#include "port.h"

namespace ebb {
namespace fs = std::filesystem;
// Paths are UTF-8 text (port::PathFromUtf8: on Windows a narrow path is read in the ANSI code page).
using port::PathFromUtf8;
using port::Utf8FromPath;

std::optional<ModelFolderFile> ModelFileAt(const std::string& path, const std::string& root,
                                           const std::string& root_name) {
  std::error_code ec;
  if (!fs::is_regular_file(PathFromUtf8(path), ec)) return std::nullopt;
  if (root.empty()) return ModelFolderFile{path, Status::Ok()};
  Result<std::string> real = ResolveUnder(root, path, root_name);
  if (!real.ok()) return ModelFolderFile{path, real.status()};
  return ModelFolderFile{*real, Status::Ok()};
}

std::optional<int64_t> VersionNumber(const std::string& name) {
  if (name.empty() || name.size() > 18 || name[0] == '0') return std::nullopt;
  if (!std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  return std::stoll(name);
}

ModelFolderLayout ReadModelFolder(const std::string& folder_text, const std::string& root,
                                  const std::string& root_name) {
  ModelFolderLayout layout;
  const fs::path folder = PathFromUtf8(folder_text);
  // `name` in `folder`, as ModelFileAt finds it.
  auto file_in = [&](const fs::path& in, const fs::path& name) {
    return ModelFileAt(Utf8FromPath(in / name), root, root_name);
  };
  layout.model_onnx = file_in(folder, "model.onnx");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const fs::path name = entry.path().filename();
    if (name.extension() == ".onnx" && name != "model.onnx") {
      if (auto file = file_in(folder, name)) layout.onnx_files.push_back(std::move(*file));
      continue;
    }
    const std::optional<int64_t> number = VersionNumber(Utf8FromPath(name));
    if (!number || !entry.is_directory(ec)) continue;
    std::optional<ModelFolderFile> file;
    if (root.empty() || ResolveBelow(folder_text, Utf8FromPath(name)).ok()) {
      file = file_in(folder / name, "model.onnx");
    }
    if (file) {
      layout.versions.push_back({*number, std::move(*file)});
    } else {
      layout.empty_versions.push_back(Utf8FromPath(name));
    }
  }
  std::sort(layout.onnx_files.begin(), layout.onnx_files.end(),
            [](const ModelFolderFile& a, const ModelFolderFile& b) { return a.path < b.path; });
  std::sort(layout.versions.begin(), layout.versions.end(),
            [](const ModelFolderLayout::Version& a, const ModelFolderLayout::Version& b) { return a.number < b.number; });
  std::sort(layout.empty_versions.begin(), layout.empty_versions.end());
  return layout;
}

Result<ModelLocation> ResolveModel(const std::string& model, const std::string& models_dir,
                                   const std::string& models_dir_origin) {
  if (model.empty()) return InvalidArgument("no model given");
  std::error_code ec;
  fs::path folder = PathFromUtf8(model);
  if (!fs::is_directory(folder, ec)) {
    if (fs::exists(folder, ec)) {
      if (!fs::is_regular_file(folder, ec)) return InvalidArgument("model '" + model + "' is neither a file nor a folder");
      return ModelLocation{model, "", Utf8FromPath(folder.stem()), ModelConfig{}};
    }
    const bool bare_name = !folder.has_parent_path();
    folder = PathFromUtf8(models_dir) / PathFromUtf8(model);
    if (!bare_name || !fs::is_directory(folder, ec)) {
      return NotFound("model '" + model + "' not found: no such model file or model folder" +
                      (bare_name ? ", and no folder '" + model + "' under " + models_dir_origin + " '" + models_dir + "'"
                                 : ""));
    }
  }
  const std::string folder_text = Utf8FromPath(folder);
  // The person's own folder: links followed (no root); its model.onnx only, which config.json is beside.
  const std::optional<ModelFolderFile> file = ReadModelFolder(folder_text).model_onnx;
  if (!file) return NotFound("model folder '" + folder_text + "' has no model.onnx");
  auto config = LoadModelConfig(folder_text, folder_text);  // config.json confined to its folder
  if (!config.ok()) return config.status();
  fs::path named = fs::absolute(folder, ec).lexically_normal();
  if (!named.has_filename()) named = named.parent_path();  // "models/convnet/"
  return ModelLocation{file->path, folder_text, Utf8FromPath(named.filename()), std::move(config).value()};
}

Result<ModelFile> ResolveModelFile(const std::string& root_text, const std::string& path_text) {
  if (path_text.empty()) return InvalidArgument("empty model path");
  Result<std::string> real_root = RealPath(root_text);
  if (!real_root.ok()) return FailedPrecondition("model root '" + root_text + "' does not exist");
  const std::string& root = *real_root;
  const std::string root_name = "the model root " + root;
  // Outside the root is kInvalidArgument, nothing there (or unreadable) kFailedPrecondition.
  auto refused = [](const std::string& shown, const Status& why) {
    const StatusCode code =
        why.code() == StatusCode::kInvalidArgument ? StatusCode::kInvalidArgument : StatusCode::kFailedPrecondition;
    return Status(code, shown + " " + why.message());
  };
  Result<std::string> real = ResolveUnder(root, path_text, root_name);
  if (!real.ok()) return refused("model path '" + path_text + "'", real.status());
  std::error_code ec;
  if (fs::is_regular_file(PathFromUtf8(*real), ec)) return ModelFile{*real, "1", root};
  if (!fs::is_directory(PathFromUtf8(*real), ec)) {
    return FailedPrecondition("model path '" + path_text + "' is neither a file nor a folder");
  }
  auto chosen = [&](const ModelFolderFile& file, const std::string& version) -> Result<ModelFile> {
    if (!file.confined.ok()) return refused("model file '" + file.path + "'", file.confined);
    return ModelFile{file.path, version, root};
  };
  const ModelFolderLayout layout = ReadModelFolder(*real, root, root_name);
  if (layout.model_onnx) return chosen(*layout.model_onnx, "1");
  if (layout.onnx_files.size() == 1) return chosen(layout.onnx_files.front(), "1");
  if (layout.onnx_files.size() > 1) {
    return FailedPrecondition("model folder '" + path_text + "' holds " + std::to_string(layout.onnx_files.size()) +
                              " .onnx files and no model.onnx: name the file");
  }
  if (!layout.versions.empty()) {
    const ModelFolderLayout::Version& highest = layout.versions.back();
    return chosen(highest.model_onnx, std::to_string(highest.number));
  }
  return FailedPrecondition("model folder '" + path_text +
                            "' holds no model (model.onnx, one .onnx file, or version folders N/model.onnx)");
}

std::string DeviceFor(const std::string& requested, const ModelLocation& model) {
  if (!requested.empty() && requested != "auto") return requested;
  return model.config.device.empty() ? "auto" : model.config.device;
}

}  // namespace ebb
