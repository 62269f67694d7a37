// ebb/model_signature.h — a model's inputs and outputs, read from its file
// without loading it.
//
// ReadModelSignature reads the graph inputs and outputs (name, element type,
// shape) straight out of an ONNX file's protobuf encoding, without creating an
// ONNX Runtime session: it costs no arena, no weights in memory, and cannot
// evict anything, so a server can describe a model it has not loaded.
// Initializers listed among the graph inputs (IR < 4) are left out, as ONNX
// Runtime leaves them out of a session's inputs; symbolic and unknown
// dimensions are -1. For the models a session can be built from, the result
// equals Session::inputs() / outputs() (tests/model_signature_test.cc checks
// every bundled model). Large tensors are skipped, not read.
//
// Thread safety: a pure function of the file.
#pragma once

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

}  // namespace ebb
