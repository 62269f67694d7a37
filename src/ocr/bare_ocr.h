// Internal, for `ebb bench ocr` only: the OCR pipeline as RapidOCR makes it
// over plain ONNX Runtime — three Ort::Sessions (detail::BareOrtModel), ORT's
// default CPU arena or none (RapidOCR's default, enable_cpu_mem_arena: false),
// no ebb operation, no release — with the very steps of the library's
// pipeline (src/ocr/ocr_steps.h), so that only how the models run differs.
// Not part of the library's surface (no public header).
//
// Like BareOrtModel: only in a process without an ebb::Runtime.
// Thread safety: none.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ebb/ocr.h"

namespace ebb::detail {

class BareOcr {
 public:
  static Result<std::unique_ptr<BareOcr>> Load(const OcrModelFiles& files, bool cpu_arena);
  ~BareOcr();
  Result<OcrPage> Recognise(const Image& page);

 private:
  struct Impl;
  explicit BareOcr(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ebb::detail
