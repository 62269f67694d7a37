// `ebb bench ocr`'s plain-ORT baseline where OCR is not built (the Windows cross-build, which has no
// OpenCV: docs/dependencies.md): loading it fails, clearly, as ocr_unavailable.cc's pipeline does.
#include "bare_ocr.h"

namespace ebb::detail {

struct BareOcr::Impl {};

BareOcr::BareOcr(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BareOcr::~BareOcr() = default;

Result<std::unique_ptr<BareOcr>> BareOcr::Load(const OcrModelFiles&, bool) {
  return Unavailable("OCR is not built on Windows (ebb's OCR needs OpenCV; docs/dependencies.md)");
}

Result<OcrPage> BareOcr::Recognise(const Image&) {
  return Unavailable("OCR is not built on Windows (ebb's OCR needs OpenCV; docs/dependencies.md)");
}

}  // namespace ebb::detail
