// server/grpc/tensor_codec.h — ModelInferRequest / ModelInferResponse <-> the
// core's InferRequest / InferResponse.
//
// Inputs come either all typed (InferInputTensor.contents, the list matching
// the datatype) or all raw (raw_input_contents, one entry per input, in
// order). Raw data is little-endian, row-major, unpadded; BOOL is one byte, 0
// or 1; BYTES is each element as a 4-byte little-endian length, then its
// bytes. Typed values must fit their datatype (300 in int_contents for UINT8
// is refused); FP16 and BF16 have no typed form. Shapes are checked (no
// negative dimension, element count overflow-checked, at most
// `max_input_elements` per input) before anything is allocated. Outputs are
// always answered raw, in the order of the response's outputs.
//
// Every error is kInvalidArgument naming the input or output.
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "core/inference.h"
#include "grpc_service.pb.h"

namespace ebb::server {

Result<InferRequest> DecodeModelInferRequest(const inference::ModelInferRequest& request, int64_t max_input_elements);

void EncodeModelInferResponse(const InferResponse& response, inference::ModelInferResponse* out);

}  // namespace ebb::server
