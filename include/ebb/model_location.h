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
// A model a remote caller names by a path (ModelMesh's loadModel, KServe's
// --model-dir) is resolved by ResolveModelFile instead, confined to a root:
//   a file                    that file (model.onnx, any name: ORT reads it)
//   a folder with model.onnx  that file
//   a folder with exactly one *.onnx file    that file
//   a folder of version folders (1/model.onnx, 3/model.onnx, ...)
//                             the highest version
// and the path and the file chosen must resolve inside the root (ResolveUnder,
// ebb/confined_path.h: links and ".." resolved first).
//
// What a model folder holds (its model.onnx, *.onnx files, version folders,
// each file checked against a root when one is given) is ReadModelFolder's one
// listing, which ResolveModel, ResolveModelFile and the server's repository
// (whose folders may serve several versions) all read.
//
// Thread safety: plain values; the functions are reentrant.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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

// A model file named by a path, confined to a root.
struct ModelFile {
  std::string path;           // real path of the model file
  std::string version = "1";  // the version folder's number, else "1"
  std::string root;           // real path of the root it was confined to (the files beside it are too)
};

// `path` (absolute, or relative to `root`) resolved to a model file under
// `root`, chosen as above. Nothing is loaded.
// Errors: kInvalidArgument (an empty path; the path, or the file chosen,
// resolving outside the root), kFailedPrecondition (no root, nothing at the
// path, a folder that holds no model as above or several *.onnx files).
Result<ModelFile> ResolveModelFile(const std::string& root, const std::string& path);

// One file of a model folder, and whether it may be read.
struct ModelFolderFile {
  std::string path;  // the folder's path joined with its name; its real path when confined
  Status confined;   // OK, or (with a root) why it is refused: it resolves outside the root
};

// What a model folder holds. Files are regular files, links to them followed.
struct ModelFolderLayout {
  std::optional<ModelFolderFile> model_onnx;  // <folder>/model.onnx
  std::vector<ModelFolderFile> onnx_files;    // its other *.onnx files, by name
  struct Version {
    int64_t number;
    ModelFolderFile model_onnx;               // <folder>/<number>/model.onnx
  };
  std::vector<Version> versions;              // version folders with a model.onnx, ascending
  std::vector<std::string> empty_versions;    // version folders without one (or, with a root, leading out
                                              // of the folder or being it), by name
};

// Lists `folder`. With `root` ("" = none: links followed wherever they lead),
// each file is resolved inside `root` (ResolveUnder; `root_name` names the
// root in the refusal, "" by its path), and a version folder must lead inside
// `folder`, not to `folder` itself. Reads names only (no file is opened); an
// unreadable folder lists nothing.
ModelFolderLayout ReadModelFolder(const std::string& folder, const std::string& root = "",
                                  const std::string& root_name = "");

// The file at `path` when it is a regular file (links followed), resolved inside
// `root` when one is given (as ReadModelFolder's files); nullopt when there is
// none: a file of a model folder that ReadModelFolder does not list by name (an
// OCR pipeline's detector).
std::optional<ModelFolderFile> ModelFileAt(const std::string& path, const std::string& root = "",
                                           const std::string& root_name = "");

// A version folder's name: a positive decimal number without leading zeros
// (at most 18 digits); nullopt for any other name.
std::optional<int64_t> VersionNumber(const std::string& name);

// The device to load `model` on: `requested` unless it is "auto" (or empty),
// else the folder config's `device`, else "auto".
std::string DeviceFor(const std::string& requested, const ModelLocation& model);

}  // namespace ebb
