// Versions and providers. See ebb/version.h for the contract.
#include "ebb/version.h"

#include <dlfcn.h>

#include <filesystem>

#include "ort_context.h"

#ifndef EBB_VERSION
#error "EBB_VERSION must be defined by the build (the CMake project version)"
#endif

namespace ebb {
namespace {

constexpr const char* kCudaProviderLibrary = "libonnxruntime_providers_cuda.so";

// The folder ORT's shared library was loaded from ("" when unknown): ORT
// loads its provider libraries from there.
std::string OrtLibraryFolder() {
  Dl_info info{};
  if (dladdr(OrtGetApiBase(), &info) == 0 || info.dli_fname == nullptr) return "";
  return std::filesystem::path(info.dli_fname).parent_path().string();
}

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
    if (void* lib = dlopen(support->cuda_path.c_str(), RTLD_LAZY | RTLD_LOCAL)) {
      dlclose(lib);
    } else if (const char* why = dlerror()) {
      support->cuda_detail += std::string(" (") + why + ")";
    }
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
  const std::string folder = OrtLibraryFolder();
  support.cuda_path = folder.empty() ? kCudaProviderLibrary : folder + "/" + kCudaProviderLibrary;
  std::error_code ec;
  if (!std::filesystem::exists(support.cuda_path, ec)) {
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
