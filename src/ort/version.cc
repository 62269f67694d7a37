// Versions and providers. See ebb/version.h for the contract.
#include "ebb/version.h"

#include <filesystem>

#include "ort_api.h"
#include "ort_context.h"
#include "port.h"

#ifndef EBB_VERSION
#error "EBB_VERSION must be defined by the build (the CMake project version)"
#endif

namespace ebb {
namespace {

// Whether ORT can load the CUDA provider library: the legacy CUDA options
// route that ebb's loads take (session_factory.cc), on session options that
// are then dropped. Nothing touches a GPU until a session is created.
void TryLoadCudaProvider(ProviderSupport* support) {
  try {
    Ort::Env env(ORT_LOGGING_LEVEL_FATAL, "ebb");  // ORT's one env, shared with any Runtime
    Ort::SessionOptions options;
    OrtCUDAProviderOptions cuda;
    options.AppendExecutionProvider_CUDA(cuda);
    support->cuda = ProviderSupport::CudaLibrary::kLoadable;
  } catch (const Ort::Exception& e) {
    support->cuda = ProviderSupport::CudaLibrary::kNotLoadable;
    support->cuda_detail = e.what();
    // ORT does not say why; the dynamic loader does (a missing CUDA or cuDNN
    // library, most often).
    Result<port::Library> lib = port::Library::Load(support->cuda_path, /*now=*/false);
    if (!lib.ok()) support->cuda_detail += " (" + lib.status().message() + ")";
  }
}

}  // namespace

const char* Version() { return EBB_VERSION; }

std::string OrtVersion() { return OrtGetApiBase()->GetVersionString(); }

ProviderSupport ReadProviderSupport() {
  ProviderSupport support;
  try {
    support.available = Ort::GetAvailableProviders();
  } catch (const Ort::Exception& e) {
    support.available = {std::string("(cannot list the providers: ") + e.what() + ")"};
  }
  support.cuda_path = detail::CudaProviderLibraryPath();
  std::error_code ec;
  if (!std::filesystem::exists(port::PathFromUtf8(support.cuda_path), ec)) {
    support.cuda = ProviderSupport::CudaLibrary::kMissing;
    return support;
  }
  TryLoadCudaProvider(&support);
  return support;
}

const char* CudaLibraryName(ProviderSupport::CudaLibrary library) {
  switch (library) {
    case ProviderSupport::CudaLibrary::kMissing: return "missing";
    case ProviderSupport::CudaLibrary::kNotLoadable: return "not loadable";
    case ProviderSupport::CudaLibrary::kLoadable: return "loadable";
  }
  return "?";
}

}  // namespace ebb
