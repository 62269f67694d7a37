// libFuzzer target: a model file's protobuf encoding, as ebb walks it without ONNX Runtime — the
// graph's inputs and outputs (ReadModelSignature: what the server describes before a load) and the
// external-data locations (src/model/external_data.h: what a model's identity covers). Both read files a
// client may have written (ModelMesh's puller, a repository folder). Beyond the sanitizers, it
// checks that a failure is kInvalidArgument and that what parses is within bounds.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "ebb/model_signature.h"
#include "external_data.h"

namespace {

// The input as a file: a memfd, rewritten for each input, named by its /proc path.
const std::string& InputPath() {
  static const std::string path = [] {
    const int fd = memfd_create("model", 0);
    if (fd < 0) std::abort();
    return "/proc/self/fd/" + std::to_string(fd);
  }();
  return path;
}

void Write(const uint8_t* data, size_t size) {
  const int fd = std::stoi(InputPath().substr(InputPath().rfind('/') + 1));
  if (ftruncate(fd, 0) != 0) std::abort();
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ebb;
  auto locations = detail::ExternalDataLocations(data, size);
  if (!locations.ok()) {
    if (locations.status().code() != StatusCode::kInvalidArgument) std::abort();
  } else {
    for (const std::string& l : *locations) {
      if (l.empty() || l.size() > size) std::abort();  // a location is bytes of the input
    }
  }
  Write(data, size);
  auto signature = ReadModelSignature(InputPath());
  if (!signature.ok()) {
    if (signature.status().code() != StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  for (const auto* list : {&signature->inputs, &signature->outputs}) {
    for (const TensorInfo& t : *list) {
      if (t.name.size() > size) std::abort();
      for (int64_t d : t.shape) {
        if (d < -1) std::abort();  // symbolic dims are -1, others as written
      }
    }
  }
  return 0;
}
