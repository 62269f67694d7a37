#include "ebb/tiler.h"

#include <algorithm>
#include <cstring>

namespace ebb {
namespace {

struct AxisTile {
  int64_t window, core, length;
};

// Cores of (tile - 2*overlap) along one axis, each in a window of `tile`
// that keeps `overlap` of context or touches the image border.
std::vector<AxisTile> PlanAxis(int64_t length, int64_t tile, int64_t overlap) {
  const int64_t core = tile - 2 * overlap;
  std::vector<AxisTile> tiles;
  for (int64_t start = 0; start < length; start += core) {
    int64_t window = length >= tile ? std::clamp(start - overlap, int64_t{0}, length - tile) : 0;
    tiles.push_back({window, start, std::min(core, length - start)});
  }
  return tiles;
}

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

// State of one tiled operation: the frames' plans and results.
struct TiledJob {
  const std::vector<Tensor>& frames;
  TileOptions options;
  std::vector<std::vector<TileRect>> plans;
  std::vector<Tensor> results;
  int64_t scale = 0;

  Result<std::vector<NamedTensor>> MakeBatch(const Session& session, size_t f, size_t first) const {
    const int k = options.tiles_per_run;
    const Tensor& frame = frames[f];
    Tensor batch(frame.type(), {k, frame.shape()[1], options.tile, options.tile});
    for (int i = 0; i < k; ++i) {
      // The last batch of a frame repeats its last tile to keep the shape fixed.
      const TileRect& r = plans[f][std::min(first + i, plans[f].size() - 1)];
      Tensor tile = ExtractTile(frame, 0, r, options.tile);
      std::memcpy(batch.data() + i * tile.byte_size(), tile.data(), tile.byte_size());
    }
    std::vector<NamedTensor> in;
    in.push_back({session.inputs()[0].name, std::move(batch)});
    return in;
  }

  Status TakeBatch(size_t f, size_t first, const Tensor& out) {
    const Shape& s = out.shape();
    if (s.size() != 4 || s[0] != options.tiles_per_run) {
      return InvalidArgument("a tiled model must return [k,C,H,W] per batch of k tiles; got " + ShapeToString(s));
    }
    if (scale == 0) scale = s[2] / options.tile;
    if (scale < 1 || s[2] != options.tile * scale || s[3] != options.tile * scale) {
      return InvalidArgument("tile output " + ShapeToString(s) + " is not the " + std::to_string(options.tile) +
                             "-pixel tile scaled by " + std::to_string(scale));
    }
    if (results[f].shape().empty()) {
      results[f] = Tensor(out.type(), {1, s[1], frames[f].shape()[2] * scale, frames[f].shape()[3] * scale});
    }
    const size_t count = std::min(plans[f].size() - first, static_cast<size_t>(options.tiles_per_run));
    for (size_t i = 0; i < count; ++i) PasteCore(out, static_cast<int64_t>(i), plans[f][first + i], scale, &results[f]);
    return Status::Ok();
  }
};

}  // namespace

Result<std::vector<TileRect>> PlanTiles(int64_t height, int64_t width, const TileOptions& options) {
  if (options.tile <= 2 * options.overlap || options.overlap < 0) {
    return InvalidArgument("tile size " + std::to_string(options.tile) + " must exceed twice the overlap (" +
                           std::to_string(options.overlap) + ")");
  }
  if (height < 1 || width < 1) return InvalidArgument("an image must have positive height and width");
  if (options.tiles_per_run < 1) return InvalidArgument("tiles_per_run must be at least 1");
  std::vector<TileRect> tiles;
  for (const AxisTile& y : PlanAxis(height, options.tile, options.overlap)) {
    for (const AxisTile& x : PlanAxis(width, options.tile, options.overlap)) {
      tiles.push_back({y.window, x.window, y.core, x.core, y.length, x.length});
    }
  }
  return tiles;
}

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
  TiledJob job{frames, tiles, {}, std::vector<Tensor>(frames.size()), tiles.scale};
  if (job.scale == 0 && !session->metadata("ebb.scale").empty()) job.scale = std::stoll(session->metadata("ebb.scale"));
  Operation op(runtime, options);
  for (size_t f = 0; f < frames.size(); ++f) {
    EBB_RETURN_IF_ERROR(CheckFrame(*session, frames[f]));
    Result<std::vector<TileRect>> plan = PlanTiles(frames[f].shape()[2], frames[f].shape()[3], tiles);
    if (!plan.ok()) return plan.status();
    job.plans.push_back(std::move(plan).value());
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
