// server/core/model_configuration.h — Triton's JSON model configuration, both
// ways.
//
// `GET /v2/models/{m}/config` answers a model's configuration in the JSON form
// of Triton's ModelConfig (model_config.proto; the form tritonclient's
// get_model_config returns), and a load request may carry such a JSON document
// as its `config` parameter (over REST and gRPC alike), so reading and writing
// it live together, here:
//
//   {"name": "m", "platform": "onnxruntime_onnx", "backend": "onnxruntime",
//    "version_policy": {"latest": {"num_versions": 1}}   (or {"specific": {"versions": [1, 3]}}, {"all": {}}),
//    "max_batch_size": 0,
//    "input":  [{"name": "x", "data_type": "TYPE_FP32", "format": "FORMAT_NONE", "dims": [-1, 3, -1, -1]}],
//    "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [-1, 3, -1, -1], "label_filename": ""}],
//    "ebb": {"kind": "tensor", "pinned": false, ... config.json's fields ...,
//            "charge_bytes": 123, "config_source": "config.json"}}   ("load request", "defaults": none)
//
// max_batch_size is 0: ebb models carry their batch dimension in `dims`.
// A load configuration is read field by field: config.json's fields (kind,
// device, tile, scale, keep_alive_ms, pinned, versions), at the top level or
// under "ebb", are applied; version_policy sets which versions are served; the
// fields that describe the model (name, platform, backend, max_batch_size,
// input, output) must match it, since ebb takes them from model.onnx; the
// measured "ebb" fields (charge_bytes, config_source) are reports a load
// cannot set and are not applied. Any other field is an error naming it.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "inference.h"

namespace ebb::server {

// Triton's data type names: "TYPE_FP32", ..., "TYPE_STRING" for BYTES.
const char* ConfigTypeName(DataType type);
std::optional<DataType> ParseConfigTypeName(std::string_view name);

// The JSON form above.
std::string ModelConfigurationToJson(const ModelConfiguration& configuration);
// The "ebb" object of the JSON form, as JSON text.
std::string EbbFieldsToJson(const ModelConfiguration& configuration);

// The model configuration a load request's `config` parameter asks for, given
// the model's current configuration `current` (for the fields that must match).
// Errors: kInvalidArgument naming the first field that is unknown, malformed,
// or does not match the model.
Result<ModelConfig> ParseConfigOverride(std::string_view json_text, const ModelConfiguration& current);

}  // namespace ebb::server
