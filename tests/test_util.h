// Shared helpers for ebb's tests: model paths and deterministic inputs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "ebb/memory_policy.h"
#include "ebb/runtime.h"
#include "ebb/tensor.h"

namespace ebb::testing {

// A new, empty folder of the caller's own under the system's temporary folder: `prefix` and a random
// suffix, mode 0700 where modes exist. Empty when none could be made. The caller removes it.
inline std::filesystem::path MakeTempFolder(const std::string& prefix) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path base = fs::temp_directory_path(ec);
  if (ec) return {};
  std::random_device random;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const fs::path folder = base / (prefix + std::to_string(random()));
    if (fs::create_directory(folder, ec)) {  // false, no error: it exists; another name
      fs::permissions(folder, fs::perms::owner_all, fs::perm_options::replace, ec);
      return folder;
    }
    if (ec) return {};
  }
  return {};
}

// The reason symbolic links cannot be tested here ("" where they can): MinGW's std::filesystem has no
// create_symlink (the Windows build under Wine), so a test's cases with links are skipped there.
inline std::string MakeSymlink(const std::filesystem::path& target, const std::filesystem::path& link) {
  std::error_code ec;
  std::filesystem::create_symlink(target, link, ec);
  return ec ? "symbolic links cannot be made on this system (" + ec.message() + "): the link cases are skipped"
            : "";
}

// The default policy with single runs releasing at their end (ReleaseMode::kOperationEnd), for tests
// whose claim is that a run ending its operation gives its memory back at once. Under the default
// (kIdle) a single run gives it back once runs pause (idle_release_test, DefaultPolicyTest).
inline MemoryPolicy OperationEndPolicy() {
  MemoryPolicy policy;
  policy.release = ReleaseMode::kOperationEnd;
  return policy;
}

inline std::string ModelPath(const std::string& name) { return std::string(EBB_MODELS_DIR) + "/" + name + "/model.onnx"; }
// The protocol tests' own models (tools/make_test_models.py --test-out): identity, halves.
inline std::string TestModelPath(const std::string& name) {
  return std::string(EBB_TEST_MODELS_DIR) + "/" + name + "/model.onnx";
}

// A runtime built from `policy` with the bundled `model` loaded on the CPU, for the fixtures that
// hold both; the failing step's status otherwise.
struct LoadedModel {
  std::unique_ptr<Runtime> runtime;
  std::shared_ptr<Session> session;
};
inline Result<LoadedModel> LoadOnCpu(const MemoryPolicy& policy, const std::string& model) {
  auto runtime = Runtime::Create(policy);
  if (!runtime.ok()) return runtime.status();
  auto session = (*runtime)->Load(ModelPath(model), {.device = DeviceRequest::Cpu()});
  if (!session.ok()) return session.status();
  return LoadedModel{std::move(runtime).value(), *session};
}

// A float tensor of `shape` with values uniform in [0, 1), fixed by `seed`.
inline Tensor RandomTensor(Shape shape, uint32_t seed = 1) {
  Tensor t(DataType::kFloat32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.f, 1.f);
  for (float& v : t.values<float>()) v = dist(rng);
  return t;
}

inline std::vector<NamedTensor> ImageInput(int64_t h, int64_t w, uint32_t seed = 1, const std::string& name = "x") {
  std::vector<NamedTensor> in;
  in.push_back({name, RandomTensor({1, 3, h, w}, seed)});
  return in;
}

// A one-input list (initializer lists cannot hold move-only tensors).
inline std::vector<NamedTensor> One(const std::string& name, Tensor t) {
  std::vector<NamedTensor> in;
  in.push_back({name, std::move(t)});
  return in;
}

// Writes a copy of the model `source` to `target` with a different
// doc_string (ModelProto field 6 appended: the last occurrence wins), so the
// copy has its own content hash and so its own session.
inline void WriteModelVariant(const std::string& source, const std::string& target, const std::string& doc) {
  std::ifstream in(source, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(target, std::ios::binary) << bytes << '\x32' << static_cast<char>(doc.size()) << doc;
}

constexpr int64_t kMiB = 1 << 20;

// Whether RSS bounds hold in this build. AddressSanitizer keeps freed memory in quarantine and pads
// every allocation with redzones, so RSS neither falls after a free nor stays near the data's size;
// ThreadSanitizer's shadow memory (counted in RSS) grows with every byte the program touches. Tests
// skip their RSS assertions (and only those) under either, and say so.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define EBB_UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define EBB_UNDER_SANITIZER 1
#endif
#endif
#ifdef EBB_UNDER_SANITIZER
constexpr bool kRssBoundsHold = false;
#else
constexpr bool kRssBoundsHold = true;
#endif
// Whether page-fault counts hold in this build: ThreadSanitizer's shadow memory faults in beside
// every page the program touches (the macro is ours: __SANITIZE_THREAD__ is undefined in code that
// includes the prebuilt libraries' headers). AddressSanitizer's shadow is small and stays mapped.
#ifdef EBB_UNDER_TSAN
constexpr bool kFaultBoundsHold = false;
#else
constexpr bool kFaultBoundsHold = true;
#endif
constexpr const char* kNoRssBounds =
    "RSS bounds skipped: a sanitizer's allocator and shadow memory change what RSS measures";

}  // namespace ebb::testing
