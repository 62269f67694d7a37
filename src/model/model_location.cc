#include "ebb/model_location.h"

#include <filesystem>
#include <system_error>

#include "port.h"

namespace ebb {

Result<ModelLocation> ResolveModel(const std::string& model, const std::string& models_dir,
                                   const std::string& models_dir_origin) {
  namespace fs = std::filesystem;
  // Paths are UTF-8 text (port::PathFromUtf8: on Windows a narrow path is read in the ANSI code page).
  using port::PathFromUtf8;
  using port::Utf8FromPath;
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
  const fs::path file = folder / "model.onnx";
  if (!fs::is_regular_file(file, ec)) return NotFound("model folder '" + Utf8FromPath(folder) + "' has no model.onnx");
  const std::string folder_text = Utf8FromPath(folder);
  auto config = LoadModelConfig(folder_text, folder_text);  // config.json confined to its folder
  if (!config.ok()) return config.status();
  fs::path named = fs::absolute(folder, ec).lexically_normal();
  if (!named.has_filename()) named = named.parent_path();  // "models/convnet/"
  return ModelLocation{Utf8FromPath(file), folder_text, Utf8FromPath(named.filename()), std::move(config).value()};
}

std::string DeviceFor(const std::string& requested, const ModelLocation& model) {
  if (!requested.empty() && requested != "auto") return requested;
  return model.config.device.empty() ? "auto" : model.config.device;
}

}  // namespace ebb
