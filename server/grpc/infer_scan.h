// server/grpc/infer_scan.h — what one ModelInfer message may hold, checked
// before it is parsed.
//
// A parsed ModelInferRequest costs far more than its bytes on the wire where
// it holds many small entries: an empty InferInputTensor is 2 bytes there and
// ~200 bytes parsed, an empty `outputs` entry ~170, an empty `bytes_contents`
// or `raw_input_contents` string ~60 (measured: 16 MiB of them peaked at 1.9,
// 1.5 and 0.6 GiB before this scan existed, even for a model that does not
// exist). ScanModelInferRequest
// walks the message's wire form (wire_scan.h), counts the entries of every
// repeated field, map and unknown field, refuses a message over any limit
// below, and reads `model_name` and `model_version`, so that the core can find
// the model and admit the request before anything is parsed. What it accepts
// costs, parsed, about its wire size plus at most ~4 MiB for entries, plus up
// to 24 bytes per typed element (max_typed_elements) and ~100 per
// bytes_contents element (max_bytes_elements).
//
// Every error is kInvalidArgument naming the limit, or the malformation.
// Thread safety: pure functions.
#pragma once

#include <google/protobuf/io/zero_copy_stream.h>

#include <cstdint>
#include <string>

#include "ebb/status.h"

namespace ebb::server {

struct GrpcInferLimits {
  // Entries of `inputs`, of `outputs` and of `raw_input_contents`, each. 4096
  // empty ones cost ~1 MiB parsed; models have at most a few hundred inputs
  // or outputs (KV-cache language models: two per layer).
  int64_t max_tensors = 4096;
  // Entries of every `parameters` map of the request together (its own, each
  // input's, each output's). Triton's clients send at most a few per tensor.
  int64_t max_parameters = 4096;
  // Dimensions of one input's shape (NumPy allows 64).
  int64_t max_dims = 64;
  // Elements of the numeric and BOOL typed contents of all inputs together.
  // One costs up to 24 bytes parsed and decoded (an INT64 sent as a 1-byte
  // varint: 8 in the parsed list, up to 8 more while the list grows, 8 in the
  // tensor): 4 Mi elements, at most ~100 MiB. Larger tensors go in
  // raw_input_contents, as Triton's clients always send them.
  int64_t max_typed_elements = int64_t{1} << 22;
  // Elements of `bytes_contents` of all inputs together; one costs ~100 bytes
  // parsed and decoded when empty (a string object and its bookkeeping).
  int64_t max_bytes_elements = int64_t{1} << 20;
  // Fields unknown to ebb's schema (a newer client's), at any depth: each is
  // kept by the parser, ~50 bytes when empty.
  int64_t max_unknown_fields = 1024;
};

// What the scan reads of a request: its routing fields, as the parser will
// read them (the last occurrence of each wins).
struct ScannedInferRequest {
  std::string model_name;
  std::string model_version;
};

// Scans the first `size` bytes of `wire`, a serialized inference.ModelInferRequest.
Result<ScannedInferRequest> ScanModelInferRequest(google::protobuf::io::ZeroCopyInputStream* wire, size_t size,
                                                  const GrpcInferLimits& limits);

}  // namespace ebb::server
