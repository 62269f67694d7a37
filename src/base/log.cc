#include "log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ebb::detail {
namespace {

int Level() {  // 0 quiet, 1 warnings, 2 info
  static const int level = [] {
    const char* v = std::getenv("EBB_LOG");
    if (!v) return 1;
    if (std::strcmp(v, "quiet") == 0) return 0;
    if (std::strcmp(v, "info") == 0) return 2;
    return 1;
  }();
  return level;
}

}  // namespace

void LogInfo(const std::string& message) {
  if (Level() >= 2) std::fprintf(stderr, "ebb: %s\n", message.c_str());
}

void LogWarning(const std::string& message) {
  if (Level() >= 1) std::fprintf(stderr, "ebb: warning: %s\n", message.c_str());
}

}  // namespace ebb::detail
