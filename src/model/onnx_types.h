// Internal: ONNX element types (the TensorProto.DataType numbers of
// onnx/onnx.proto) <-> ebb's DataType. The numbers are ONNX's, read from model
// files (model_signature.cc); ONNX Runtime's ONNXTensorElementDataType uses
// the same ones (ort/session.cc converts through these and checks that it does).
#pragma once

#include <cstdint>
#include <optional>

#include "ebb/tensor.h"

namespace ebb::detail {

// The TensorProto.DataType numbers ebb has a DataType for (and UNDEFINED).
enum OnnxElementType : int32_t {
  kOnnxUndefined = 0,
  kOnnxFloat = 1,
  kOnnxUInt8 = 2,
  kOnnxInt8 = 3,
  kOnnxUInt16 = 4,
  kOnnxInt16 = 5,
  kOnnxInt32 = 6,
  kOnnxInt64 = 7,
  kOnnxString = 8,
  kOnnxBool = 9,
  kOnnxFloat16 = 10,
  kOnnxDouble = 11,
  kOnnxUInt32 = 12,
  kOnnxUInt64 = 13,
  kOnnxBFloat16 = 16,
};

// Any number (a model file's varint): nullopt for one ebb does not support.
std::optional<DataType> DataTypeFromOnnx(uint64_t element_type);
OnnxElementType OnnxTypeOf(DataType type);

}  // namespace ebb::detail
