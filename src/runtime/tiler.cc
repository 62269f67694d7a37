#include "ebb/tiler.h"
#include "ebb/memory_stats.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string_view>


namespace ebb {
namespace {

// Copies core rows of one tile output [k,C,sT,sT] (item `item`) into the
// frame result [1,C,sH,sW].
void PasteCore(const Tensor& tiles, int64_t item, const TileRect& r, int64_t scale, Tensor* result) {
  const int64_t channels = tiles.shape()[1], tile_h = tiles.shape()[2], tile_w = tiles.shape()[3];
  const int64_t out_h = result->shape()[2], out_w = result->shape()[3];
  const size_t esize = ElementSize(tiles.type());
  const int64_t src_y = (r.core_y - r.window_y) * scale, src_x = (r.core_x - r.window_x) * scale;
  const int64_t rows = r.core_h * scale, cols = r.core_w * scale;
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t y = 0; y < rows; ++y) {
      const std::byte* src = tiles.data() + (((item * channels + c) * tile_h + src_y + y) * tile_w + src_x) * esize;
      std::byte* dst = result->data() + ((c * out_h + r.core_y * scale + y) * out_w + r.core_x * scale) * esize;
      std::memcpy(dst, src, static_cast<size_t>(cols) * esize);
    }
  }
}

Status CheckFrame(const Session& session, const Tensor& frame) {
  const Shape& s = frame.shape();
  if (s.size() != 4 || s[0] != 1 || s[1] < 1 || s[2] < 1 || s[3] < 1) {
    return InvalidArgument("tiling needs frames of shape [1,C,H,W], got " + ShapeToString(s));
  }
  const TensorInfo& in = session.inputs()[0];
  if (in.shape.size() != 4 || (in.shape[1] >= 0 && in.shape[1] != s[1])) {
    return InvalidArgument("model '" + session.name() + "' takes " + ShapeToString(in.shape) + " (-1 = any); a frame " +
                           ShapeToString(s) + " does not fit");
  }
  return Status::Ok();
}

// The options for every frame of an operation (TileOptionsFor over the largest height and width among
// them, so that all its runs keep one input shape), unless the model's input has a fixed height and
// width. REQUIRES: the frames passed CheckFrame.
TileOptions SharedTileOptions(const TensorInfo& input, const std::vector<Tensor>& frames, const TileOptions& options) {
  if (input.shape.size() == 4 && input.shape[2] >= 0 && input.shape[3] >= 0) return options;
  int64_t height = 1, width = 1;
  for (const Tensor& frame : frames) {
    height = std::max(height, frame.shape()[2]);
    width = std::max(width, frame.shape()[3]);
  }
  return TileOptionsFor(options, height, width);
}

// Whether a batch of `k` tiles of `tile` pixels from `frame`, and the model's output for it (at least
// the same channels, `scale` times the side; 1 when not known yet), can exist: the output lives in
// the shared arena, so it must fit its cap, and both must fit the memory this process may have.
// Checked before anything is allocated. Errors: kInvalidArgument when a size overflows,
// kResourceExhausted when it cannot fit.
Status CheckBatchFits(const Runtime& runtime, const Tensor& frame, int64_t tile, int64_t scale, int k) {
  const std::string what = "a batch of " + std::to_string(k) + " tile(s) of " + std::to_string(tile) + "x" +
                           std::to_string(tile) + " pixels";
  int64_t out_side = 0;
  if (__builtin_mul_overflow(tile, std::max<int64_t>(scale, 1), &out_side)) {
    return InvalidArgument(what + " is too large: its output side overflows");
  }
  const int64_t channels = frame.shape()[1];
  Result<int64_t> in = CheckedByteSize(frame.type(), {k, channels, tile, tile});
  Result<int64_t> out = CheckedByteSize(frame.type(), {k, channels, out_side, out_side});
  if (!in.ok() || !out.ok()) return InvalidArgument(what + ": " + (in.ok() ? out : in).status().message());
  const int64_t cap = runtime.shared_arena_cap();
  if (cap > 0 && *out > cap) {
    return ResourceExhausted(what + " needs " + std::to_string(*out) + " bytes of arena for its output alone, more "
                             "than the shared arena's cap of " + std::to_string(cap) +
                             ": use smaller tiles or fewer tiles per run");
  }
  const int64_t memory = PhysicalMemoryBytes();  // the machine's, capped by the process's limit
  if (memory > 0 && (*in > memory - *out || *out > memory)) {
    return ResourceExhausted(what + " and its output need " + std::to_string(*in) + " + " + std::to_string(*out) +
                             " bytes, more than the " + std::to_string(memory) +
                             " bytes of memory this process may have: use smaller tiles or fewer tiles per run");
  }
  return Status::Ok();
}

// The ebb.scale metadata of a model; 0 when absent. Errors: a value that is not a positive integer.
Result<int64_t> MetadataScale(const Session& session) {
  const std::string text = session.metadata("ebb.scale");
  if (text.empty()) return int64_t{0};
  int64_t scale = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), scale);
  if (ec != std::errc() || end != text.data() + text.size() || scale < 1) {
    return InvalidArgument("model '" + session.name() + "' has ebb.scale metadata '" + text.substr(0, 32) +
                           "', not a positive integer");
  }
  return scale;
}

// State of one tiled operation: the frames' plans, tile sides and results.
struct TiledJob {
  const std::vector<Tensor>& frames;
  TileOptions options;
  std::vector<std::vector<TileRect>> plans;
  std::vector<int64_t> tiles;  // per frame (one for the operation: SharedTileOptions)
  std::vector<Tensor> results;
  int64_t scale = 0;

