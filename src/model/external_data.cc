// ONNX external data (see external_data.h): the walk over the protobuf
// encoding that finds every location, the checks that confine each file to
// the model's folder, and the model's identity over all its files.
//
// The messages and field numbers walked (onnx/onnx.proto):
//   ModelProto         7: graph (GraphProto), 25: functions (FunctionProto)
//   GraphProto         1: node (NodeProto), 5: initializer (TensorProto),
//                      15: sparse_initializer (SparseTensorProto)
//   FunctionProto      7: node
//   NodeProto          5: attribute (AttributeProto)
//   AttributeProto     5: t, 10: tensors (TensorProto), 6: g, 11: graphs (GraphProto),
//                      22: sparse_tensor, 23: sparse_tensors (SparseTensorProto)
//   SparseTensorProto  1: values, 2: indices (TensorProto)
//   TensorProto        1: dims, 2: data_type, 8: name, 13: external_data (StringStringEntryProto: 1 key,
//                      2 value: "location", "offset", "length"), 14: data_location (1 = EXTERNAL, the only value
//                      for which ONNX Runtime reads external_data)
#include "external_data.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>

#include "ebb/confined_path.h"
#include "ebb/model_signature.h"
#include "file_access.h"
#include "port.h"
#include "protobuf_cursor.h"

namespace ebb::detail {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxGraphDepth = 64;          // subgraphs in subgraphs: a bound against hostile nesting
constexpr uint64_t kMaxStringBytes = 4096;  // a location longer than a path can be is refused

// The locations found so far, each once, in the order first named, with the bytes read from each.
struct Locations {
  std::vector<ExternalDataExtent> list;
  std::map<std::string, size_t> index;  // location -> its entry in list
  void Add(const std::string& location, uint64_t end, const std::string& tensor) {
    auto [it, added] = index.emplace(location, list.size());
    if (added) list.push_back({location, 0, {}});
    ExternalDataExtent& e = list[it->second];
    if (end > e.end || e.tensor.empty()) {
      e.end = std::max(e.end, end);
      e.tensor = tensor;
    }
  }
};

// Bytes per element of an ONNX TensorProto data_type; 0 when not a fixed size (STRING, 4-bit types,
// unknown ones).
uint64_t OnnxElementBytes(uint64_t data_type) {
  switch (data_type) {
    case 2: case 3: case 9: case 17: case 18: case 19: case 20: return 1;   // UINT8 INT8 BOOL FLOAT8*
    case 4: case 5: case 10: case 16: return 2;                             // UINT16 INT16 FLOAT16 BF16
    case 1: case 6: case 12: return 4;                                      // FLOAT INT32 UINT32
    case 7: case 11: case 13: case 14: return 8;                            // INT64 DOUBLE UINT64 COMPLEX64
    case 15: return 16;                                                     // COMPLEX128
    default: return 0;
  }
}

// An external_data "offset" or "length": decimal digits (what onnx writes). Errors: anything else.
Result<uint64_t> ExternalNumber(const std::string& tensor, const char* key, const std::string& text) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return InvalidArgument("tensor '" + tensor + "' gives external-data " + key + " '" + text.substr(0, 32) +
                           "', not a byte count");
  }
  return v;
}

// Calls parse(sub) on the message that is the value of the current field.
template <typename Parse>
Status Message(Cursor& c, uint32_t wire, const char* what, Parse parse) {
  EBB_RETURN_IF_ERROR(ExpectDelimited(wire, what));
  uint64_t n = 0;
  EBB_RETURN_IF_ERROR(c.Length(&n));
  Cursor sub = c.Sub(n);
  return parse(sub);
}

// Reads a string field of at most kMaxStringBytes into `out`; a longer one is
// skipped, and `*too_long` set.
Status BoundedString(Cursor& c, uint32_t wire, const char* what, std::string* out, bool* too_long) {
  EBB_RETURN_IF_ERROR(ExpectDelimited(wire, what));
  uint64_t n = 0;
  EBB_RETURN_IF_ERROR(c.Length(&n));
  *too_long = n > kMaxStringBytes;
  if (!*too_long) return c.String(n, out);
  (void)c.Sub(n);  // skipped
  return Status::Ok();
}

