// libFuzzer target: the tiling parameters (ebb/tiler.h) as a caller or a model's config gives them:
// any tile, overlap and tiles_per_run over an image of up to 48x48. Beyond the sanitizers (a tile
// whose size wrapped overflowed the heap in ExtractTile, issue 32), it checks that TileOptionsFor
// never asks a tile larger than the options' or, for an image one tile covers, than the image's
// larger side (then one tile without overlap), and keeps options valid or invalid; that an accepted
// plan's cores cover every pixel exactly once inside windows of the tile, and that every window
// extracts from an image of random pixels the pixels it names (edges repeated past the border).
// Input: height, width (1 byte each), channels (1 byte), tile, overlap (8 bytes each), tiles_per_run
// (4 bytes).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ebb/tiler.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ebb;
  using fuzz::Expect;
  using fuzz::Take;
  const int64_t height = Take<uint8_t>(data, size) % 48 + 1;
  const int64_t width = Take<uint8_t>(data, size) % 48 + 1;
  const int64_t channels = Take<uint8_t>(data, size) % 3 + 1;
  TileOptions options;
  options.tile = Take<int64_t>(data, size);
  options.overlap = Take<int64_t>(data, size);
  options.tiles_per_run = Take<int32_t>(data, size);

  const TileOptions clamped = TileOptionsFor(options, height, width);
  const int64_t side = clamped.tile;
  Result<std::vector<TileRect>> plan = PlanTiles(height, width, clamped);
  Expect(plan.ok() == PlanTiles(height, width, options).ok());  // clamping never makes options valid or invalid
  if (!plan.ok()) {
    Expect(plan.status().code() == StatusCode::kInvalidArgument);
    return 0;
  }
  Expect(side >= 1 && side <= options.tile && clamped.overlap <= options.overlap);
  if (std::max(height, width) <= options.tile) {
    Expect(side == std::max(height, width) && clamped.overlap == 0 && plan->size() == 1);
  } else {
    Expect(side == options.tile && clamped.overlap == options.overlap);
  }

  std::vector<int> covered(static_cast<size_t>(height * width), 0);
  Tensor image(DataType::kFloat32, {1, channels, height, width});
  auto pixels = image.values<float>();
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i);
  for (const TileRect& r : *plan) {
    Expect(r.core_h >= 1 && r.core_w >= 1 && r.core_y >= r.window_y && r.core_x >= r.window_x);
    Expect(r.core_y + r.core_h <= r.window_y + side && r.core_x + r.core_w <= r.window_x + side);
    Expect(r.window_y >= 0 && r.window_x >= 0);
    for (int64_t y = r.core_y; y < r.core_y + r.core_h; ++y) {
      for (int64_t x = r.core_x; x < r.core_x + r.core_w; ++x) ++covered[static_cast<size_t>(y * width + x)];
    }
    const Tensor tile = ExtractTile(image, 0, r, side);
    Expect(tile.shape() == (Shape{1, channels, side, side}));
    const auto got = tile.values<float>();
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t y = 0; y < side; ++y) {
        for (int64_t x = 0; x < side; ++x) {
          const int64_t sy = std::min(r.window_y + y, height - 1), sx = std::min(r.window_x + x, width - 1);
          Expect(got[static_cast<size_t>((c * side + y) * side + x)] == pixels[static_cast<size_t>((c * height + sy) * width + sx)]);
        }
      }
    }
  }
  for (int c : covered) Expect(c == 1);
  return 0;
}
