// ebb/version.h — which ebb this is, and what it runs on.
//
// Version() is ebb's one version string: `ebb --version` prints it and the
// server's metadata (`GET /v2`) reports it. It comes from the CMake project
// version, the only place to change it. OrtVersion() and ReadProviderSupport()
// ask the ONNX Runtime library loaded at run time, not the headers ebb was
// compiled against.
//
// Thread safety: every function may be called from any thread at any time.
// ReadProviderSupport has a side effect: when the CUDA provider library is
// installed it asks ONNX Runtime to load it into the process, as the first
// CUDA load would.
// Ownership: plain values.
#pragma once

#include <string>
#include <vector>

namespace ebb {

// "MAJOR.MINOR.PATCH".
const char* Version();

// The ONNX Runtime library's own version, e.g. "1.29.0"
// (OrtGetApiBase()->GetVersionString()).
std::string OrtVersion();

// The execution providers this build can use.
struct ProviderSupport {
  // ORT's GetAvailableProviders(): the providers built into its library, in
  // its order of preference. The CUDA provider is not among them in the ORT
  // build ebb uses: it is a separate library that ORT loads when a session
  // asks for CUDA, so whether CUDA can be used is told by `cuda`.
  std::vector<std::string> available;

  // The CUDA provider library, libonnxruntime_providers_cuda.so, which ORT
  // loads from the folder of its own library when a CUDA session is made.
  enum class CudaLibrary {
    kMissing,      // not installed (`make setup GPU=1` installs it)
    kNotLoadable,  // installed, but ORT cannot load it (say, CUDA or cuDNN libraries missing): see cuda_detail
    kLoadable,     // ORT loads it; a session still needs a CUDA device and driver
  };
  CudaLibrary cuda = CudaLibrary::kMissing;
  std::string cuda_path;    // where ORT looks for it
  std::string cuda_detail;  // ORT's error when kNotLoadable
};

// Reads ProviderSupport now (see the side effect above). Never fails: what
// cannot be read is reported in the result.
ProviderSupport ReadProviderSupport();

// "missing", "not loadable", "loadable".
const char* CudaLibraryName(ProviderSupport::CudaLibrary library);

}  // namespace ebb
