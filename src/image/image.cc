// Image files and image tensors. See ebb/image.h for the contract.
//
// PNG goes through libpng's simplified API (png_image_*), which catches its own
// errors and reports them in png_image::message. JPEG goes through libjpeg's
// decompress and compress APIs with an error manager whose error_exit longjmps
// back instead of exiting; see JpegReadHeader for the rules kept around setjmp.
#include "ebb/image.h"
#include "port.h"

#include <png.h>

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <utility>

// jpeglib.h needs size_t and FILE declared before it, and jerror.h needs
// jpeglib.h's configuration (some message codes exist only with it).
#include <jpeglib.h>
// (keep this order)
#include <jerror.h>

#include "file_access.h"

namespace ebb {
namespace {

// Images whose tensor would be larger than this are refused (ReadImage at the
// header, before anything is allocated; ImageToTensor and ImagesToBatch on the
// tensor): no model input needs more, and a few bytes of header must not be
// able to make us allocate without bound. ReadImage counts the largest tensor
// an image can become, kMaxTensorBytesPerPixel (4 FP32 channels) a pixel.
constexpr int64_t kMaxImageTensorBytes = int64_t{2} << 30;
constexpr int64_t kMaxTensorBytesPerPixel = 4 * sizeof(float);
constexpr size_t kMaxFileBytes = size_t{1} << 30;

bool ValidChannels(int64_t channels) { return channels == 1 || channels == 3 || channels == 4; }

std::string SizeString(int64_t width, int64_t height) { return std::to_string(width) + "x" + std::to_string(height); }

// ---------------------------------------------------------------------------
// Files

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// The file's bytes under the checked-file rules (file_access.h): a regular file (a FIFO or device is
// refused without blocking or reading), at most kMaxFileBytes, links followed (the user named it).
Result<std::vector<uint8_t>> ReadFileBytes(const std::string& path) {
  const detail::FileRules rules{.what = "image file", .follow_links = true, .max_bytes = kMaxFileBytes};
  Result<detail::CheckedFile> file = detail::CheckedFile::Open(path, rules);
  if (!file.ok()) return file.status();
  std::vector<uint8_t> bytes;
  try {
    bytes.resize(static_cast<size_t>(file->size()));
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory for the " + std::to_string(file->size()) + " bytes of image file " + path);
  }
  size_t filled = 0;
  while (true) {
    if (filled == bytes.size()) {
      if (bytes.size() >= kMaxFileBytes + 1) break;
      bytes.resize(std::min(kMaxFileBytes + 1, bytes.size() + 64 * 1024));  // it grew, or fstat said 0
    }
    Result<size_t> n = file->Read(bytes.data() + filled, bytes.size() - filled);
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    filled += *n;
  }
  if (filled > kMaxFileBytes) return InvalidArgument("image file " + path + " is larger than 1 GiB (it grew while it was read)");
  bytes.resize(filled);
  return bytes;
}

// Writes `bytes` (an encoded `format` file: "PNG", "JPEG") to `path`,
// replacing it; removes a partly written file.
Status WriteFileBytes(const std::string& path, const char* format, const std::vector<uint8_t>& bytes) {
  const std::string context = std::string("cannot write ") + format + " file " + path + ": ";
  File file(port::OpenFile(path, "wb"));
  if (!file) {
    // A path the caller gave wrong (no such folder, a folder, no permission) is the caller's error.
    const int err = errno;
    const bool callers = err == ENOENT || err == ENOTDIR || err == EISDIR || err == EACCES || err == EROFS;
    return Status(callers ? StatusCode::kInvalidArgument : StatusCode::kInternal, context + std::strerror(err));
  }
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), file.get()) == bytes.size();
  const int write_errno = errno;
  const bool closed = std::fclose(file.release()) == 0;
  if (written && closed) return Status::Ok();
  const int err = written ? errno : write_errno;
  std::remove(path.c_str());
  return Internal(context + std::strerror(err));
}

