#include "model_configuration.h"

#include <array>
#include <nlohmann/json.hpp>

namespace ebb::server {
namespace {

using nlohmann::json;

struct TypeName {
  DataType type;
  const char* name;
};

constexpr std::array<TypeName, 14> kTypeNames = {{
    {DataType::kBool, "TYPE_BOOL"},     {DataType::kUInt8, "TYPE_UINT8"},   {DataType::kUInt16, "TYPE_UINT16"},
    {DataType::kUInt32, "TYPE_UINT32"}, {DataType::kUInt64, "TYPE_UINT64"}, {DataType::kInt8, "TYPE_INT8"},
    {DataType::kInt16, "TYPE_INT16"},   {DataType::kInt32, "TYPE_INT32"},   {DataType::kInt64, "TYPE_INT64"},
    {DataType::kFloat16, "TYPE_FP16"},  {DataType::kBFloat16, "TYPE_BF16"}, {DataType::kFloat32, "TYPE_FP32"},
    {DataType::kFloat64, "TYPE_FP64"},  {DataType::kBytes, "TYPE_STRING"},
}};

// config.json's fields, which a load configuration may set.
constexpr std::array<const char*, 8> kSettable = {"kind",   "device",   "tile",    "scale", "keep_alive_ms",
                                                  "pinned", "versions", "graph_optimization"};
// The "ebb" fields GET reports and a load cannot set.
constexpr std::array<const char*, 2> kMeasured = {"charge_bytes", "config_source"};

bool In(const auto& list, const std::string& key) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

json Tensors(const std::vector<TensorInfo>& infos, bool inputs, const std::string& label_filename) {
  json list = json::array();
  for (const TensorInfo& t : infos) {
    json entry = {{"name", t.name}, {"data_type", ConfigTypeName(t.type)}, {"dims", t.shape}};
    if (inputs) {
      entry["format"] = "FORMAT_NONE";
    } else {
      entry["label_filename"] = label_filename;
    }
    list.push_back(std::move(entry));
  }
  return list;
}

json VersionPolicy(const ModelConfiguration& c) {
  switch (c.version_policy) {
    case ModelConfiguration::VersionPolicy::kAll: return {{"all", json::object()}};
    case ModelConfiguration::VersionPolicy::kSpecific: return {{"specific", {{"versions", c.versions}}}};
    case ModelConfiguration::VersionPolicy::kLatest: break;
  }
  return {{"latest", {{"num_versions", 1}}}};
}

json EbbFields(const ModelConfiguration& c) {
  json ebb = json::parse(ModelConfigToJson(c.config));
  ebb["charge_bytes"] = c.charge_bytes;
  ebb["config_source"] = c.config_from_request ? "load request" : c.config_file ? "config.json" : "defaults";
  return ebb;
}

Status Mismatch(const std::string& field, const json& got, const json& expected) {
  return InvalidArgument("config." + field + " is " + got.dump(-1, ' ', false, json::error_handler_t::replace) +
                         " but the model has " + expected.dump() +
                         "; ebb takes it from the model itself and cannot change it");
}

// "version_policy" -> the value of config.json's "versions" (null: the default).
Status ReadVersionPolicy(const json& policy, json* versions) {
  const char* what = "config.version_policy must be {\"latest\": {\"num_versions\": 1}}, {\"all\": {}} or "
                     "{\"specific\": {\"versions\": [...]}}";
  if (!policy.is_object() || policy.size() != 1) return InvalidArgument(what);
  const std::string kind = policy.begin().key();
  const json& value = policy.begin().value();
  if (kind == "latest") {
    const json n = value.is_object() ? value.value("num_versions", json(1)) : json();
    if (n != 1) return InvalidArgument("config.version_policy.latest.num_versions: ebb serves the highest version only (1)");
    *versions = nullptr;
  } else if (kind == "all") {
    *versions = "all";
  } else if (kind == "specific" && value.is_object() && value.contains("versions")) {
    *versions = value["versions"];
  } else {
    return InvalidArgument(what);
  }
  return Status::Ok();
}

// Version numbers as numbers (protobuf's JSON form writes int64 as strings).
Status NumericVersions(json* versions) {
  if (!versions->is_array()) return Status::Ok();
  for (json& v : *versions) {
    if (!v.is_string()) continue;
    try {
      v = std::stoll(v.get<std::string>());
    } catch (...) {
      return InvalidArgument("config versions must be numbers, got " + v.dump());
    }
  }
  return Status::Ok();
}

// A field that describes the model: it must say what the model is. Inputs and
// outputs match entry by entry on the fields given (name, data_type, dims, ...).
Status CheckDescriptive(const std::string& key, const json& value, const json& current) {
  const json& expected = current[key];
  if (key != "input" && key != "output") {
    return value == expected ? Status::Ok() : Mismatch(key, value, expected);
  }
  if (!value.is_array() || value.size() != expected.size()) return Mismatch(key, value, expected);
  for (size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_object()) return Mismatch(key, value, expected);
    for (const auto& [field, given] : value[i].items()) {
      if (!expected[i].contains(field) || given != expected[i][field]) {
        return Mismatch(key + "[" + std::to_string(i) + "]." + field, given,
                        expected[i].contains(field) ? expected[i][field] : json());
      }
    }
  }
  return Status::Ok();
}

Status Take(const std::string& key, const json& value, json* fields) {
  if (fields->contains(key)) return InvalidArgument("config sets '" + key + "' twice (at the top and under \"ebb\")");
  (*fields)[key] = value;
  return Status::Ok();
}

}  // namespace

