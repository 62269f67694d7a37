// `ebb ocr IMAGE... [--json]`: the OCR pipeline (ebb/ocr.h) over the images
// as one operation. Plain: one recognised line per text line in reading
// order, a blank line between images; --json: OcrPagesToJson's structure.

#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "ebb/ocr.h"

namespace ebb::cli {

int RunOcr(const OcrCliOptions& options) {
  std::vector<Image> pages;
  for (const std::string& path : options.images) {
    Result<Image> image = ReadImage(path);
    if (!image.ok()) return Fail(image.status());
    pages.push_back(std::move(image).value());
  }
  std::unique_ptr<Runtime> runtime = MakeRuntime(options.common);
  if (!runtime) return 1;
  const std::string folder = OcrPipelineFolder(options.pipeline, options.common);
  LoadOptions load;
  if (options.common.device != "auto") {
    Result<DeviceRequest> device = DeviceRequest::Parse(options.common.device);
    if (!device.ok()) return Fail(device.status());
    load.device = *device;
  }
  Result<std::unique_ptr<OcrPipeline>> ocr = OcrPipeline::Load(*runtime, folder, options.options, load);
  if (!ocr.ok()) return Fail(ocr.status());
  Result<std::vector<OcrPage>> result = (*ocr)->Recognise(pages);
  if (!result.ok()) return Fail(result.status());
  if (options.json) {
    std::printf("%s\n", OcrPagesToJson(*result, options.images).c_str());
    return 0;
  }
  for (size_t i = 0; i < result->size(); ++i) {
    if (i > 0) std::printf("\n");
    for (const OcrLine& line : (*result)[i].lines) std::printf("%s\n", line.text.c_str());
  }
  return 0;
}

}  // namespace ebb::cli