Status ParseTensor(Cursor& c, Locations* out) {
  std::string name, location, offset_text, length_text;
  bool external = false, has_location = false, location_too_long = false, has_offset = false, has_length = false;
  uint64_t data_type = 0, elements = 1;
  bool elements_overflow = false;
  const auto dim = [&](uint64_t d) {
    if (__builtin_mul_overflow(elements, d, &elements)) elements_overflow = true;
  };
  EBB_RETURN_IF_ERROR(ForEachField(c, {1, 2, 8, 13, 14}, [&](uint32_t field, uint32_t wire) {
    bool too_long = false;
    if (field == 1) {  // dims: varints, packed or not
      uint64_t d = 0;
      if (wire == kVarint) {
        EBB_RETURN_IF_ERROR(c.Varint(&d));
        dim(d);
        return Status::Ok();
      }
      return Message(c, wire, "tensor dims", [&](Cursor& packed) {
        while (!packed.done()) {
          EBB_RETURN_IF_ERROR(packed.Varint(&d));
          dim(d);
        }
        return Status::Ok();
      });
    }
    if (field == 2) return wire == kVarint ? c.Varint(&data_type) : c.SkipValue(wire);
    if (field == 8) return BoundedString(c, wire, "tensor name", &name, &too_long);  // only for messages
    if (field == 14) {
      if (wire != kVarint) return c.SkipValue(wire);
      uint64_t v = 0;
      EBB_RETURN_IF_ERROR(c.Varint(&v));
      external = v == 1;  // the last occurrence wins, as in protobuf
      return Status::Ok();
    }
    return Message(c, wire, "external_data entry", [&](Cursor& entry) {
      std::string key, value;
      bool value_too_long = false;
      EBB_RETURN_IF_ERROR(ForEachField(entry, {1, 2}, [&](uint32_t f, uint32_t w) {
        return f == 1 ? BoundedString(entry, w, "external_data key", &key, &too_long)
                      : BoundedString(entry, w, "external_data value", &value, &value_too_long);
      }));
      if (key == "location") {
        location = std::move(value);
        has_location = true;
        location_too_long = value_too_long;
      } else if (key == "offset") {
        offset_text = value_too_long ? "(too long)" : std::move(value);
        has_offset = true;
      } else if (key == "length") {
        length_text = value_too_long ? "(too long)" : std::move(value);
        has_length = true;
      }
      return Status::Ok();
    });
  }));
  if (!external) return Status::Ok();
  if (location_too_long) {
    return InvalidArgument("tensor '" + name + "' names an external-data location longer than " +
                           std::to_string(kMaxStringBytes) + " bytes");
  }
  if (!has_location || location.empty()) {
    return InvalidArgument("tensor '" + name + "' keeps its data in an external file but names no location");
  }
  if (location.find('\0') != std::string::npos) {
    return InvalidArgument("tensor '" + name + "' names an external-data location with a NUL byte");
  }
  // The bytes it reads: [offset, offset + length), the length being the tensor's own size when not
  // given (as ONNX Runtime reads it); checked against the file's size when the model is identified.
  uint64_t offset = 0, length = 0;
  if (has_offset) {
    Result<uint64_t> v = ExternalNumber(name, "offset", offset_text);
    if (!v.ok()) return v.status();
    offset = *v;
  }
  const uint64_t element_bytes = OnnxElementBytes(data_type);
  if (has_length) {
    Result<uint64_t> v = ExternalNumber(name, "length", length_text);
    if (!v.ok()) return v.status();
    length = *v;
  } else if (element_bytes > 0 && !elements_overflow && !__builtin_mul_overflow(elements, element_bytes, &length)) {
    // the tensor's size
  } else if (element_bytes > 0) {
    return InvalidArgument("tensor '" + name + "' has dims whose byte size overflows");
  }
  uint64_t end = 0;
  if (__builtin_add_overflow(offset, length, &end)) {
    return InvalidArgument("tensor '" + name + "' reads external data past 2^64 bytes (offset " +
                           std::to_string(offset) + ", length " + std::to_string(length) + ")");
  }
  out->Add(location, end, name);
  return Status::Ok();
}

