// Internal: device memory straight from the CUDA runtime (cudaMalloc / cudaFree), the backend of
// the `env_allocator` pool (device_pool.h). The runtime library is loaded at run time (it comes with
// the CUDA provider's dependencies); nothing of CUDA is needed to build ebb.
#pragma once

#include "ebb/status.h"
#include "device_pool.h"

namespace ebb::detail {

// The backend for device `index`; kUnavailable (with the loader's reason) when the CUDA runtime
// cannot be loaded. Allocations switch the calling thread to `index` and back.
Result<DevicePool::Backend> CudaRuntimeBackend(int index);

}  // namespace ebb::detail
