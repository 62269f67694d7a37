// ebb/model_location.h — a model as a person names it: a folder, a file or a name.
//
// Every way into ebb that takes a model from a person (the `ebb` command's
// MODEL arguments, Python's Runtime.load and Runtime.unload) resolves it here,
// so each accepts the same three forms and answers the same errors:
//   - a model folder: its model.onnx, with its config.json when there is one
//     (read confined to the folder, strictly: an unknown key is an error);
//   - a model file: that file, with the default config;
//   - a bare name that is neither (no '/'): the folder of that name under the
//     models folder (`convnet` is models/convnet).
// So `models/ppocr_det`, `models/ppocr_det/model.onnx` and `ppocr_det` are the
// same model. Resolving reads the file system only; nothing is loaded.
//
// Thread safety: plain values; ResolveModel is reentrant.
#pragma once

#include <string>

#include "ebb/model_config.h"
#include "ebb/status.h"

namespace ebb {

struct ModelLocation {
  std::string path;    // the model file to load
  std::string folder;  // its model folder; "" for a bare file
  std::string name;    // the folder's name, or the file's stem
  ModelConfig config;  // the folder's config.json; the defaults for a bare file or a folder without one
};

// Resolves `model` in the three forms above; a bare name is looked up under
// `models_dir`. `models_dir_origin` says in an error where that folder came from
// ("--models" for the command line, "models=" for Python).
// Errors: kNotFound (no such file or folder, or a folder without model.onnx),
// kInvalidArgument (empty, something that is neither a file nor a folder, or a
// broken config.json, named with the file).
Result<ModelLocation> ResolveModel(const std::string& model, const std::string& models_dir = "models",
                                   const std::string& models_dir_origin = "the models folder");

// The device to load `model` on: `requested` unless it is "auto" (or empty),
// else the folder config's `device`, else "auto".
std::string DeviceFor(const std::string& requested, const ModelLocation& model);

}  // namespace ebb
