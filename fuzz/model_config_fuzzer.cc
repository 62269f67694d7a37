// libFuzzer target: a model folder's config.json (ebb/model_config.h). Beyond the sanitizers, it
// checks that whatever parses is within the documented ranges.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ebb/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ebb;
  const auto config = ParseModelConfig(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!config.ok()) {
    if (config.status().code() != StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  if (config->keep_alive_ms && *config->keep_alive_ms > kMaxKeepAliveMs) std::abort();
  if (config->tile) {
    const TileOptions& t = *config->tile;
    if (t.tile < 0 || t.tile > kMaxTileSide || t.overlap < 0 || t.overlap > kMaxTileSide || t.scale < 0 ||
        t.scale > kMaxScale || t.tiles_per_run < 1 || t.tiles_per_run > kMaxTilesPerRun) {
      std::abort();
    }
  }
  return 0;
}
