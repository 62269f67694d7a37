// LoadMemoryPolicy (include/ebb/memory_policy.h): the policy's JSON read from a file. Here, not beside
// the parser in base/, because reading a file someone else wrote is model/'s concern (the checked-file
// rules: no FIFO waited on, no device read until memory ends); base/ stays free of the operating system.
#include "ebb/memory_policy.h"
#include "file_access.h"

namespace ebb {

Result<MemoryPolicy> LoadMemoryPolicy(const std::string& path, const MemoryPolicy& base) {
  // The checked-file rules (src/file_access.h): a FIFO or device never blocks the open, anything but
  // a regular file is refused, and the size is capped, so /dev/zero is not read until memory ends.
  Result<std::string> text =
      detail::ReadCheckedFile(path, {.what = "the memory policy file", .follow_links = true, .max_bytes = kMaxMemoryPolicyFileBytes});
  if (!text.ok()) return text.status();  // it names the file and the rule
  Result<MemoryPolicy> policy = ParseMemoryPolicy(*text, base);
  if (!policy.ok()) return Status(policy.status().code(), path + ": " + policy.status().message());
  return policy;
}

}  // namespace ebb
