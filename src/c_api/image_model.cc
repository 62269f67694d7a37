// Images and model locations of the C API (include/ebb/c.h): ebb/image.h,
// ebb/model_location.h and ebb/model_config.h behind plain functions. An image
// crosses the API as a UINT8 tensor [H,W,C]; the pixels are copied once each way.
#include <cstring>

#include "c_api.h"
#include "ebb/image.h"
#include "ebb/model_config.h"
#include "ebb/model_location.h"

namespace ebb::c_api {
namespace {

// A UINT8 [H,W,C] or [H,W] tensor as an ebb::Image (a copy of its pixels).
Result<Image> ImageOf(const char* function, const Tensor& t) {
  const Shape& s = t.shape();
  if (t.type() != DataType::kUInt8 || (s.size() != 2 && s.size() != 3)) {
    return InvalidArgument(std::string(function) + ": an image is a UINT8 tensor [H,W,C] (C = 1, 3 or 4) or [H,W]; got " +
                           DataTypeName(t.type()) + " " + ShapeToString(s));
  }
  Image image;
  image.height = static_cast<int>(s[0]);
  image.width = static_cast<int>(s[1]);
  image.channels = s.size() == 3 ? static_cast<int>(s[2]) : 1;
  const auto* p = reinterpret_cast<const uint8_t*>(t.data());
  image.pixels.assign(p, p + t.byte_size());
  return image;
}

// A new UINT8 [H,W,C] tensor holding `image`'s pixels.
ebb_status_t* ImageTensor(const Image& image, ebb_tensor_t** out) {
  Tensor t(DataType::kUInt8, Shape{image.height, image.width, image.channels});
  if (!image.pixels.empty()) std::memcpy(t.data(), image.pixels.data(), image.pixels.size());
  *out = new ebb_tensor_t{std::move(t)};
  return nullptr;
}

}  // namespace
}  // namespace ebb::c_api

using namespace ebb;
using namespace ebb::c_api;

extern "C" {

ebb_status_t* ebb_model_resolve(const char* model, const char* models_dir, const char* models_dir_origin,
                                const char* requested_device, char** model_path, char** device) {
  constexpr const char* kFn = "ebb_model_resolve";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!model_path) return NullArgument(kFn, "model_path");
    if (!device) return NullArgument(kFn, "device");
    *model_path = nullptr;
    *device = nullptr;
    if (!model) return NullArgument(kFn, "model");
    Result<ModelLocation> location = ResolveModel(model, models_dir ? models_dir : "models",
                                                  models_dir_origin ? models_dir_origin : "the models folder");
    if (!location.ok()) return ToC(location.status());
    if (ebb_status_t* s = ReturnString(location->path, model_path)) return s;
    if (ebb_status_t* s = ReturnString(DeviceFor(requested_device ? requested_device : "auto", *location), device)) {
      ebb_free(*model_path);
      *model_path = nullptr;
      return s;
    }
    return nullptr;
  });
}

ebb_status_t* ebb_model_config_json(const char* folder, char** json) {
  constexpr const char* kFn = "ebb_model_config_json";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!json) return NullArgument(kFn, "json");
    *json = nullptr;
    if (!folder) return NullArgument(kFn, "folder");
    Result<ModelConfig> config = LoadModelConfig(folder, folder);  // confined to the folder
    if (!config.ok()) return ToC(config.status());
    return ReturnString(ModelConfigToJson(*config), json);
  });
}

ebb_status_t* ebb_image_read(const char* path, ebb_tensor_t** out) {
  constexpr const char* kFn = "ebb_image_read";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!out) return NullArgument(kFn, "out");
    *out = nullptr;
    if (!path) return NullArgument(kFn, "path");
    Result<Image> image = ReadImage(path);
    if (!image.ok()) return ToC(image.status());
    return ImageTensor(*image, out);
  });
}

ebb_status_t* ebb_image_write_png(const char* path, const ebb_tensor_t* image) {
  constexpr const char* kFn = "ebb_image_write_png";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!path) return NullArgument(kFn, "path");
    if (!image) return NullArgument(kFn, "image");
    Result<Image> img = image->tensor.type() == DataType::kFloat32 ? TensorToImage(image->tensor)
                                                                    : ImageOf(kFn, image->tensor);
    if (!img.ok()) return ToC(img.status());
    return ToC(WritePng(path, *img));
  });
}

ebb_status_t* ebb_image_to_tensor(const ebb_tensor_t* image, int channels, ebb_tensor_t** out) {
  constexpr const char* kFn = "ebb_image_to_tensor";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!out) return NullArgument(kFn, "out");
    *out = nullptr;
    if (!image) return NullArgument(kFn, "image");
    Result<Image> img = ImageOf(kFn, image->tensor);
    if (!img.ok()) return ToC(img.status());
    Result<Tensor> t = ImageToTensor(*img, channels);
    if (!t.ok()) return ToC(t.status());
    *out = new ebb_tensor_t{std::move(t).value()};
    return nullptr;
  });
}

ebb_status_t* ebb_tensor_to_image(const ebb_tensor_t* tensor, ebb_tensor_t** out) {
  constexpr const char* kFn = "ebb_tensor_to_image";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!out) return NullArgument(kFn, "out");
    *out = nullptr;
    if (!tensor) return NullArgument(kFn, "tensor");
    Result<Image> img = TensorToImage(tensor->tensor);
    if (!img.ok()) return ToC(img.status());
    return ImageTensor(*img, out);
  });
}

}  // extern "C"
