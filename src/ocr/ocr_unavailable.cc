// The OCR pipeline where OpenCV's imgproc and Clipper are not built (the
// Windows cross-build, docs/dependencies.md): every call fails, clearly.
#include "ebb/ocr.h"

namespace ebb {
namespace {

Status NotBuilt() { return Unavailable("OCR is not built on Windows (ebb's OCR needs OpenCV; docs/dependencies.md)"); }

}  // namespace

struct OcrPipeline::Impl {
  OcrOptions options;
};

OcrPipeline::OcrPipeline(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OcrPipeline::~OcrPipeline() = default;

Result<std::unique_ptr<OcrPipeline>> OcrPipeline::Load(Runtime&, const std::string&, const OcrOptions&,
                                                        const LoadOptions&) {
  return NotBuilt();
}
Result<std::unique_ptr<OcrPipeline>> OcrPipeline::Load(Runtime&, const OcrModelFiles&, const OcrOptions&,
                                                        const LoadOptions&) {
  return NotBuilt();
}
Result<std::unique_ptr<OcrPipeline>> OcrPipeline::Create(Runtime&, std::shared_ptr<Session>, std::shared_ptr<Session>,
                                                          std::shared_ptr<Session>, const std::string&,
                                                          const OcrOptions&) {
  return NotBuilt();
}
Result<std::vector<OcrPage>> OcrPipeline::Recognise(const std::vector<Image>&, const OperationOptions&) {
  return NotBuilt();
}
const OcrOptions& OcrPipeline::options() const { return impl_->options; }
std::vector<std::shared_ptr<Session>> OcrPipeline::sessions() const { return {}; }

}  // namespace ebb
