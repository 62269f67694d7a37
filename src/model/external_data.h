// Internal: ONNX external data — the files a model's graph reads besides the
// model file — found, confined, and made part of the model's identity.
//
// A tensor of an ONNX model may keep its bytes in another file: its
// TensorProto has data_location EXTERNAL and an external_data entry
// "location", a path relative to the folder of the model file (models past
// protobuf's 2 GB limit must; `onnx.save_model(..., save_as_external_data=
// True)` writes weights.bin beside model.onnx). ONNX Runtime opens those files
// itself while it creates the session, so whatever identifies a model (the
// session cache key, the optimized-model cache key, the "file changed while
// ORT read it" check) must cover them: the same model.onnx with other weights
// is another model.
//
// Rules, the same wherever a model is loaded from a file:
//   - every location is found by walking the model's protobuf encoding
//     (initializers, sparse initializers, tensors in node attributes, in
//     subgraphs and in functions); the weights are not read;
//   - each tensor's offset and length must be byte counts, and the file must
//     hold the bytes they name (its own size when no length is given): else
//     kInvalidArgument before ONNX Runtime reads anything;
//   - a location must name a regular, non-empty file inside the model file's
//     folder (the folder of the path as given, which is the folder ORT reads
//     from): an absolute location, one with "..", or a link that leads out of
//     the folder is refused, and so is a missing file;
//   - each file is hashed (SHA-256, with Sha256OfFile's memo: a file still for
//     2 s is not read again while its identity stays), and the model's identity
//     is the hash of the model file's hash and theirs. A model without external
//     data keeps its file's SHA-256 as its identity.
// Model bytes in memory have no folder: a model that names external data is
// refused there (ORT would look for the files in the working directory).
//
// Thread safety: free functions, reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ebb/status.h"
#include "model_file.h"

namespace ebb::detail {

// The external-data locations named by the ONNX model encoded in `data`, each
// once, in the order first named. Errors: kInvalidArgument (not an ONNX
// model; a tensor marked external that names no location, or an unreadable
// one).
Result<std::vector<std::string>> ExternalDataLocations(const void* data, size_t size);

// One external-data file as the model reads it: its location, how far into
// it the model's tensors read (the largest offset + length; a tensor that
// gives no length reads its own size, from its dims and data_type), and the
// tensor that reads that far (for messages).
struct ExternalDataExtent {
  std::string location;
  uint64_t end = 0;
  std::string tensor;
};
// The locations as ExternalDataLocations finds them, with their extents.
// Errors: those of ExternalDataLocations, and kInvalidArgument for an offset
// or length that is not a decimal byte count, or an end past 2^64.
Result<std::vector<ExternalDataExtent>> ExternalDataExtents(const void* data, size_t size);

// The path ORT opens for `location` of the model at `model_path` (its folder
// joined with the location), after the checks above. Errors:
// kFailedPrecondition (no such file: the model is there, a file it needs is
// not), kInvalidArgument (absolute, leaving the folder, a link out of it, not
// a regular file, empty).
Result<std::string> ResolveExternalDataFile(const std::string& model_path, const std::string& location);

// One external-data file of a model, as it was hashed.
struct ExternalDataFile {
  std::string location;   // as the model names it
  std::string path;       // what ORT opens: the model's folder joined with the location
  FileIdentity identity;  // of what was hashed
  std::string sha256;
};

// Finds, checks and hashes every external-data file of the model file at
// `model_path`, whose bytes hashed to `model_sha256` with identity
// `model_identity`, into `files`, and returns the model's identity (see above).
// The locations are remembered by the model's SHA-256 (a load of a model seen
// before does not walk it again); the files are checked and hashed each time.
// Errors: those of ExternalDataExtents and ResolveExternalDataFile,
// kInvalidArgument for a file shorter than a tensor reads, and kUnavailable when the model file read here is not the one hashed (it was
// replaced in between: load it again).
Result<std::string> IdentifyModelFiles(const std::string& model_path, const FileIdentity& model_identity,
                                       const std::string& model_sha256, std::vector<ExternalDataFile>* files);

// Whether every file is still what was hashed (same identity).
bool ExternalDataUnchanged(const std::vector<ExternalDataFile>& files);

}  // namespace ebb::detail
