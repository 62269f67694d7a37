// OCR of the C API (include/ebb/c.h): ebb::OcrPipeline behind a handle, its
// results as OcrPagesToJson's JSON.
#include <cstdlib>
#include <cstring>

#include "c_api.h"
#include "ebb/image.h"
#include "ebb/ocr.h"

struct ebb_ocr_t {
  std::shared_ptr<ebb::Runtime> runtime;  // outlives the pipeline
  std::unique_ptr<ebb::OcrPipeline> pipeline;
};

namespace ebb::c_api {
namespace {

ebb_status_t* JsonOut(const std::string& text, char** json) {
  char* copy = static_cast<char*>(std::malloc(text.size() + 1));
  if (!copy) return OutOfMemory();
  std::memcpy(copy, text.c_str(), text.size() + 1);
  *json = copy;
  return nullptr;
}

ebb_status_t* Recognise(ebb_ocr_t* ocr, const std::vector<Image>& pages, const std::vector<std::string>& names,
                        ebb_control_t* control, char** json) {
  Result<std::vector<OcrPage>> result = ocr->pipeline->Recognise(pages, OptionsOf(control));
  if (!result.ok()) return ToC(result.status());
  return JsonOut(OcrPagesToJson(*result, names), json);
}

}  // namespace
}  // namespace ebb::c_api

using namespace ebb;
using namespace ebb::c_api;

ebb_status_t* ebb_ocr_load(ebb_runtime_t* runtime, const char* folder, const ebb_load_options_t* options,
                           ebb_ocr_t** out) {
  constexpr const char* kFn = "ebb_ocr_load";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!out) return NullArgument(kFn, "out");
    *out = nullptr;
    if (!runtime) return NullArgument(kFn, "runtime");
    if (!folder) return NullArgument(kFn, "folder");
    Result<std::unique_ptr<OcrPipeline>> pipeline =
        OcrPipeline::Load(*runtime->runtime, folder, {}, options ? options->options : LoadOptions{});
    if (!pipeline.ok()) return ToC(pipeline.status());
    auto handle = std::make_unique<ebb_ocr_t>();
    handle->runtime = runtime->runtime;
    handle->pipeline = std::move(pipeline).value();
    *out = handle.release();
    return nullptr;
  });
}

void ebb_ocr_destroy(ebb_ocr_t* ocr) { delete ocr; }

ebb_status_t* ebb_ocr_files(ebb_ocr_t* ocr, const char* const* paths, size_t count, ebb_control_t* control,
                            char** json) {
  constexpr const char* kFn = "ebb_ocr_files";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!json) return NullArgument(kFn, "json");
    *json = nullptr;
    if (!ocr) return NullArgument(kFn, "ocr");
    if (count > 0 && !paths) return NullArgument(kFn, "paths");
    std::vector<Image> pages;
    std::vector<std::string> names;
    for (size_t i = 0; i < count; ++i) {
      if (!paths[i]) return NullArgument(kFn, "paths[i]");
      Result<Image> image = ReadImage(paths[i]);
      if (!image.ok()) return ToC(image.status());
      pages.push_back(std::move(image).value());
      names.emplace_back(paths[i]);
    }
    return Recognise(ocr, pages, names, control, json);
  });
}

ebb_status_t* ebb_ocr_images(ebb_ocr_t* ocr, const uint8_t* const* pixels, const int* widths, const int* heights,
                             const int* channels, size_t count, ebb_control_t* control, char** json) {
  constexpr const char* kFn = "ebb_ocr_images";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!json) return NullArgument(kFn, "json");
    *json = nullptr;
    if (!ocr) return NullArgument(kFn, "ocr");
    if (count > 0 && (!pixels || !widths || !heights || !channels)) return NullArgument(kFn, "pixels or sizes");
    std::vector<Image> pages(count);
    for (size_t i = 0; i < count; ++i) {
      if (!pixels[i]) return NullArgument(kFn, "pixels[i]");
      if (widths[i] <= 0 || heights[i] <= 0 || (channels[i] != 1 && channels[i] != 3 && channels[i] != 4)) {
        return ToC(InvalidArgument(std::string(kFn) + ": image " + std::to_string(i) + " is " +
                                   std::to_string(widths[i]) + "x" + std::to_string(heights[i]) + "x" +
                                   std::to_string(channels[i]) + " (needs a positive size and 1, 3 or 4 channels)"));
      }
      pages[i].width = widths[i];
      pages[i].height = heights[i];
      pages[i].channels = channels[i];
      const size_t bytes = static_cast<size_t>(widths[i]) * heights[i] * channels[i];
      pages[i].pixels.assign(pixels[i], pixels[i] + bytes);
    }
    return Recognise(ocr, pages, {}, control, json);
  });
}
