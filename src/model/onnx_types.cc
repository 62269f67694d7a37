#include "onnx_types.h"

namespace ebb::detail {

std::optional<DataType> DataTypeFromOnnx(uint64_t element_type) {
  switch (element_type) {
    case kOnnxBool: return DataType::kBool;
    case kOnnxUInt8: return DataType::kUInt8;
    case kOnnxUInt16: return DataType::kUInt16;
    case kOnnxUInt32: return DataType::kUInt32;
    case kOnnxUInt64: return DataType::kUInt64;
    case kOnnxInt8: return DataType::kInt8;
    case kOnnxInt16: return DataType::kInt16;
    case kOnnxInt32: return DataType::kInt32;
    case kOnnxInt64: return DataType::kInt64;
    case kOnnxFloat16: return DataType::kFloat16;
    case kOnnxBFloat16: return DataType::kBFloat16;
    case kOnnxFloat: return DataType::kFloat32;
    case kOnnxDouble: return DataType::kFloat64;
    case kOnnxString: return DataType::kBytes;
    default: return std::nullopt;
  }
}

OnnxElementType OnnxTypeOf(DataType type) {
  switch (type) {
    case DataType::kBool: return kOnnxBool;
    case DataType::kUInt8: return kOnnxUInt8;
    case DataType::kUInt16: return kOnnxUInt16;
    case DataType::kUInt32: return kOnnxUInt32;
    case DataType::kUInt64: return kOnnxUInt64;
    case DataType::kInt8: return kOnnxInt8;
    case DataType::kInt16: return kOnnxInt16;
    case DataType::kInt32: return kOnnxInt32;
    case DataType::kInt64: return kOnnxInt64;
    case DataType::kFloat16: return kOnnxFloat16;
    case DataType::kBFloat16: return kOnnxBFloat16;
    case DataType::kFloat32: return kOnnxFloat;
    case DataType::kFloat64: return kOnnxDouble;
    case DataType::kBytes: return kOnnxString;
  }
  return kOnnxUndefined;
}

}  // namespace ebb::detail