  Result<std::vector<NamedTensor>> MakeBatch(const Session& session, size_t f, size_t first) const {
    const int k = options.tiles_per_run;
    const Tensor& frame = frames[f];
    Result<Tensor> batch = Tensor::Allocate(frame.type(), {k, frame.shape()[1], tiles[f], tiles[f]});
    if (!batch.ok()) return batch.status();
    for (int i = 0; i < k; ++i) {
      // The last batch of a frame repeats its last tile to keep the shape fixed.
      const TileRect& r = plans[f][std::min(first + i, plans[f].size() - 1)];
      Tensor tile = ExtractTile(frame, 0, r, tiles[f]);
      std::memcpy(batch->data() + i * tile.byte_size(), tile.data(), tile.byte_size());
    }
    std::vector<NamedTensor> in;
    in.push_back({session.inputs()[0].name, std::move(batch).value()});
    return in;
  }

  Status TakeBatch(size_t f, size_t first, const Tensor& out) {
    const Shape& s = out.shape();
    if (s.size() != 4 || s[0] != options.tiles_per_run) {
      return InvalidArgument("a tiled model must return [k,C,H,W] per batch of k tiles; got " + ShapeToString(s));
    }
    const int64_t tile = tiles[f];
    if (scale == 0) scale = s[2] / tile;
    if (scale < 1 || s[2] != tile * scale || s[3] != tile * scale) {
      return InvalidArgument("tile output " + ShapeToString(s) + " is not the " + std::to_string(tile) +
                             "-pixel tile scaled by " + std::to_string(scale));
    }
    if (results[f].shape().empty()) {
      Result<Tensor> result =
          Tensor::Allocate(out.type(), {1, s[1], frames[f].shape()[2] * scale, frames[f].shape()[3] * scale});
      if (!result.ok()) return result.status();
      results[f] = std::move(result).value();
    }
    const size_t count = std::min(plans[f].size() - first, static_cast<size_t>(options.tiles_per_run));
    for (size_t i = 0; i < count; ++i) PasteCore(out, static_cast<int64_t>(i), plans[f][first + i], scale, &results[f]);
    return Status::Ok();
  }
};

}  // namespace

Tensor ExtractTile(const Tensor& image, int64_t n, const TileRect& rect, int64_t tile) {
  const int64_t channels = image.shape()[1], h = image.shape()[2], w = image.shape()[3];
  const size_t esize = ElementSize(image.type());
  Tensor out(image.type(), {1, channels, tile, tile});
  for (int64_t c = 0; c < channels; ++c) {
    const std::byte* plane = image.data() + ((n * channels + c) * h * w) * esize;
    for (int64_t y = 0; y < tile; ++y) {
      const int64_t sy = std::clamp(rect.window_y + y, int64_t{0}, h - 1);
      std::byte* dst = out.data() + ((c * tile + y) * tile) * esize;
      const std::byte* row = plane + sy * w * esize;
      // Inside the image the row is one copy; past its right edge, repeat the edge pixel.
      const int64_t inside = std::clamp(w - rect.window_x, int64_t{0}, tile);
      std::memcpy(dst, row + rect.window_x * esize, static_cast<size_t>(inside) * esize);
      for (int64_t x = inside; x < tile; ++x) std::memcpy(dst + x * esize, row + (w - 1) * esize, esize);
    }
  }
  return out;
}

Result<std::vector<Tensor>> RunTiled(Runtime& runtime, const std::shared_ptr<Session>& session,
                                     const std::vector<Tensor>& frames, const TileOptions& tiles,
                                     const OperationOptions& options) {
  if (session->inputs().empty() || session->outputs().empty()) {
    return InvalidArgument("model '" + session->name() + "' is not an image-to-image model");
  }
  TiledJob job{frames, tiles, {}, {}, std::vector<Tensor>(frames.size()), tiles.scale};
  if (job.scale == 0) {
    Result<int64_t> scale = MetadataScale(*session);
    if (!scale.ok()) return scale.status();
    job.scale = *scale;
  }
  Operation op(runtime, options);
  for (const Tensor& frame : frames) EBB_RETURN_IF_ERROR(CheckFrame(*session, frame));
  const TileOptions frame_tiles = SharedTileOptions(session->inputs()[0], frames, tiles);
  for (size_t f = 0; f < frames.size(); ++f) {
    Result<std::vector<TileRect>> plan = PlanTiles(frames[f].shape()[2], frames[f].shape()[3], frame_tiles);
    if (!plan.ok()) return plan.status();
    EBB_RETURN_IF_ERROR(CheckBatchFits(runtime, frames[f], frame_tiles.tile, job.scale, tiles.tiles_per_run));
    job.plans.push_back(std::move(plan).value());
    job.tiles.push_back(frame_tiles.tile);
    for (size_t first = 0; first < job.plans[f].size(); first += static_cast<size_t>(tiles.tiles_per_run)) {
      op.AddStep(
          session, [&job, &session, f, first] { return job.MakeBatch(*session, f, first); },
          [&job, f, first](std::vector<NamedTensor> out) { return job.TakeBatch(f, first, out[0].tensor); },
          {session->outputs()[0].name});
    }
  }
  EBB_RETURN_IF_ERROR(op.Execute());
  return std::move(job.results);
}

}  // namespace ebb
