// server/core/ocr_model.h — a model of kind "ocr" (an OCR pipeline folder,
// ebb/ocr.h) served as any model: input `image`, BYTES, one encoded image file
// (PNG/JPEG) per element; outputs `text` BYTES [lines] (one per recognised
// line, the images' lines one after another in reading order), `boxes` FP32
// [lines,4,2] (corners in the image's pixels, clockwise from the top left),
// `confidence` FP32 [lines] and `image` INT64 [lines] (which input element a
// line is from). An image with no text gives no lines: empty outputs.
//
// The pool holds the pipeline's detector (the model's entry, charged and
// admitted as any model); the classifier and the recogniser come from the
// Runtime's cache, and the pipeline over the three is kept per model until
// the pool evicts or unloads the detector (Forget), when all three go.
// Thread safety: Execute may be called concurrently.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ebb/ocr.h"
#include "inference.h"

namespace ebb::server {

class OcrModels {
 public:
  explicit OcrModels(Runtime& runtime) : runtime_(runtime) {}

  // The request's images through the pipeline of `folder`, as one operation.
  // Errors: kInvalidArgument (no input `image`, not BYTES, an element that is
  // not an image — named —, an unknown output asked for); the pipeline's.
  Result<std::vector<NamedTensor>> Execute(const std::string& model, const std::string& folder,
                                           const std::shared_ptr<Session>& detector, const InferRequest& request,
                                           const OperationOptions& options);

  // The pool let the model's detector go: its pipeline goes, and the classifier and the recogniser
  // leave the Runtime's cache (a request still using them keeps them until it ends).
  void Forget(const std::string& model);

 private:
  Result<std::shared_ptr<OcrPipeline>> PipelineFor(const std::string& model, const std::string& folder,
                                                   const std::shared_ptr<Session>& detector);

  Runtime& runtime_;
  std::mutex mu_;
  struct Cached {
    const Session* detector = nullptr;
    std::shared_ptr<OcrPipeline> pipeline;
  };
  std::map<std::string, Cached> cache_;  // by model; guarded by mu_
};

}  // namespace ebb::server
