// ebb/image.h — reading and writing image files, and moving images in and out of tensors.
//
// ReadImage decodes PNG (libpng's simplified API) and JPEG (libjpeg-turbo)
// files, recognised by their magic bytes, never by the file name. A corrupt,
// truncated or unsupported file is an error with the file named in it; it never
// crashes or exits the process. WritePng writes 8-bit PNGs, WriteJpeg baseline
// JPEGs (libjpeg-turbo). The tensor functions convert between 8-bit HWC images
// and float32 NCHW tensors with values in [0,1], the layout image models take.
//
// Thread safety: every function is reentrant (each call owns its codec
// state); distinct calls may run on different threads at once.
// Ownership: Image is a plain value that owns its pixels; results belong to the
// caller.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ebb/status.h"
#include "ebb/tensor.h"

namespace ebb {

// An 8-bit image, interleaved rows (HWC), 1 (gray), 3 (RGB) or 4 (RGBA)
// channels. Valid when width, height > 0, channels is 1, 3 or 4 and
// pixels.size() == width * height * channels.
struct Image {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;
};

// Reads a PNG or JPEG file (detected by its magic bytes, not the extension).
// PNG: gray stays gray, RGB stays RGB; palette becomes RGB (RGBA when it has
// transparency), gray+alpha becomes RGBA; 16-bit samples are reduced to 8 bit
// (treated as sRGB, as 8-bit samples are). JPEG: gray stays gray, anything
// else becomes RGB; CMYK JPEGs are not supported. A file whose data ends early
// or is corrupt enough to lose pixels is an error, never a gray-filled image;
// one that lacks only its end marker (PNG IEND, JPEG EOI) lost none and is read.
// The file is opened under the checked-file rules: a regular file (a FIFO or a
// device is refused without blocking or reading), at most 1 GiB, links
// followed. Errors: kNotFound for a missing file; kInvalidArgument, naming the
// file, for one that is not a regular file, cannot be read, is corrupt,
// truncated or unsupported, or has more pixels than a 2 GiB tensor holds at 4
// FP32 channels (2^27 pixels, e.g. 11585x11585: refused from its header,
// before anything is allocated); kResourceExhausted when the pixels cannot be
// allocated.
Result<Image> ReadImage(const std::string& path);

// Decodes an encoded PNG or JPEG file held in memory, as ReadImage does;
// `name` stands for the file in error messages (a request's input element).
Result<Image> DecodeImage(const std::vector<uint8_t>& bytes, const std::string& name);

// Writes `image` as an 8-bit PNG (gray, RGB or RGBA), replacing the file.
// Errors: kInvalidArgument for an invalid image; kInternal, naming the file,
// when it cannot be written.
Status WritePng(const std::string& path, const Image& image);

// The quality WriteJpeg uses unless told otherwise: high enough that a
// model's output shows no visible blocking, at a fraction of a PNG's size.
inline constexpr int kDefaultJpegQuality = 90;

// Writes `image` as a baseline JPEG (gray or RGB; 4:2:0 chroma subsampling for
// RGB, as libjpeg's defaults give) at `quality` 1..100, replacing the file.
// JPEG has no alpha channel: an RGBA image is refused, never silently
// flattened. The file is written only once the whole image is encoded.
// Errors: kInvalidArgument for an invalid image, an RGBA image, or a quality
// outside 1..100; kInternal, naming the file, when it cannot be written.
Status WriteJpeg(const std::string& path, const Image& image, int quality = kDefaultJpegQuality);

// A [1,C,H,W] float32 tensor with values v / 255 from an image. `channels`
// selects the tensor's C: 3 gives RGB (gray is replicated, alpha dropped);
// 1 gives luma, 0.299 R + 0.587 G + 0.114 B (ITU-R BT.601), or gray as is;
// 4 gives RGBA (alpha 1 where the image has none).
// Errors: kInvalidArgument for an invalid image or channel count, or a tensor
// over 2 GiB; kResourceExhausted when it cannot be allocated.
Result<Tensor> ImageToTensor(const Image& image, int channels);

// Several images of the same width and height into one [N,C,H,W] tensor, item
// n from images[n], converted as ImageToTensor does. The images may differ in
// their channel counts. Errors: kInvalidArgument for an empty list, an invalid
// image, images whose sizes differ (the message names their indices and
// sizes), or a tensor over 2 GiB; kResourceExhausted when it cannot be
// allocated.
Result<Tensor> ImagesToBatch(const std::vector<Image>& images, int channels);

// An image from a [1,C,H,W] or [C,H,W] float32 tensor: values are clamped to
// [0,1] (NaN counts as 0) and scaled to 0..255 with rounding. C must be 1, 3
// or 4 and gives the image's channels. Errors: kInvalidArgument, with the
// shape in the message, for any other type or shape.
Result<Image> TensorToImage(const Tensor& tensor);

// Image n of a [N,C,H,W] float32 batch, converted as TensorToImage does.
// Errors: kInvalidArgument for a bad shape or type, or n outside [0,N).
Result<Image> BatchItemToImage(const Tensor& batch, int64_t n);

}  // namespace ebb
