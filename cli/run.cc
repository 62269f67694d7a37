// `ebb run`: an image-to-image model over one or more images as ONE
// operation (frames; tiled when asked), with a progress bar on a terminal and,
// on request, a memory report sampled at every run and its timeline plot.
// Outputs are PNG or JPEG as their extensions say, checked before any work.

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "ebb/image.h"
#include "ebb/model_config.h"
#include "plot.h"
#include "ebb/tiler.h"
#include "port.h"

namespace ebb::cli {
namespace {

enum class ImageFormat { kPng, kJpeg };

// The format an output file's extension names (case-insensitive).
Result<ImageFormat> OutputFormat(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext == ".png") return ImageFormat::kPng;
  if (ext == ".jpg" || ext == ".jpeg") return ImageFormat::kJpeg;
  return InvalidArgument("cannot write '" + path + "': " +
                         (ext.empty() ? std::string("no file extension") : "unknown image extension '" + ext + "'") +
                         " (use .png, .jpg or .jpeg)");
}

// A file can be written at `path` only into a folder that is there.
Status CheckOutputFolder(const std::string& path, const char* what) {
  const std::filesystem::path folder = port::PathFromUtf8(path).parent_path();
  std::error_code ec;
  if (folder.empty() || std::filesystem::is_directory(folder, ec)) return Status::Ok();
  return InvalidArgument(std::string("cannot write ") + what + " '" + path + "': there is no folder '" +
                         port::Utf8FromPath(folder) + "'");
}

// Every output's format and folder (images, report, plot), checked before any work is done.
Result<std::vector<ImageFormat>> OutputFormats(const RunOptions& o) {
  if (o.jpeg_quality < 1 || o.jpeg_quality > 100) {
    return InvalidArgument("--jpeg-quality must be 1..100, not " + std::to_string(o.jpeg_quality));
  }
  std::vector<ImageFormat> formats;
  for (const std::string& path : o.outputs) {
    auto format = OutputFormat(path);
    if (!format.ok()) return format.status();
    EBB_RETURN_IF_ERROR(CheckOutputFolder(path, "output"));
    formats.push_back(*format);
  }
  if (!o.memory_report.empty()) EBB_RETURN_IF_ERROR(CheckOutputFolder(o.memory_report, "--memory-report"));
  if (!o.plot.empty()) EBB_RETURN_IF_ERROR(CheckOutputFolder(o.plot, "--plot"));
  return formats;
}

Status WriteOutput(const std::string& path, ImageFormat format, const Image& image, int jpeg_quality) {
  return format == ImageFormat::kJpeg ? WriteJpeg(path, image, jpeg_quality) : WritePng(path, image);
}

Status CheckImageToImage(const Session& s, const std::vector<ImageFormat>& formats) {
  if (s.inputs().size() != 1 || s.outputs().empty() || s.inputs()[0].shape.size() != 4 ||
      s.outputs()[0].shape.size() != 4) {
    return InvalidArgument("model '" + s.name() + "' is not image-to-image: it must take one [N,C,H,W] input and give a [N,C,H,W] output");
  }
  const bool jpeg = std::find(formats.begin(), formats.end(), ImageFormat::kJpeg) != formats.end();
  if (jpeg && s.outputs()[0].shape[1] == 4) {
    return InvalidArgument("model '" + s.name() + "' gives RGBA images and JPEG has no alpha channel: write .png");
  }
  return Status::Ok();
}

void DrawProgress(const Progress& p) {
  constexpr int kWidth = 30;
  const int filled = p.total ? p.done * kWidth / p.total : kWidth;
  std::printf("\r[%s%s] %d/%d runs", std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(),
              p.done, p.total);
  if (p.done == p.total) std::printf("\n");
  std::fflush(stdout);
}

// Samples memory at every run for the report and the plot.
class MemoryRecorder {
 public:
  explicit MemoryRecorder(Runtime& runtime) : runtime_(runtime), start_(NowMs()) {}

  void Sample(const std::string& label, bool release) {
    MemoryReading r = runtime_.ReadMemory();
    TimelineSample s;
    s.t_ms = NowMs() - start_;
    for (const ArenaStats& a : r.arenas) {
      s.reserved += a.reserved;
      s.in_use += a.in_use;
    }
    s.rss = r.rss_bytes;
    s.label = label;
    s.release = release;
    samples_.push_back(s);
  }

  const std::vector<TimelineSample>& samples() const { return samples_; }