const char* ConfigTypeName(DataType type) {
  for (const TypeName& t : kTypeNames) {
    if (t.type == type) return t.name;
  }
  return "TYPE_INVALID";
}

std::optional<DataType> ParseConfigTypeName(std::string_view name) {
  for (const TypeName& t : kTypeNames) {
    if (name == t.name) return t.type;
  }
  return std::nullopt;
}

std::string EbbFieldsToJson(const ModelConfiguration& c) { return EbbFields(c).dump(); }

std::string ModelConfigurationToJson(const ModelConfiguration& c) {
  json j = {{"name", c.name},
            {"platform", c.platform},
            {"backend", c.backend},
            {"version_policy", VersionPolicy(c)},
            {"max_batch_size", c.max_batch_size},
            {"input", Tensors(c.inputs, true, "")},
            {"output", Tensors(c.outputs, false, c.label_filename)},
            {"ebb", EbbFields(c)}};
  return j.dump();
}

Result<ModelConfig> ParseConfigOverride(std::string_view json_text, const ModelConfiguration& current) {
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("the load parameter 'config' is not a JSON object");
  const json now = json::parse(ModelConfigurationToJson(current));
  json fields = json::object();
  std::optional<json> policy_versions;
  for (const auto& [key, value] : j.items()) {
    if (In(kSettable, key)) {
      EBB_RETURN_IF_ERROR(Take(key, value, &fields));
    } else if (key == "ebb") {
      if (!value.is_object()) return InvalidArgument("config.ebb must be an object");
      for (const auto& [ebb_key, ebb_value] : value.items()) {
        if (In(kMeasured, ebb_key)) continue;  // reported by GET, not settable
        if (!In(kSettable, ebb_key)) return InvalidArgument("unknown field 'config.ebb." + ebb_key + "'");
        EBB_RETURN_IF_ERROR(Take(ebb_key, ebb_value, &fields));
      }
    } else if (key == "version_policy") {
      policy_versions.emplace();
      EBB_RETURN_IF_ERROR(ReadVersionPolicy(value, &*policy_versions));
      EBB_RETURN_IF_ERROR(NumericVersions(&*policy_versions));
    } else if (key == "name" || key == "platform" || key == "backend" || key == "max_batch_size" || key == "input" ||
               key == "output") {
      EBB_RETURN_IF_ERROR(CheckDescriptive(key, value, now));
    } else {
      return InvalidArgument("config." + key + " is not a field ebb understands (it reads " +
                             "kind, device, tile, scale, keep_alive_ms, pinned, versions, version_policy, and checks " +
                             "name, platform, backend, max_batch_size, input, output)");
    }
  }
  if (fields.contains("versions")) EBB_RETURN_IF_ERROR(NumericVersions(&fields["versions"]));
  if (policy_versions) {
    // Both given (as GET answers them): they must say the same.
    const json versions = fields.value("versions", json());
    if (fields.contains("versions") && versions != *policy_versions) {
      return InvalidArgument("config.version_policy and versions disagree: " + policy_versions->dump() + " and " +
                             versions.dump());
    }
    if (policy_versions->is_null()) {
      fields.erase("versions");
    } else {
      fields["versions"] = *policy_versions;
    }
  }
  Result<ModelConfig> config = ParseModelConfig(fields.dump());
  if (!config.ok()) return InvalidArgument("the load parameter 'config': " + config.status().message());
  return config;
}

}  // namespace ebb::server
