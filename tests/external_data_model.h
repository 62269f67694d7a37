// Test helper: ONNX models with external data, encoded by hand (no ONNX
// library in the C++ tests). The model is y = x @ w for x f32[1,64] and a
// 64x64 weight w whose every value is `value`, so an input of ones gives
// 64 * value in every output. With a location, w's bytes go to that file
// (relative to the model's folder, as ONNX writes them: offset 0, length
// 16384) and the model only names it; without one, they are inline
// (raw_data): the same model in one file.
//
// The encoding, field by field, is onnx/onnx.proto's (see
// src/model/external_data.cc for the numbers).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ebb/tensor.h"

namespace ebb::testing {

namespace pb {

inline void Varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>(v | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
inline void Int(std::string& out, uint32_t field, uint64_t v) {
  Varint(out, uint64_t{field} << 3);
  Varint(out, v);
}
inline void Bytes(std::string& out, uint32_t field, const std::string& value) {
  Varint(out, (uint64_t{field} << 3) | 2);
  Varint(out, value.size());
  out += value;
}
inline std::string Entry(const std::string& key, const std::string& value) {
  std::string e;
  Bytes(e, 1, key);
  Bytes(e, 2, value);
  return e;
}
// ValueInfoProto of a float tensor of `shape`.
inline std::string FloatValue(const std::string& name, const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t d : shape) {
    std::string dim;
    Int(dim, 1, static_cast<uint64_t>(d));
    Bytes(dims, 1, dim);
  }
  std::string tensor_type;
  Int(tensor_type, 1, 1);  // FLOAT
  Bytes(tensor_type, 2, dims);
  std::string type;
  Bytes(type, 1, tensor_type);
  std::string info;
  Bytes(info, 1, name);
  Bytes(info, 2, type);
  return info;
}

}  // namespace pb

constexpr int kMatMulSide = 64;

// The bytes of the 64x64 weight with every value `value`.
inline std::string MatMulWeights(float value) {
  const std::vector<float> w(kMatMulSide * kMatMulSide, value);
  return std::string(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float));
}

// Where an external tensor's bytes are, as its external_data entries give them: "offset" and
// "length" as text (what ONNX writes: decimal numbers), an empty one left out.
struct Extent {
  std::string offset = "0";
  std::string length = std::to_string(kMatMulSide * kMatMulSide * sizeof(float));
};

// TensorProto "w": inline, or naming `location` at `extent`.
inline std::string MatMulInitializer(float value, const std::string& location, const Extent& extent = {}) {
  std::string t;
  pb::Int(t, 1, kMatMulSide);
  pb::Int(t, 1, kMatMulSide);
  pb::Int(t, 2, 1);  // FLOAT
  pb::Bytes(t, 8, "w");
  if (location.empty()) {
    pb::Bytes(t, 9, MatMulWeights(value));
  } else {
    pb::Bytes(t, 13, pb::Entry("location", location));
    if (!extent.offset.empty()) pb::Bytes(t, 13, pb::Entry("offset", extent.offset));
    if (!extent.length.empty()) pb::Bytes(t, 13, pb::Entry("length", extent.length));
    pb::Int(t, 14, 1);  // EXTERNAL
  }
  return t;
}

// The model's bytes: graph { MatMul(x, w) -> y; initializer w; input x; output y }.
inline std::string MatMulModelBytes(float value, const std::string& location, const std::string& doc = "",
                                    const Extent& extent = {}) {
  std::string node;
  pb::Bytes(node, 1, "x");
  pb::Bytes(node, 1, "w");
  pb::Bytes(node, 2, "y");
  pb::Bytes(node, 3, "matmul");
  pb::Bytes(node, 4, "MatMul");
  std::string graph;
  pb::Bytes(graph, 1, node);
  pb::Bytes(graph, 2, "ext");
  pb::Bytes(graph, 5, MatMulInitializer(value, location, extent));
  pb::Bytes(graph, 11, pb::FloatValue("x", {1, kMatMulSide}));
  pb::Bytes(graph, 12, pb::FloatValue("y", {1, kMatMulSide}));
  std::string opset;
  pb::Bytes(opset, 1, "");
  pb::Int(opset, 2, 17);
  std::string model;
  pb::Int(model, 1, 8);  // ir_version
  pb::Bytes(model, 8, opset);
  if (!doc.empty()) pb::Bytes(model, 6, doc);
  pb::Bytes(model, 7, graph);
  return model;
}

inline void WriteMatMulWeights(const std::filesystem::path& path, float value) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << MatMulWeights(value);
}

// Writes `folder`/model.onnx naming `location` (when not empty) and, unless
// `write_weights` is false, the weights file at `folder`/location. Returns
// the model's path.
inline std::string WriteMatMulModel(const std::filesystem::path& folder, float value,
                                    const std::string& location = "weights.bin", bool write_weights = true) {
  std::filesystem::create_directories(folder);
  if (!location.empty() && write_weights) {
    const std::filesystem::path weights = (folder / location).lexically_normal();
    std::filesystem::create_directories(weights.parent_path());
    WriteMatMulWeights(weights, value);
  }
  const std::filesystem::path model = folder / "model.onnx";
  std::ofstream(model, std::ios::binary | std::ios::trunc) << MatMulModelBytes(value, location);
  return model.string();
}

// Replaces the weights file at `path` with one of `value`, as a user would:
// a new file renamed over the old one (a new inode), or, `in_place`, the same
// file rewritten (the same inode and size: only the times change).
inline void ReplaceMatMulWeights(const std::filesystem::path& path, float value, bool in_place = false) {
  if (in_place) return WriteMatMulWeights(path, value);
  const std::filesystem::path temporary = path.string() + ".new";
  WriteMatMulWeights(temporary, value);
  std::filesystem::rename(temporary, path);
}

// Whether every value of the first output is `expected`.
inline bool AllEqual(const std::vector<NamedTensor>& outputs, float expected) {
  if (outputs.empty()) return false;
  for (float v : outputs[0].tensor.values<float>()) {
    if (v != expected) return false;
  }
  return true;
}

// An input of ones.
inline std::vector<NamedTensor> MatMulInput() {
  Tensor x(DataType::kFloat32, {1, kMatMulSide});
  for (float& v : x.values<float>()) v = 1.f;
  std::vector<NamedTensor> in;
  in.push_back({"x", std::move(x)});
  return in;
}

}  // namespace ebb::testing
