#include "ebb/model_location.h"

#include <filesystem>
#include <system_error>

namespace ebb {

Result<ModelLocation> ResolveModel(const std::string& model, const std::string& models_dir,
                                   const std::string& models_dir_origin) {
  namespace fs = std::filesystem;
  if (model.empty()) return InvalidArgument("no model given");
  std::error_code ec;
  fs::path folder = model;
  if (!fs::is_directory(folder, ec)) {
    if (fs::exists(model, ec)) {
      if (!fs::is_regular_file(model, ec)) return InvalidArgument("model '" + model + "' is neither a file nor a folder");
      return ModelLocation{model, "", fs::path(model).stem().string(), ModelConfig{}};
    }
    const bool bare_name = !fs::path(model).has_parent_path();
    folder = fs::path(models_dir) / model;
    if (!bare_name || !fs::is_directory(folder, ec)) {
      return NotFound("model '" + model + "' not found: no such model file or model folder" +
                      (bare_name ? ", and no folder '" + model + "' under " + models_dir_origin + " '" + models_dir + "'"
                                 : ""));
    }
  }
  const fs::path file = folder / "model.onnx";
  if (!fs::is_regular_file(file, ec)) return NotFound("model folder '" + folder.string() + "' has no model.onnx");
  auto config = LoadModelConfig(folder.string(), folder.string());  // config.json confined to its folder
  if (!config.ok()) return config.status();
  fs::path named = fs::absolute(folder, ec).lexically_normal();
  if (!named.has_filename()) named = named.parent_path();  // "models/convnet/"
  return ModelLocation{file.string(), folder.string(), named.filename().string(), std::move(config).value()};
}

std::string DeviceFor(const std::string& requested, const ModelLocation& model) {
  if (!requested.empty() && requested != "auto") return requested;
  return model.config.device.empty() ? "auto" : model.config.device;
}

}  // namespace ebb
