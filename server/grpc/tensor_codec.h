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
// The request is parsed (ParseModelInferRequest) into an arena, after the
// scan of its wire form (infer_scan.h) has bounded what it holds; decoding
// then checks names (each input and requested output once: hash sets, linear
// in their number), datatypes, shapes and values. The reply is encoded in
// pieces (EncodedInferResponse) so that the outputs' bytes go out from the
// tensors themselves, without a copy into a message.
//
// Every error is kInvalidArgument naming the input or output.
// Thread safety: pure functions.
#pragma once

#include <google/protobuf/arena.h>
#include <google/protobuf/io/zero_copy_stream.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/inference.h"
#include "grpc_service.pb.h"

namespace ebb::server {

// Parses a serialized ModelInferRequest (the whole of `wire`) into `arena`,
// which owns the result. Errors: kInvalidArgument when protobuf refuses it.
Result<const inference::ModelInferRequest*> ParseModelInferRequest(google::protobuf::io::ZeroCopyInputStream* wire,
                                                                   google::protobuf::Arena* arena);

// The core's request. With `borrow_raw`, raw_input_contents of fixed-size types aligned for their
// type are used where they lie (Tensor::Borrow views of the message's strings, no copy): `request`
// must then outlive the returned tensors and stay unchanged; otherwise they are copied.
Result<InferRequest> DecodeModelInferRequest(const inference::ModelInferRequest& request, int64_t max_input_elements,
                                             bool borrow_raw = false);

// A serialized ModelInferResponse in pieces: `head` holds every field but
// raw_output_contents; then, per output in order, `prefix` (that field's tag
// and length) and `data`, a view of the output tensor's bytes. Concatenated
// they are the serialized response (protobuf merges concatenated messages).
// REQUIRES: the response outlives the views.
struct EncodedInferResponse {
  struct Raw {
    std::string prefix;
    std::string_view data;
  };
  std::string head;
  std::vector<Raw> raw;
  size_t size() const;
};

EncodedInferResponse EncodeModelInferResponse(const InferResponse& response);

}  // namespace ebb::server
