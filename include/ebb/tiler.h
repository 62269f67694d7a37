// ebb/tiler.h — image-to-image models over fixed-size tiles.
//
// Every run sees the same input shape [k,C,tile,tile] whatever the image size
// (varying shapes are what make arenas grow in practice); the tile is never
// larger than the frames need: when the tile covers every frame, it is the
// frames' largest side, without overlap (TileOptionsFor over their largest
// sides), unless the model's input has a fixed height and width. Before
// anything is allocated, a batch of tiles whose output (at least C channels,
// `scale` times the tile) cannot fit the shared arena's cap, or whose input and
// output cannot fit the memory the process may have, is refused. An image is cut
// into cores of (tile - 2*overlap) pixels; each core is run inside a window
// of `tile` pixels that gives it `overlap` pixels of context on every side
// (windows at an image border are shifted inward instead of leaving it).
// Only each tile's core goes into the result, so stitching leaves no seams:
// for a fully convolutional model whose receptive field radius is at most
// `overlap`, the tiled result equals the untiled one within float tolerance.
// A tile reaching past the image (a non-square image smaller than the tile on
// one side) is padded by repeating edge pixels (which matches models that pad
// by replication themselves, such as waifu2x).
//
// Thread safety: plain values and free functions.
#pragma once

#include <cstdint>
#include <vector>

#include "ebb/operation.h"

namespace ebb {

struct TileOptions {
  int64_t tile = 128;     // input tile side in pixels
  int64_t overlap = 8;    // context pixels on each side of a tile's core
  int64_t scale = 0;      // output/input size ratio; 0 = model metadata "ebb.scale", else measured on the first run
  int tiles_per_run = 1;  // tiles stacked into one run (the last batch is padded to keep the shape fixed)
};

// One tile: its window in the input image (may extend past the image when the
// image is smaller than a tile) and the core it contributes.
struct TileRect {
  int64_t window_y = 0, window_x = 0;  // top-left of the tile x tile window
  int64_t core_y = 0, core_x = 0;      // top-left of the core, in image coordinates
  int64_t core_h = 0, core_w = 0;      // size of the core
};

// The options RunTiled uses for an image of height x width (when the model's
// input has no fixed height and width): `options`, except that an image one
// tile covers (both sides <= tile) is one tile of its larger side without
// overlap (its core is the whole image): never a tile larger than it needs.
// Options PlanTiles refuses are returned as they are.
TileOptions TileOptionsFor(const TileOptions& options, int64_t height, int64_t width);

// The tiles covering an h x w image, row by row.
// Errors: kInvalidArgument when tile <= 2*overlap or a size is not positive.
Result<std::vector<TileRect>> PlanTiles(int64_t height, int64_t width, const TileOptions& options);

// Copies the window of `rect` out of item `n` of image [N,C,H,W] into
// [1,C,tile,tile], repeating edge pixels past the image border.
Tensor ExtractTile(const Tensor& image, int64_t n, const TileRect& rect, int64_t tile);

// Tiles over every frame as one operation: release after the last tile of the
// last frame. Frames are [1,C,H,W] (sizes may differ); results [1,C',sH,sW].
// Errors: kInvalidArgument for bad options or frames (sizes that overflow
// included), kResourceExhausted for a batch that cannot fit (see above), and
// the errors of the runs.
Result<std::vector<Tensor>> RunTiled(Runtime& runtime, const std::shared_ptr<Session>& session,
                                     const std::vector<Tensor>& frames, const TileOptions& tiles,
                                     const OperationOptions& options = {});

}  // namespace ebb
