#include "cuda_runtime.h"

#include <memory>

#include "port.h"

namespace ebb::detail {
namespace {

// The few entry points of the CUDA runtime the pool needs (cudaError_t is an int; 0 is success).
struct CudaRuntime {
  int (*malloc)(void**, size_t) = nullptr;
  int (*free)(void*) = nullptr;
  int (*get_device)(int*) = nullptr;
  int (*set_device)(int) = nullptr;
  const char* (*error_string)(int) = nullptr;
};

Result<std::shared_ptr<const CudaRuntime>> LoadCudaRuntime() {
  static const Result<std::shared_ptr<const CudaRuntime>> loaded = []() -> Result<std::shared_ptr<const CudaRuntime>> {
    Result<port::Library> lib = port::Library::Load(port::kCudaRuntimeLibraryName, /*now=*/true);
    if (!lib.ok()) return Unavailable("the CUDA runtime cannot be loaded: " + lib.status().message());
    auto rt = std::make_shared<CudaRuntime>();
    rt->malloc = reinterpret_cast<int (*)(void**, size_t)>(lib->Find("cudaMalloc"));
    rt->free = reinterpret_cast<int (*)(void*)>(lib->Find("cudaFree"));
    rt->get_device = reinterpret_cast<int (*)(int*)>(lib->Find("cudaGetDevice"));
    rt->set_device = reinterpret_cast<int (*)(int)>(lib->Find("cudaSetDevice"));
    rt->error_string = reinterpret_cast<const char* (*)(int)>(lib->Find("cudaGetErrorString"));
    if (!rt->malloc || !rt->free || !rt->get_device || !rt->set_device || !rt->error_string) {
      return Unavailable(std::string(port::kCudaRuntimeLibraryName) + " lacks cudaMalloc, cudaFree or cudaSetDevice");
    }
    lib->Keep();  // for the rest of the process: blocks may be freed until it ends
    return std::shared_ptr<const CudaRuntime>(std::move(rt));
  }();
  return loaded;
}

// Runs `f` with `index` as the calling thread's current device, then puts the previous one back.
template <typename F>
int OnDevice(const CudaRuntime& rt, int index, F f) {
  int previous = -1;
  const bool switched = rt.get_device(&previous) == 0 && previous != index && rt.set_device(index) == 0;
  const int result = f();
  if (switched) (void)rt.set_device(previous);
  return result;
}

}  // namespace

Result<DevicePool::Backend> CudaRuntimeBackend(int index) {
  Result<std::shared_ptr<const CudaRuntime>> rt = LoadCudaRuntime();
  if (!rt.ok()) return rt.status();
  std::shared_ptr<const CudaRuntime> cuda = *rt;
  auto last_error = std::make_shared<std::string>();  // of the last failed cudaMalloc; read under the pool's lock
  DevicePool::Backend b;
  b.name = "cuda:" + std::to_string(index) + " (cudaMalloc)";
  b.allocate = [cuda, index, last_error](size_t bytes) -> void* {
    void* block = nullptr;
    const int err = OnDevice(*cuda, index, [&] { return cuda->malloc(&block, bytes); });
    if (err != 0) {
      *last_error = std::string("CUDA error ") + std::to_string(err) + ": " + cuda->error_string(err);
      return nullptr;
    }
    return block;
  };
  b.free = [cuda, index](void* block) { (void)OnDevice(*cuda, index, [&] { return cuda->free(block); }); };
  b.last_error = [last_error] { return *last_error; };
  return b;
}

}  // namespace ebb::detail
