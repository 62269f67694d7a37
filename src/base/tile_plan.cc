// The tile plan of include/ebb/tiler.h (TileOptionsFor, PlanTiles): arithmetic over a frame's size,
// in base/ so that what validates tile options (model/'s config.json reader) does not reach runtime/,
// where the tiled runs are (runtime/tiler.cc).
#include <algorithm>
#include <string>
#include <vector>

#include "ebb/tiler.h"

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

}  // namespace

TileOptions TileOptionsFor(const TileOptions& options, int64_t height, int64_t width) {
  if (!PlanTiles(1, 1, options).ok()) return options;  // refused later, as it is
  TileOptions o = options;
  if (std::max(height, width) <= options.tile) {
    o.tile = std::max(height, width);
    o.overlap = 0;
  }
  return o;
}

Result<std::vector<TileRect>> PlanTiles(int64_t height, int64_t width, const TileOptions& options) {
  // tile > 2 * overlap, written so that neither can overflow
  if (options.overlap < 0 || options.tile < 1 || options.overlap > (options.tile - 1) / 2) {
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

}  // namespace ebb
