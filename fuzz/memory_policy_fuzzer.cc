// libFuzzer target: the memory policy JSON (ebb/memory_policy.h). Beyond the sanitizers, it checks
// that a policy that parses writes out as JSON that parses back to the same policy.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ebb/memory_policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ebb;
  const auto policy = ParseMemoryPolicy(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!policy.ok()) {
    if (policy.status().code() != StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  const std::string written = MemoryPolicyToJson(*policy);
  const auto again = ParseMemoryPolicy(written);
  if (!again.ok() || MemoryPolicyToJson(*again) != written) std::abort();
  return 0;
}