Status ParseSparseTensor(Cursor& c, Locations* out) {
  return ForEachField(c, {1, 2}, [&](uint32_t, uint32_t wire) {
    return Message(c, wire, "sparse tensor part", [&](Cursor& t) { return ParseTensor(t, out); });
  });
}

Status ParseGraph(Cursor& c, int depth, Locations* out);

Status ParseNode(Cursor& c, int depth, Locations* out) {
  return ForEachField(c, {5}, [&](uint32_t, uint32_t wire) {
    return Message(c, wire, "attribute", [&](Cursor& a) {
      return ForEachField(a, {5, 6, 10, 11, 22, 23}, [&](uint32_t field, uint32_t w) {
        return Message(a, w, "attribute value", [&](Cursor& v) {
          if (field == 5 || field == 10) return ParseTensor(v, out);
          if (field == 22 || field == 23) return ParseSparseTensor(v, out);
          return ParseGraph(v, depth + 1, out);
        });
      });
    });
  });
}

Status ParseGraph(Cursor& c, int depth, Locations* out) {
  if (depth > kMaxGraphDepth) return InvalidArgument("subgraphs nested deeper than " + std::to_string(kMaxGraphDepth));
  return ForEachField(c, {1, 5, 15}, [&](uint32_t field, uint32_t wire) {
    return Message(c, wire, "graph field", [&](Cursor& sub) {
      if (field == 1) return ParseNode(sub, depth, out);
      if (field == 5) return ParseTensor(sub, out);
      return ParseSparseTensor(sub, out);
    });
  });
}

// A model file mapped read-only WITHOUT faulting its pages in (unlike
// MappedFile): the walk touches only the pages of the fields it decodes.
using WalkMapping = port::Mapping;

// The locations of the models walked so far, by the SHA-256 of their bytes
// (the locations are a function of the bytes alone), so that a load of a
// model seen before does not walk it again: with the walk, a Load that finds
// its session cached took 0.6 ms for conv_300mb and 0.35 ms for ppocr_det
// (672 nodes), without it 2.6 us. At most 1024 are remembered.
class LocationMemo {
 public:
  std::optional<std::vector<ExternalDataExtent>> Find(const std::string& sha256) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(sha256);
    if (it == entries_.end()) return std::nullopt;
    return it->second;
  }
  void Insert(const std::string& sha256, const std::vector<ExternalDataExtent>& locations) {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() >= 1024) entries_.clear();
    entries_.emplace(sha256, locations);
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::vector<ExternalDataExtent>> entries_;  // guarded by mu_
};

LocationMemo& Memo() {
  static LocationMemo memo;
  return memo;
}

// The locations named by the model file at `path`; `identity` (optional) is
// set to the identity of the file walked.
Result<std::vector<ExternalDataExtent>> LocationsOfFile(const std::string& path, FileIdentity* identity) {
  auto mapping = WalkMapping::Open(path);
  if (!mapping.ok()) return mapping.status();
  if (identity) *identity = mapping->identity();
  auto locations = ExternalDataExtents(mapping->data(), mapping->size());
  if (!locations.ok()) {
    return InvalidArgument("'" + path + "' is not an ONNX model ebb can read: " + locations.status().message());
  }
  return locations;
}

}  // namespace

Result<std::vector<std::string>> ExternalDataLocations(const void* data, size_t size) {
  Result<std::vector<ExternalDataExtent>> extents = ExternalDataExtents(data, size);
  if (!extents.ok()) return extents.status();
  std::vector<std::string> locations;
  for (ExternalDataExtent& e : *extents) locations.push_back(std::move(e.location));
  return locations;
}

Result<std::vector<ExternalDataExtent>> ExternalDataExtents(const void* data, size_t size) {
  SpanStream in(data, size);
  Cursor model(in, 0, size);
  Locations found;
  EBB_RETURN_IF_ERROR(ForEachField(model, {7, 25}, [&](uint32_t field, uint32_t wire) {
    return Message(model, wire, field == 7 ? "graph" : "function", [&](Cursor& sub) {
      if (field == 7) return ParseGraph(sub, 0, &found);
      return ForEachField(sub, {7}, [&](uint32_t, uint32_t w) {
        return Message(sub, w, "function node", [&](Cursor& node) { return ParseNode(node, 0, &found); });
      });
    });
  }));
  return std::move(found.list);
}