  nlohmann::json ToJson() const {
    nlohmann::json list = nlohmann::json::array();
    int64_t peak = 0;
    for (const TimelineSample& s : samples_) {
      peak = std::max(peak, s.reserved);
      list.push_back({{"t_ms", s.t_ms}, {"label", s.label}, {"release", s.release}, {"reserved", s.reserved},
                      {"in_use", s.in_use}, {"rss", s.rss}});
    }
    return {{"samples", list},
            {"reserved_peak", peak},
            {"reserved_after", samples_.empty() ? 0 : samples_.back().reserved},
            {"rss_after", samples_.empty() ? 0 : samples_.back().rss}};
  }

 private:
  Runtime& runtime_;
  double start_;
  std::vector<TimelineSample> samples_;
};

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(port::PathFromUtf8(path));
  out << text;
  out.close();
  if (!out) return Internal("cannot write '" + path + "'");
  return Status::Ok();
}

Result<std::vector<Tensor>> ReadFrames(const std::vector<std::string>& paths, const Session& session) {
  const int64_t declared = session.inputs()[0].shape[1];
  const int channels = declared > 0 ? static_cast<int>(declared) : 3;
  std::vector<Tensor> frames;
  for (const std::string& path : paths) {
    auto image = ReadImage(path);
    if (!image.ok()) return image.status();
    auto tensor = ImageToTensor(*image, channels);
    if (!tensor.ok()) return Status(tensor.status().code(), path + ": " + tensor.status().message());
    frames.push_back(std::move(tensor).value());
  }
  return frames;
}

}  // namespace

int RunImages(const RunOptions& o) {
  if (o.inputs.empty() || o.inputs.size() != o.outputs.size()) {
    return Fail(InvalidArgument("give one --output per --input (" + std::to_string(o.inputs.size()) + " inputs, " +
                                std::to_string(o.outputs.size()) + " outputs)"));
  }
  auto formats = OutputFormats(o);
  if (!formats.ok()) return Fail(formats.status());
  auto model = ResolveModel(o.model, o.common);
  if (!model.ok()) return Fail(model.status());
  const ModelConfig& config = model->config;
  auto runtime = MakeRuntime(o.common);
  if (!runtime) return 1;
  auto session = LoadOrReport(*runtime, *model, o.common);
  if (!session) return 1;
  if (Status st = CheckImageToImage(*session, *formats); !st.ok()) return Fail(st);
  auto frames = ReadFrames(o.inputs, *session);
  if (!frames.ok()) return Fail(frames.status());

  std::optional<TileOptions> tile = config.tile;
  if (o.tile > 0) {
    tile = tile.value_or(TileOptions{});
    tile->tile = o.tile;
    if (o.overlap >= 0) tile->overlap = o.overlap;
  }
  MemoryRecorder recorder(*runtime);
  recorder.Sample("loaded", false);
  RunObserver observer = [&](const RunRecord& r) {
    recorder.Sample("run " + std::to_string(r.sequence), !r.release_spec.empty() || r.trimmed);
  };
  OperationOptions options;
  options.observer = &observer;
  if (port::StdoutIsTerminal()) options.on_progress = DrawProgress;
  auto results = tile ? RunTiled(*runtime, session, *frames, *tile, options)
                      : RunPerFrame(*runtime, session, *frames, options);
  if (!results.ok()) return Fail(results.status());
  recorder.Sample("done", false);

  for (size_t i = 0; i < results->size(); ++i) {
    auto image = TensorToImage((*results)[i]);
    if (!image.ok()) return Fail(image.status());
    if (Status st = WriteOutput(o.outputs[i], (*formats)[i], *image, o.jpeg_quality); !st.ok()) return Fail(st);
    std::printf("%s -> %s (%dx%d)\n", o.inputs[i].c_str(), o.outputs[i].c_str(), image->width, image->height);
  }
  if (!o.memory_report.empty()) {
    nlohmann::json report = recorder.ToJson();
    report["model"] = session->name();
    report["device"] = session->device().ToString();
    if (Status st = WriteText(o.memory_report, report.dump(2) + "\n"); !st.ok()) return Fail(st);
  }
  if (!o.plot.empty()) {
    const std::string title = "ebb run " + session->name() + ": " + std::to_string(o.inputs.size()) + " frame(s)" +
                              (tile ? ", tiles of " + std::to_string(tile->tile) : "");
    if (Status st = WriteText(o.plot, TimelineSvg(recorder.samples(), title)); !st.ok()) return Fail(st);
  }
  return 0;
}

}  // namespace ebb::cli
