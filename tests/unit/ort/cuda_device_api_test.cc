// ORT's device API on this machine: what ebb's shared CUDA arena (cuda.arena shared / env_allocator,
// src/ort_context.cc) meets where the CUDA provider library cannot be registered, and the check that
// keeps the shared CPU arena on CreateAndRegisterAllocator (docs/memory-policy.md). These run on CPU;
// the CUDA side itself is checked on a GPU by ebb_cuda_check (docs/gpu-check.md).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "ebb/runtime.h"
#include "ebb/version.h"
#include "device_pool.h"
#include "ort_api.h"
#include "ort_context.h"
#include "test_util.h"

namespace ebb {
namespace {

bool Mentions(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The refusal this ORT build gives, measured: if a later ORT accepts CreateSharedAllocator on the
// CPU device, this fails and says so, and the shared CPU arena could move to the device API.
TEST(DeviceApiTest, CreateSharedAllocatorRefusesTheBuiltInCpuDevice) {
  ebb::detail::OptOutOfOrtTelemetry();  // as ebb does before its first environment (this may be the first)
  Ort::Env env(ORT_LOGGING_LEVEL_FATAL, "ebb");
  const std::vector<Ort::ConstEpDevice> devices = env.GetEpDevices();
  const Ort::ConstEpDevice* cpu = nullptr;
  for (const Ort::ConstEpDevice& d : devices) {
    if (std::string(d.EpName()) == "CPUExecutionProvider") cpu = &d;
  }
  ASSERT_NE(cpu, nullptr) << "GetEpDevices lists no CPUExecutionProvider device";
  int tried = 0;
  for (const OrtDeviceMemoryType memory : {OrtDeviceMemoryType_DEFAULT, OrtDeviceMemoryType_HOST_ACCESSIBLE}) {
    for (const OrtAllocatorType type : {OrtArenaAllocator, OrtDeviceAllocator}) {
      Ort::KeyValuePairs options;
      options.Add("arena.extend_strategy", "1");
      options.Add("arena.max_mem", "67108864");
      ++tried;
      try {
        (void)env.CreateSharedAllocator(*cpu, memory, type, options);
        env.ReleaseSharedAllocator(*cpu, memory);
        ADD_FAILURE() << "ONNX Runtime " << OrtVersion() << " accepts CreateSharedAllocator on the built-in CPU "
                      << "OrtEpDevice (memory type " << memory << ", allocator type " << type << "): the shared "
                      << "CPU arena could now be made through the device API; see docs/memory-policy.md, "
                      << "\"The shared CUDA arena\", and update this test";
      } catch (const Ort::Exception& e) {
        EXPECT_EQ(e.GetOrtErrorCode(), ORT_INVALID_ARGUMENT) << e.what();
        EXPECT_TRUE(Mentions(e.what(), "Invalid memory type for OrtEpDevice")) << e.what();
      }
    }
  }
  EXPECT_EQ(tried, 4);
}

#ifndef _WIN32  // the Linux loader's texts (libcuda.so.1, "cannot open shared object file"); Windows: the fallback test below
// The provider library present (after `make setup GPU=1`) or absent, and no GPU: the
// registration fails at once, with the loader's reason, and nothing aborts.
TEST(DeviceApiTest, RegisteringTheCudaLibraryFailsCleanlyWithItsReason) {
  if (!ReadGpuMemory().empty()) GTEST_SKIP() << "this machine has a GPU";
  auto ctx = detail::RuntimeContext::Create(MemoryPolicy{});
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  const std::string library = detail::CudaProviderLibraryPath();
  const bool present = std::filesystem::exists(library);
  const auto start = std::chrono::steady_clock::now();
  Result<const detail::CudaDevice*> device = (*ctx)->CudaDeviceFor(0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), StatusCode::kUnavailable);
  const std::string& why = device.status().message();
  EXPECT_TRUE(Mentions(why, "RegisterExecutionProviderLibrary")) << why;
  EXPECT_TRUE(Mentions(why, "cannot open shared object file")) << why;
  // Present: the library loads as far as its own dependency on the driver; absent: the file itself.
  EXPECT_TRUE(Mentions(why, present ? "libcuda.so.1" : library)) << why;
  EXPECT_LT(seconds, 20.0);
  // Recorded: a later load does not try again, and says the same.
  EXPECT_EQ((*ctx)->cuda_unavailable().value_or(""), why);
  Result<const detail::CudaDevice*> again = (*ctx)->CudaDeviceFor(1);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().message(), why);
  EXPECT_TRUE((*ctx)->ReadCudaArenas().empty());
}

TEST(DeviceApiTest, AMissingProviderLibraryFailsCleanlyWithItsPath) {
  auto ctx = detail::RuntimeContext::Create(MemoryPolicy{});
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  const std::string missing =
      (std::filesystem::temp_directory_path() / "ebb-no-such-folder" / "libonnxruntime_providers_cuda.so").string();
  Result<const detail::CudaDevice*> device = (*ctx)->CudaDeviceFor(0, missing);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Mentions(device.status().message(), missing + ": cannot open shared object file"))
      << device.status().message();
}
#endif

