// server/core/inference.h — the typed requests and answers of the server core.
//
// Every front end (HTTP/REST today; gRPC and others beside it) decodes its wire
// format into these types and encodes its replies from them; the core
// (InferenceService) sees nothing else. Wire-only choices stay in their front
// end: which outputs a REST client wants as binary data, how a gRPC message
// carries raw contents.
//
// Thread safety: plain values.
// Ownership: tensors are owned (ebb::Tensor); a request's inputs are read in
// place by the run boundary, and a response's outputs belong to the caller.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ebb/session.h"
#include "ebb/tensor.h"

namespace ebb::server {

// One inference request, decoded.
struct InferRequest {
  std::string id;                        // echoed back in the response; empty when not given
  std::vector<NamedTensor> inputs;       // in request order; names are unique
  std::vector<std::string> outputs;      // requested output names, in request order; empty = all
  std::optional<int64_t> keep_alive_ms;  // parameters.keep_alive (milliseconds; negative = never unload)
};

// Its answer: the outputs in the order requested (model order when all).
struct InferResponse {
  std::string model_name;
  std::string model_version;
  std::string id;
  std::vector<NamedTensor> outputs;
};

// What `GET /v2` and gRPC ServerMetadata report.
struct ServerMetadata {
  std::string name;
  std::string version;
  std::vector<std::string> extensions;
};

// What `GET /v2/models/{m}` and gRPC ModelMetadata report.
struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;
  std::string platform;
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
};

}  // namespace ebb::server
