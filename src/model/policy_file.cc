// LoadMemoryPolicy (include/ebb/memory_policy.h): the policy's JSON read from a file. Here, not beside
// the parser in base/, because reading a file someone else wrote is model/'s concern (the port layer's
// paths, the checked-file rules); base/ stays free of the operating system.
#include <fstream>
#include <sstream>

#include "ebb/memory_policy.h"
#include "port.h"

namespace ebb {

Result<MemoryPolicy> LoadMemoryPolicy(const std::string& path) {
  std::ifstream in(port::PathFromUtf8(path));
  if (!in) return NotFound("cannot read memory policy file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  Result<MemoryPolicy> policy = ParseMemoryPolicy(text.str());
  if (!policy.ok()) return Status(policy.status().code(), path + ": " + policy.status().message());
  return policy;
}

}  // namespace ebb
