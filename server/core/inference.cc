#include "inference.h"

namespace ebb::server {

Result<int64_t> CheckKeepAlive(std::optional<int64_t> ms, std::string_view as_sent) {
  if (ms && *ms <= kMaxKeepAliveMs) return *ms;
  return InvalidArgument("parameters.keep_alive must be an integer (milliseconds) of at most " +
                         std::to_string(kMaxKeepAliveMs) + " (365 days; negative: never unload), got " +
                         std::string(as_sent));
}

}  // namespace ebb::server
