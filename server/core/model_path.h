// server/core/model_path.h — a model file named by a path, confined to a root.
//
// ModelMesh's loadModel names a model by a path (a file, or a folder the
// puller wrote), and KServe mounts a model folder (--model-dir); both must
// resolve to one model file INSIDE a root folder, whatever the path says:
// symlinks and ".." are resolved first (std::filesystem::canonical), and the
// result must be the root or below it.
//
// What a path may name:
//   a file                    that file (model.onnx, any name: ORT reads it)
//   a folder with model.onnx  that file
//   a folder with exactly one *.onnx file    that file
//   a folder of version folders (1/model.onnx, 3/model.onnx, ...)
//                             the highest version; `version` says which
// Whatever is chosen must itself resolve inside the root (a model.onnx that
// is a link out of it is refused).
//
// Errors (no load attempted in any case): kInvalidArgument (an empty path, a
// path resolving outside the root), kFailedPrecondition (nothing at the path,
// or a folder that holds no model as above, or several *.onnx files).
// Pure functions of the file system; thread-safe.
#pragma once

#include <string>

#include "ebb/status.h"

namespace ebb::server {

struct ModelFile {
  std::string path;           // canonical path of the model file
  std::string version = "1";  // the version folder's number, else "1"
  std::string root;           // canonical root it was confined to (the files beside it are too)
};

// `path` (absolute, or relative to `root`) resolved to a model file under `root`.
Result<ModelFile> ResolveModelFile(const std::string& root, const std::string& path);

}  // namespace ebb::server