// Through the Runtime, for each route of the policy: the session on CPU with the reason, or
// kUnavailable when strict; the CPU session runs.
TEST(DeviceApiTest, ACudaLoadFallsBackToCpuWithTheReasonOrIsUnavailableWhenStrict) {
  if (!ReadGpuMemory().empty()) GTEST_SKIP() << "this machine has a GPU";
  for (const CudaArenaMode mode : {CudaArenaMode::kShared, CudaArenaMode::kEnvAllocator, CudaArenaMode::kPerSession}) {
    SCOPED_TRACE(CudaArenaModeName(mode));
    MemoryPolicy policy;
    policy.cuda.arena = mode;
    policy.cuda.arena_settings.max_bytes = 256u << 20;
    auto runtime = Runtime::Create(policy);
    ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
    auto lenient = (*runtime)->Load(testing::ModelPath("tiny"), {.device = DeviceRequest::Cuda(0)});
    ASSERT_TRUE(lenient.ok()) << lenient.status().ToString();
    EXPECT_EQ((*lenient)->device().kind, DeviceKind::kCpu);
    const std::string& reason = (*lenient)->device().fallback_reason;
    EXPECT_TRUE(Mentions(reason, "CUDA unavailable")) << reason;
    if (mode != CudaArenaMode::kPerSession) {
      EXPECT_TRUE(Mentions(reason, "RegisterExecutionProviderLibrary")) << reason;
    }
    EXPECT_TRUE((*lenient)->Run(testing::One("x", testing::RandomTensor({1, 64}))).ok());
    EXPECT_FALSE((*lenient)->ReadSharedDeviceArena().has_value());

    auto strict = (*runtime)->Load(testing::ModelPath("tiny"), {.device = DeviceRequest::Cuda(0), .strict_device = true});
    ASSERT_FALSE(strict.ok());
    EXPECT_EQ(strict.status().code(), StatusCode::kUnavailable);
    EXPECT_TRUE(Mentions(strict.status().message(), "strict")) << strict.status().message();
    if (mode != CudaArenaMode::kPerSession) {
      EXPECT_TRUE(Mentions(strict.status().message(), "RegisterExecutionProviderLibrary")) << strict.status().message();
    }
    // No CUDA arena was made, so none is reported; the shared CPU arena is.
    const MemoryReading reading = (*runtime)->ReadMemory();
    for (const ArenaStats& a : reading.arenas) EXPECT_NE(a.name.rfind("gpu:", 0), 0u) << a.name;
    EXPECT_TRUE(reading.Find("cpu:shared").has_value());
  }
}

// --- The env_allocator route's pool, over the heap (its cap, reuse, release and figures) ---------

struct HeapBackend {
  int allocated = 0, freed = 0;
  bool fail = false;
  detail::DevicePool::Backend Make() {
    return {"test heap", [this](size_t n) -> void* {
              if (fail) return nullptr;
              ++allocated;
              return std::malloc(n);
            },
            [this](void* p) {
              ++freed;
              std::free(p);
            },
            [] { return std::string("the heap said no"); }};
  }
};

TEST(DevicePoolTest, KeepsFreedBlocksForTheOperationAndGivesThemBackAtItsEnd) {
  HeapBackend heap;
  detail::DevicePool pool(heap.Make(), /*cap_bytes=*/0);
  void* a = pool.Allocate(1000);
  void* b = pool.Allocate(4000);
  ASSERT_TRUE(a && b);
  pool.Free(a);
  pool.Free(b);
  EXPECT_EQ(pool.Stats("p").reserved, 5000);
  EXPECT_EQ(pool.Stats("p").in_use, 0);
  void* c = pool.Allocate(900);  // reuses the 1000-byte block
  EXPECT_EQ(c, a);
  void* d = pool.Allocate(1500);  // the 4000-byte block would waste more than is asked: a new one
  EXPECT_NE(d, b);
  EXPECT_EQ(heap.allocated, 3);
  pool.Free(c);
  pool.Free(d);
  EXPECT_EQ(pool.Release(), 1000u + 4000u + 1500u);
  const ArenaStats s = pool.Stats("gpu:0:pool");
  EXPECT_EQ(s.name, "gpu:0:pool");
  EXPECT_EQ(s.reserved, 0);
  EXPECT_EQ(s.regions, 0);
  EXPECT_EQ(s.extensions, 3);
  EXPECT_EQ(s.shrinks, 3);
  EXPECT_EQ(s.peak_in_use, 5000);
  EXPECT_EQ(s.allocations, 4);
  EXPECT_EQ(s.limit, -1);
  EXPECT_EQ(heap.freed, 3);
}

TEST(DevicePoolTest, TheCapRefusesReadablyAndTheNextRequestWorks) {
  HeapBackend heap;
  detail::DevicePool pool(heap.Make(), /*cap_bytes=*/10000);
  void* a = pool.Allocate(6000);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(pool.Allocate(5000), nullptr);  // 6000 in use + 5000 > 10000
  const std::string why = pool.TakeFailure();
  EXPECT_TRUE(Mentions(why, "cap of 10000 bytes was reached: requested 5000 bytes with 6000 bytes in use")) << why;
  EXPECT_EQ(pool.TakeFailure(), "");
  pool.Free(a);
  void* b = pool.Allocate(3000);  // reuses the kept 6000-byte block (at most twice the request)
  EXPECT_EQ(b, a);
  pool.Free(b);
  void* c = pool.Allocate(9000);  // the kept block is given back to make room under the cap
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(pool.Stats("p").reserved, 9000);
  EXPECT_EQ(pool.Stats("p").limit, 10000);
  pool.Free(c);
  heap.fail = true;
  EXPECT_EQ(pool.Allocate(9500), nullptr);
  EXPECT_TRUE(Mentions(pool.TakeFailure(), "failed: the heap said no"));
  heap.fail = false;
  EXPECT_NE(pool.Allocate(100), nullptr);  // the pool keeps working (freed by its destructor)
}

}  // namespace
}  // namespace ebb
