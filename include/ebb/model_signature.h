// ebb/model_signature.h — a model's inputs and outputs, and the files it
// reads, read from its file without loading it.
//
// ReadModelSignature reads the graph inputs and outputs (name, element type,
// shape) straight out of an ONNX file's protobuf encoding, without creating an
// ONNX Runtime session: it costs no arena, no weights in memory, and cannot
// evict anything, so a server can describe a model it has not loaded.
// Initializers listed among the graph inputs (IR < 4) are left out, as ONNX
// Runtime leaves them out of a session's inputs; symbolic and unknown
// dimensions are -1. For the models a session can be built from, the result
// equals Session::inputs() / outputs() (tests/unit/model/model_signature_test.cc checks
// every bundled model). Large tensors are skipped, not read.
//
// ReadModelFiles lists the files a model's graph reads: the model file and
// every ONNX external-data file its tensors name (weights kept beside
// model.onnx, e.g. by onnx.save_model(..., save_as_external_data=True)), with
// their total size, again from the encoding alone. Each external-data file is
// checked as Runtime::Load checks it: a regular, non-empty file inside the
// model file's folder (no absolute location, no "..", no link out of it).
//
// Thread safety: pure functions of the files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ebb/session.h"
#include "ebb/status.h"

namespace ebb {

struct ModelSignature {
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
};

// Errors: kNotFound (no such file), kInvalidArgument (not an ONNX model, a
// truncated one, or a tensor type ebb does not support).
Result<ModelSignature> ReadModelSignature(const std::string& path);

struct ModelFiles {
  // The external-data files, each once, in the order the model first names
  // them: the model file's folder joined with each location (what ONNX
  // Runtime opens). Empty for a model kept in one file.
  std::vector<std::string> external_data;
  // The model file's size plus the external-data files'.
  int64_t total_bytes = 0;
};

// Errors: kNotFound (no model file), kFailedPrecondition (an external-data
// file missing), kInvalidArgument (not an ONNX model; an external-data location that is
// absolute, leaves the model's folder, or names a link out of it, a folder,
// or an empty file).
Result<ModelFiles> ReadModelFiles(const std::string& path);

}  // namespace ebb
