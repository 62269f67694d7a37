// Internal: ebb's one-line log to stderr. EBB_LOG=quiet silences warnings;
// EBB_LOG=info adds informational lines.
#pragma once

#include <string>

namespace ebb::detail {

void LogInfo(const std::string& message);
void LogWarning(const std::string& message);

}  // namespace ebb::detail
