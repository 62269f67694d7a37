// libFuzzer target: the memory policy JSON (ebb/memory_policy.h). Beyond the sanitizers, it checks
// that a policy that parses writes out as JSON that parses back to the same policy, that text with
// a NUL byte never parses (JSON's parser would ignore what follows it), and that the thread count
// of a policy that parses is within its bound.
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
  if (std::string_view(reinterpret_cast<const char*>(data), size).find('\0') != std::string_view::npos) std::abort();
  if (policy->intra_op_threads < 0 || policy->intra_op_threads > MaxIntraOpThreads()) std::abort();
  const std::string written = MemoryPolicyToJson(*policy);
  const auto again = ParseMemoryPolicy(written);
  if (!again.ok() || MemoryPolicyToJson(*again) != written) std::abort();
  return 0;
}
