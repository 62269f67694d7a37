// ReadModelSignature: the graph inputs and outputs of an ONNX file, read from
// its protobuf encoding (see ebb/model_signature.h). Only the few fields on the
// way are decoded; everything else, weights included, is skipped by seeking.
//
// The messages and field numbers (onnx/onnx.proto):
//   ModelProto        7: graph (GraphProto)
//   GraphProto        5: initializer (TensorProto), 11: input, 12: output (ValueInfoProto)
//   TensorProto       8: name
//   ValueInfoProto    1: name, 2: type (TypeProto)
//   TypeProto         1: tensor_type (TypeProto.Tensor); any other field: not a tensor
//   TypeProto.Tensor  1: elem_type (the TensorProto.DataType numbers: onnx_types.h),
//                        2: shape (TensorShapeProto)
//   TensorShapeProto  1: dim (Dimension: 1 dim_value, 2 dim_param)
#include "ebb/model_signature.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "onnx_types.h"
#include "protobuf_cursor.h"
#include "port.h"

namespace ebb {
namespace {

using detail::Cursor;
using detail::ExpectDelimited;
using detail::ForEachField;
using detail::kVarint;

Status ParseDim(Cursor& c, int64_t* dim) {
  *dim = -1;
  return ForEachField(c, {1, 2}, [&](uint32_t field, uint32_t wire) {
    if (field == 1 && wire == kVarint) {
      uint64_t v = 0;
      EBB_RETURN_IF_ERROR(c.Varint(&v));
      // int64 on the wire; a negative one is no size ONNX allows: read it as unknown, as a symbol is.
      *dim = std::max<int64_t>(static_cast<int64_t>(v), -1);
      return Status::Ok();
    }
    return c.SkipValue(wire);  // dim_param: symbolic, -1
  });
}

Status ParseShape(Cursor& c, Shape* shape) {
  return ForEachField(c, {1}, [&](uint32_t, uint32_t wire) {
    EBB_RETURN_IF_ERROR(ExpectDelimited(wire, "dim"));
    uint64_t n = 0;
    EBB_RETURN_IF_ERROR(c.Length(&n));
    Cursor dim = c.Sub(n);
    shape->push_back(-1);
    return ParseDim(dim, &shape->back());
  });
}

Status ParseTensorType(Cursor& c, TensorInfo* info, bool* typed) {
  return ForEachField(c, {1, 2}, [&](uint32_t field, uint32_t wire) {
    if (field == 1 && wire == kVarint) {
      uint64_t elem = 0;
      EBB_RETURN_IF_ERROR(c.Varint(&elem));
      const std::optional<DataType> type = detail::DataTypeFromOnnx(elem);
      if (!type) {
        return InvalidArgument("'" + info->name + "' has an element type ebb does not support (ONNX element type " +
                               std::to_string(elem) + ")");
      }
      info->type = *type;
      *typed = true;
      return Status::Ok();
    }
    if (field != 2) return c.SkipValue(wire);
    EBB_RETURN_IF_ERROR(ExpectDelimited(wire, "shape"));
    uint64_t n = 0;
    EBB_RETURN_IF_ERROR(c.Length(&n));
    Cursor shape = c.Sub(n);
    return ParseShape(shape, &info->shape);
  });
}

Status ParseValueInfo(Cursor& c, TensorInfo* info) {
  bool tensor = false, typed = false;
  EBB_RETURN_IF_ERROR(ForEachField(c, {1, 2}, [&](uint32_t field, uint32_t wire) {
    EBB_RETURN_IF_ERROR(ExpectDelimited(wire, "value info"));
    uint64_t n = 0;
    EBB_RETURN_IF_ERROR(c.Length(&n));
    if (field == 1) return c.String(n, &info->name);
    Cursor type = c.Sub(n);
    return ForEachField(type, {1, 2, 4, 5, 8, 9}, [&](uint32_t kind, uint32_t kind_wire) {
      if (kind != 1) return InvalidArgument("'" + info->name + "' is not a tensor; ebb serves tensor inputs and outputs only");
      EBB_RETURN_IF_ERROR(ExpectDelimited(kind_wire, "tensor type"));
      uint64_t m = 0;
      EBB_RETURN_IF_ERROR(type.Length(&m));
      Cursor tensor_type = type.Sub(m);
      tensor = true;
      return ParseTensorType(tensor_type, info, &typed);
    });
  }));
  if (!tensor || !typed) return InvalidArgument("'" + info->name + "' has no tensor type");
  return Status::Ok();
}

Status ParseGraph(Cursor& c, ModelSignature* signature) {
  std::vector<TensorInfo> inputs;
  std::set<std::string> initializers;
  EBB_RETURN_IF_ERROR(ForEachField(c, {5, 11, 12}, [&](uint32_t field, uint32_t wire) {
    EBB_RETURN_IF_ERROR(ExpectDelimited(wire, "graph field"));
    uint64_t n = 0;
    EBB_RETURN_IF_ERROR(c.Length(&n));
    Cursor sub = c.Sub(n);
    if (field == 5) {
      return ForEachField(sub, {8}, [&](uint32_t, uint32_t name_wire) {
        EBB_RETURN_IF_ERROR(ExpectDelimited(name_wire, "initializer name"));
        uint64_t m = 0;
        std::string name;
        EBB_RETURN_IF_ERROR(sub.Length(&m));
        EBB_RETURN_IF_ERROR(sub.String(m, &name));
        initializers.insert(std::move(name));
        return Status::Ok();
      });
    }
    std::vector<TensorInfo>& list = field == 11 ? inputs : signature->outputs;
    list.emplace_back();
    return ParseValueInfo(sub, &list.back());
  }));
  for (TensorInfo& t : inputs) {
    if (!initializers.contains(t.name)) signature->inputs.push_back(std::move(t));
  }
  return Status::Ok();
}

}  // namespace

Result<ModelSignature> ReadModelSignature(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return NotFound("no model file '" + path + "'");
  std::ifstream in(port::PathFromUtf8(path), std::ios::binary);
  if (!in) return NotFound("cannot open model file '" + path + "'");
  Cursor model(in, 0, size);
  ModelSignature signature;
  bool has_graph = false;
  Status st = ForEachField(model, {7}, [&](uint32_t, uint32_t wire) {
    EBB_RETURN_IF_ERROR(ExpectDelimited(wire, "graph"));
    uint64_t n = 0;
    EBB_RETURN_IF_ERROR(model.Length(&n));
    Cursor graph = model.Sub(n);
    has_graph = true;
    signature = {};  // the last graph field wins, as in protobuf
    return ParseGraph(graph, &signature);
  });
  if (st.ok() && !has_graph) st = InvalidArgument("no graph");
  if (!st.ok()) return InvalidArgument("'" + path + "' is not an ONNX model ebb can describe: " + st.message());
  return signature;
}

}  // namespace ebb