// Makes `image` width x height x channels with room for its pixels.
Status AllocatePixels(const std::string& path, int64_t width, int64_t height, int channels, Image* image) {
  // width and height come from a header: at most 2^32 - 1 each, so the product cannot overflow
  if (width <= 0 || height <= 0 || width * height > kMaxImageTensorBytes / kMaxTensorBytesPerPixel) {
    return InvalidArgument("image file " + path + " has an unsupported size of " + SizeString(width, height) +
                           " pixels (at most " + std::to_string(kMaxImageTensorBytes / kMaxTensorBytesPerPixel) +
                           " pixels: its tensor, 4 bytes a channel, must stay within 2 GiB)");
  }
  const int64_t bytes = width * height * channels;
  try {
    image->pixels.resize(static_cast<size_t>(bytes));
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory for the " + SizeString(width, height) + " pixels of image file " + path);
  }
  image->width = static_cast<int>(width);
  image->height = static_cast<int>(height);
  image->channels = channels;
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// PNG

constexpr uint8_t kPngMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

bool IsPng(const std::vector<uint8_t>& bytes) {
  return bytes.size() >= sizeof(kPngMagic) && std::memcmp(bytes.data(), kPngMagic, sizeof(kPngMagic)) == 0;
}

Status PngError(const std::string& path, const png_image& png) {
  return InvalidArgument("cannot decode PNG file " + path + ": " + png.message);
}

// The 8-bit output format for a PNG of `format`: gray stays gray, everything
// with colour or alpha becomes RGB or RGBA (palette and gray+alpha included).
png_uint_32 PngOutputFormat(png_uint_32 format) {
  const bool alpha = (format & PNG_FORMAT_FLAG_ALPHA) != 0;
  if (alpha) return PNG_FORMAT_RGBA;
  return (format & PNG_FORMAT_FLAG_COLOR) != 0 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
}

Result<Image> DecodePng(const std::string& path, const std::vector<uint8_t>& bytes) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  // On failure the simplified API has already freed its state.
  if (!png_image_begin_read_from_memory(&png, bytes.data(), bytes.size())) return PngError(path, png);
  png.format = PngOutputFormat(png.format);
  // 16-bit samples are sRGB-encoded like 8-bit ones, not linear: reduce them by
  // scaling rather than by gamma encoding.
  png.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
  Image image;
  Status status = AllocatePixels(path, png.width, png.height, PNG_IMAGE_SAMPLE_CHANNELS(png.format), &image);
  if (!status.ok()) {
    png_image_free(&png);
    return status;
  }
  if (!png_image_finish_read(&png, nullptr, image.pixels.data(), 0, nullptr)) return PngError(path, png);
  return image;
}

// ---------------------------------------------------------------------------
// JPEG

bool IsJpeg(const std::vector<uint8_t>& bytes) {
  return bytes.size() >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff;
}