Result<std::string> ResolveExternalDataFile(const std::string& model_path, const std::string& location) {
  const std::string named = "external-data file '" + location + "' of model '" + model_path + "'";
  const fs::path relative = port::PathFromUtf8(location);
  if (relative.is_absolute()) {
    return InvalidArgument(named + ": the location is absolute; it must name a file in the model's folder");
  }
  fs::path folder = port::PathFromUtf8(model_path).parent_path();
  if (folder.empty()) folder = ".";
  Result<std::string> real = ResolveUnder(port::Utf8FromPath(folder), location, "the model's folder");
  if (!real.ok()) {
    const Status& why = real.status();
    if (why.code() != StatusCode::kInvalidArgument) return FailedPrecondition(named + " " + why.message());
    return InvalidArgument(named + " " + why.message() + "; a location out of the folder is refused");
  }
  std::error_code ec;
  if (!fs::is_regular_file(port::PathFromUtf8(*real), ec)) return InvalidArgument(named + " is not a regular file");
  if (fs::file_size(port::PathFromUtf8(*real), ec) == 0) return InvalidArgument(named + " is empty");
  return port::Utf8FromPath(folder / relative);
}

Result<std::string> IdentifyModelFiles(const std::string& model_path, const FileIdentity& model_identity,
                                       const std::string& model_sha256, std::vector<ExternalDataFile>* files) {
  files->clear();
  std::optional<std::vector<ExternalDataExtent>> locations = Memo().Find(model_sha256);
  if (!locations) {
    FileIdentity walked;
    auto found = LocationsOfFile(model_path, &walked);
    if (!found.ok()) return found.status();
    if (walked != model_identity) {  // not the bytes that were hashed
      return Unavailable("the model file '" + model_path + "' changed while it was being loaded");
    }
    Memo().Insert(model_sha256, *found);
    locations = std::move(found).value();
  }
  if (locations->empty()) return model_sha256;
  std::string text = "ebb model files 1\n" + model_sha256 + "\n";
  for (const ExternalDataExtent& extent : *locations) {
    const std::string& location = extent.location;
    auto path = ResolveExternalDataFile(model_path, location);
    if (!path.ok()) return path.status();
    ExternalDataFile file{location, *path, {}, {}};
    auto sha256 = Sha256OfFile(file.path, &file.identity);
    if (!sha256.ok()) return sha256.status();
    // Before ONNX Runtime reads it (which would fail with its own text, as an internal error).
    if (static_cast<uint64_t>(file.identity.size) < extent.end) {
      return InvalidArgument("external-data file '" + location + "' of model '" + model_path + "' has " +
                             std::to_string(file.identity.size) + " bytes, but tensor '" + extent.tensor +
                             "' reads it up to byte " + std::to_string(extent.end) + " (its offset and length)");
    }
    file.sha256 = *sha256;
    text += location + "\n" + file.sha256 + "\n";
    files->push_back(std::move(file));
  }
  return Sha256Hex(text.data(), text.size());
}

bool ExternalDataUnchanged(const std::vector<ExternalDataFile>& files) {
  for (const ExternalDataFile& f : files) {
    Result<FileIdentity> now = StatFile(f.path);
    if (!now.ok() || *now != f.identity) return false;
  }
  return true;
}

}  // namespace ebb::detail

namespace ebb {

Result<ModelFiles> ReadModelFiles(const std::string& path) {
  auto locations = detail::LocationsOfFile(path, nullptr);
  if (!locations.ok()) return locations.status();
  ModelFiles files;
  std::error_code ec;
  files.total_bytes = static_cast<int64_t>(std::filesystem::file_size(port::PathFromUtf8(path), ec));
  if (ec) return NotFound("no model file '" + path + "'");
  for (const detail::ExternalDataExtent& extent : *locations) {
    auto file = detail::ResolveExternalDataFile(path, extent.location);
    if (!file.ok()) return file.status();
    files.total_bytes += static_cast<int64_t>(std::filesystem::file_size(port::PathFromUtf8(*file), ec));
    files.external_data.push_back(*file);
  }
  return files;
}

}  // namespace ebb