// libjpeg error manager that longjmps to `jump` on an error, and on a warning
// that means pixels were lost, instead of exiting or printing.
struct JpegErrors {
  jpeg_error_mgr pub;  // first, so a j_common_ptr's err can be cast to this
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

JpegErrors* ErrorsOf(j_common_ptr cinfo) { return reinterpret_cast<JpegErrors*>(cinfo->err); }

[[noreturn]] void JpegErrorExit(j_common_ptr cinfo) {
  JpegErrors* errors = ErrorsOf(cinfo);
  errors->pub.format_message(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// Warnings libjpeg emits when it fills in pixels it could not decode:
// truncated or corrupt entropy-coded data.
bool LosesPixels(int code) {
  return code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER || code == JWRN_HUFF_BAD_CODE ||
         code == JWRN_ARITH_BAD_CODE || code == JWRN_MUST_RESYNC;
}

// True once every output row has been decoded: a file that then ends early
// (say, without its EOI marker) lost nothing.
bool AllRowsDecoded(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return false;
  const auto* dinfo = reinterpret_cast<j_decompress_ptr>(cinfo);
  return dinfo->output_height > 0 && dinfo->output_scanline >= dinfo->output_height;
}

void JpegEmitMessage(j_common_ptr cinfo, int msg_level) {
  if (msg_level < 0 && LosesPixels(cinfo->err->msg_code) && !AllRowsDecoded(cinfo)) JpegErrorExit(cinfo);
  // Other warnings (extraneous bytes, odd JFIF versions) and trace messages are
  // harmless and stay quiet.
}

void JpegOutputMessage(j_common_ptr) {}

// Frees a libjpeg compressor's or decompressor's memory on every way out.
struct JpegDestroyer {
  j_common_ptr cinfo;
  ~JpegDestroyer() { jpeg_destroy(cinfo); }
};

jpeg_error_mgr* InitJpegErrors(JpegErrors* errors) {
  std::memset(errors, 0, sizeof(*errors));
  jpeg_error_mgr* pub = jpeg_std_error(&errors->pub);
  pub->error_exit = JpegErrorExit;
  pub->emit_message = JpegEmitMessage;
  pub->output_message = JpegOutputMessage;
  return pub;
}

// The two phases below run libjpeg under setjmp. Rules that keep the longjmp
// defined: they create no C++ objects with destructors and modify no locals
// after setjmp; every C++ object lives in DecodeJpeg, outside their frames; and
// each phase arms `jump` itself, so no longjmp targets a frame that returned.
// They return false with errors->message set on failure.

bool JpegReadHeader(jpeg_decompress_struct* cinfo, JpegErrors* errors, const std::vector<uint8_t>& bytes) {
  if (setjmp(errors->jump)) return false;
  jpeg_create_decompress(cinfo);
  jpeg_mem_src(cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(cinfo, TRUE);
  return true;
}

bool JpegReadPixels(jpeg_decompress_struct* cinfo, JpegErrors* errors, Image* image) {
  if (setjmp(errors->jump)) return false;
  jpeg_start_decompress(cinfo);
  if (static_cast<int>(cinfo->output_width) != image->width ||
      static_cast<int>(cinfo->output_height) != image->height || cinfo->output_components != image->channels) {
    std::snprintf(errors->message, sizeof(errors->message), "unexpected output geometry");
    return false;
  }
  const size_t stride = static_cast<size_t>(image->width) * image->channels;
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = image->pixels.data() + cinfo->output_scanline * stride;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

Result<Image> DecodeJpeg(const std::string& path, const std::vector<uint8_t>& bytes) {
  jpeg_decompress_struct cinfo;
  std::memset(&cinfo, 0, sizeof(cinfo));  // so jpeg_destroy is safe whatever failed
  JpegErrors errors;
  cinfo.err = InitJpegErrors(&errors);
  JpegDestroyer destroyer{reinterpret_cast<j_common_ptr>(&cinfo)};

  const std::string context = "cannot decode JPEG file " + path + ": ";
  if (!JpegReadHeader(&cinfo, &errors, bytes)) return InvalidArgument(context + errors.message);
  int channels = 3;
  switch (cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE:
      cinfo.out_color_space = JCS_GRAYSCALE;
      channels = 1;
      break;
    case JCS_CMYK:
    case JCS_YCCK:
      return InvalidArgument(context + "CMYK JPEGs are not supported");
    default:
      cinfo.out_color_space = JCS_RGB;
      break;
  }
  Image image;
  EBB_RETURN_IF_ERROR(AllocatePixels(path, cinfo.image_width, cinfo.image_height, channels, &image));
  if (!JpegReadPixels(&cinfo, &errors, &image)) return InvalidArgument(context + errors.message);
  return image;
}

// A libjpeg destination that appends the compressed bytes to a vector, so that
// the file is written only once the whole image is encoded. Out of memory is
// reported through error_exit (a longjmp), never by throwing through libjpeg.
struct JpegSink {
  jpeg_destination_mgr pub;  // first, so a j_compress_ptr's dest can be cast to this
  std::vector<uint8_t>* bytes;
  JOCTET buffer[64 * 1024];
};

JpegSink* SinkOf(j_compress_ptr cinfo) { return reinterpret_cast<JpegSink*>(cinfo->dest); }

void SinkInit(j_compress_ptr cinfo) {
  JpegSink* sink = SinkOf(cinfo);
  sink->pub.next_output_byte = sink->buffer;
  sink->pub.free_in_buffer = sizeof(sink->buffer);
}

// Moves the first `n` bytes of the buffer to the vector and empties the buffer.
void SinkFlush(j_compress_ptr cinfo, size_t n) {
  JpegSink* sink = SinkOf(cinfo);
  bool ok = true;
  try {
    sink->bytes->insert(sink->bytes->end(), sink->buffer, sink->buffer + n);
  } catch (const std::bad_alloc&) {
    ok = false;
  }
  if (!ok) ERREXIT(cinfo, JERR_OUT_OF_MEMORY);  // no C++ object is alive here
  SinkInit(cinfo);
}

boolean SinkEmpty(j_compress_ptr cinfo) {
  SinkFlush(cinfo, sizeof(SinkOf(cinfo)->buffer));
  return TRUE;
}

void SinkTerm(j_compress_ptr cinfo) { SinkFlush(cinfo, sizeof(SinkOf(cinfo)->buffer) - cinfo->dest->free_in_buffer); }

// Compresses a valid gray or RGB image into `sink`, under the same setjmp rules
// as the decoding phases above. False with errors->message set on failure.
bool JpegEncode(jpeg_compress_struct* cinfo, JpegErrors* errors, JpegSink* sink, const Image& image, int quality) {
  if (setjmp(errors->jump)) return false;
  jpeg_create_compress(cinfo);
  cinfo->dest = &sink->pub;
  cinfo->image_width = static_cast<JDIMENSION>(image.width);
  cinfo->image_height = static_cast<JDIMENSION>(image.height);
  cinfo->input_components = image.channels;
  cinfo->in_color_space = image.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(cinfo);
  jpeg_set_quality(cinfo, quality, TRUE);
  jpeg_start_compress(cinfo, TRUE);
  const size_t stride = static_cast<size_t>(image.width) * image.channels;
  while (cinfo->next_scanline < cinfo->image_height) {
    // libjpeg only reads the rows it is given; its API is not const-correct.
    JSAMPROW row = const_cast<JSAMPLE*>(image.pixels.data() + cinfo->next_scanline * stride);
    jpeg_write_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_compress(cinfo);
  return true;
}

// ---------------------------------------------------------------------------
// Tensors

Status ValidateImage(const Image& image) {
  if (image.width <= 0 || image.height <= 0) {
    return InvalidArgument("image is " + SizeString(image.width, image.height) + "; width and height must be positive");
  }
  if (!ValidChannels(image.channels)) {
    return InvalidArgument("image has " + std::to_string(image.channels) + " channels; it must have 1, 3 or 4");
  }
  const int64_t expected = int64_t{image.width} * image.height * image.channels;
  if (static_cast<int64_t>(image.pixels.size()) != expected) {
    return InvalidArgument("image of " + SizeString(image.width, image.height) + "x" + std::to_string(image.channels) +
                           " needs " + std::to_string(expected) + " bytes of pixels but has " +
                           std::to_string(image.pixels.size()));
  }
  return Status::Ok();
}

Status ValidateTensorChannels(int channels) {
  if (ValidChannels(channels)) return Status::Ok();
  return InvalidArgument("an image tensor has 1, 3 or 4 channels, not " + std::to_string(channels));
}

// A float32 image tensor of `shape`, its bytes checked against kMaxImageTensorBytes first.
Result<Tensor> AllocateImageTensor(const Shape& shape) {
  Result<int64_t> bytes = CheckedByteSize(DataType::kFloat32, shape);
  if (!bytes.ok()) return bytes.status();
  if (*bytes > kMaxImageTensorBytes) {
    return InvalidArgument("an image tensor of shape " + ShapeToString(shape) + " would take " +
                           std::to_string(*bytes) + " bytes, more than the limit of 2 GiB");
  }
  return Tensor::Allocate(DataType::kFloat32, shape);
}

float Unit(uint8_t v) { return static_cast<float>(v) / 255.0f; }

float Luma(const uint8_t* rgb) {
  return std::min(1.0f, (0.299f * rgb[0] + 0.587f * rgb[1] + 0.114f * rgb[2]) / 255.0f);
}

// One pixel of `src` channels as `dst` floats (see ImageToTensor).
void PixelToFloats(const uint8_t* px, int src, int dst, float* out) {
  if (dst == 1) {
    out[0] = src == 1 ? Unit(px[0]) : Luma(px);
    return;
  }
  for (int c = 0; c < 3; ++c) out[c] = Unit(px[src == 1 ? 0 : c]);
  if (dst == 4) out[3] = src == 4 ? Unit(px[3]) : 1.0f;
}

// Writes a valid image as `channels` planes of height * width floats at `out`.
void ImageToPlanes(const Image& image, int channels, float* out) {
  const size_t plane = static_cast<size_t>(image.width) * image.height;
  const uint8_t* px = image.pixels.data();
  float values[4];
  for (size_t i = 0; i < plane; ++i, px += image.channels) {
    PixelToFloats(px, image.channels, channels, values);
    for (int c = 0; c < channels; ++c) out[c * plane + i] = values[c];
  }
}

uint8_t Quantize(float v) {
  if (!(v > 0.0f)) return 0;  // NaN too
  if (v >= 1.0f) return 255;
  return static_cast<uint8_t>(v * 255.0f + 0.5f);
}

// The image in `channels` planes of height * width floats at `planes`.
Image PlanesToImage(const float* planes, int channels, int height, int width) {
  Image image;
  image.width = width;
  image.height = height;
  image.channels = channels;
  const size_t plane = static_cast<size_t>(width) * height;
  image.pixels.resize(plane * channels);
  uint8_t* px = image.pixels.data();
  for (size_t i = 0; i < plane; ++i) {
    for (int c = 0; c < channels; ++c) *px++ = Quantize(planes[c * plane + i]);
  }
  return image;
}

// Checks that `tensor` is float32 and its last three dims are C, H, W of an
// image; `what` describes the shapes accepted.
Status ValidateImageTensor(const Tensor& tensor, const char* what) {
  const Shape& shape = tensor.shape();
  const std::string name = std::string(DataTypeName(tensor.type())) + ShapeToString(shape);
  if (tensor.type() != DataType::kFloat32) return InvalidArgument("image tensor must be FP32, not " + name);
  const size_t rank = shape.size();
  if (rank < 3) return InvalidArgument(std::string("image tensor must be ") + what + ", not " + name);
  const int64_t c = shape[rank - 3], h = shape[rank - 2], w = shape[rank - 1];
  const int64_t max = std::numeric_limits<int>::max();
  if (!ValidChannels(c) || h <= 0 || w <= 0 || h > max || w > max) {
    return InvalidArgument(std::string("image tensor must be ") + what + " with C of 1, 3 or 4 and H, W > 0, not " +
                           name);
  }
  return Status::Ok();
}

Image ItemToImage(const Tensor& tensor, int64_t item) {
  const Shape& shape = tensor.shape();
  const size_t rank = shape.size();
  const int64_t c = shape[rank - 3], h = shape[rank - 2], w = shape[rank - 1];
  const float* planes = tensor.values<float>().data() + item * c * h * w;
  return PlanesToImage(planes, static_cast<int>(c), static_cast<int>(h), static_cast<int>(w));
}

}  // namespace

Result<Image> ReadImage(const std::string& path) {
  Result<std::vector<uint8_t>> bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  return DecodeImage(*bytes, path);
}

Result<Image> DecodeImage(const std::vector<uint8_t>& bytes, const std::string& name) {
  if (IsPng(bytes)) return DecodePng(name, bytes);
  if (IsJpeg(bytes)) return DecodeJpeg(name, bytes);
  if (bytes.empty()) return InvalidArgument("image file " + name + " is empty");
  return InvalidArgument("image file " + name + " is neither PNG nor JPEG (unrecognised magic bytes)");
}

Status WritePng(const std::string& path, const Image& image) {
  EBB_RETURN_IF_ERROR(ValidateImage(image));
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = image.channels == 1 ? PNG_FORMAT_GRAY : image.channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_RGBA;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&png, nullptr, &size, 0, image.pixels.data(), 0, nullptr)) {
    return Internal("cannot encode PNG file " + path + ": " + png.message);
  }
  std::vector<uint8_t> encoded;
  try {
    encoded.resize(size);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory encoding PNG file " + path);
  }
  if (!png_image_write_to_memory(&png, encoded.data(), &size, 0, image.pixels.data(), 0, nullptr)) {
    return Internal("cannot encode PNG file " + path + ": " + png.message);
  }
  encoded.resize(size);
  return WriteFileBytes(path, "PNG", encoded);
}

Status WriteJpeg(const std::string& path, const Image& image, int quality) {
  EBB_RETURN_IF_ERROR(ValidateImage(image));
  if (image.channels == 4) {
    return InvalidArgument("cannot write JPEG file " + path + ": JPEG has no alpha channel; write RGBA images as PNG");
  }
  if (quality < 1 || quality > 100) {
    return InvalidArgument("JPEG quality must be 1..100, not " + std::to_string(quality));
  }
  if (image.width > JPEG_MAX_DIMENSION || image.height > JPEG_MAX_DIMENSION) {
    return InvalidArgument("cannot write JPEG file " + path + ": " + SizeString(image.width, image.height) +
                           " is larger than JPEG's " + std::to_string(JPEG_MAX_DIMENSION) + " pixels a side");
  }
  std::vector<uint8_t> encoded;
  JpegSink sink;
  sink.pub.init_destination = SinkInit;
  sink.pub.empty_output_buffer = SinkEmpty;
  sink.pub.term_destination = SinkTerm;
  sink.bytes = &encoded;
  jpeg_compress_struct cinfo;
  std::memset(&cinfo, 0, sizeof(cinfo));  // so jpeg_destroy is safe whatever failed
  JpegErrors errors;
  cinfo.err = InitJpegErrors(&errors);
  JpegDestroyer destroyer{reinterpret_cast<j_common_ptr>(&cinfo)};
  if (!JpegEncode(&cinfo, &errors, &sink, image, quality)) {
    const std::string message = "cannot encode JPEG file " + path + ": " + errors.message;
    return errors.pub.msg_code == JERR_OUT_OF_MEMORY ? ResourceExhausted(message) : Internal(message);
  }
  return WriteFileBytes(path, "JPEG", encoded);
}

Result<Tensor> ImageToTensor(const Image& image, int channels) {
  EBB_RETURN_IF_ERROR(ValidateImage(image));
  EBB_RETURN_IF_ERROR(ValidateTensorChannels(channels));
  Result<Tensor> tensor = AllocateImageTensor({1, channels, image.height, image.width});
  if (!tensor.ok()) return tensor.status();
  ImageToPlanes(image, channels, tensor->values<float>().data());
  return tensor;
}

Result<Tensor> ImagesToBatch(const std::vector<Image>& images, int channels) {
  if (images.empty()) return InvalidArgument("cannot make a batch of no images");
  EBB_RETURN_IF_ERROR(ValidateTensorChannels(channels));
  const Image& first = images.front();
  for (size_t i = 0; i < images.size(); ++i) {
    Status status = ValidateImage(images[i]);
    if (!status.ok()) return InvalidArgument("image " + std::to_string(i) + " of the batch: " + status.message());
    if (images[i].width != first.width || images[i].height != first.height) {
      return InvalidArgument("images of a batch must have one size: image " + std::to_string(i) + " is " +
                             SizeString(images[i].width, images[i].height) + " but image 0 is " +
                             SizeString(first.width, first.height));
    }
  }
  const int64_t n = static_cast<int64_t>(images.size());
  Result<Tensor> tensor = AllocateImageTensor({n, channels, first.height, first.width});
  if (!tensor.ok()) return tensor.status();
  const size_t item = static_cast<size_t>(channels) * first.width * first.height;
  float* out = tensor->values<float>().data();
  for (const Image& image : images) {
    ImageToPlanes(image, channels, out);
    out += item;
  }
  return tensor;
}

Result<Image> TensorToImage(const Tensor& tensor) {
  constexpr const char* kWhat = "[1,C,H,W] or [C,H,W]";
  EBB_RETURN_IF_ERROR(ValidateImageTensor(tensor, kWhat));
  const Shape& shape = tensor.shape();
  if (shape.size() > 4 || (shape.size() == 4 && shape[0] != 1)) {
    return InvalidArgument(std::string("image tensor must be ") + kWhat + ", not " + DataTypeName(tensor.type()) +
                           ShapeToString(shape));
  }
  return ItemToImage(tensor, 0);
}

Result<Image> BatchItemToImage(const Tensor& batch, int64_t n) {
  constexpr const char* kWhat = "[N,C,H,W]";
  EBB_RETURN_IF_ERROR(ValidateImageTensor(batch, kWhat));
  const Shape& shape = batch.shape();
  if (shape.size() != 4) {
    return InvalidArgument(std::string("image batch must be ") + kWhat + ", not " + DataTypeName(batch.type()) +
                           ShapeToString(shape));
  }
  if (n < 0 || n >= shape[0]) {
    return InvalidArgument("image " + std::to_string(n) + " is outside the batch " + ShapeToString(shape));
  }
  return ItemToImage(batch, n);
}

}  // namespace ebb
