// The optimized-model cache on real ONNX Runtime and real files: outputs
// bitwise identical with and without it, at every level; a corrupt,
// truncated, foreign or ORT-refused entry falls back to the model's file and
// is replaced; the folder stays within its bound, least recently used first;
// a model with external data is keyed by its weights too (issue 18).
#include <gtest/gtest.h>
#include <xxhash.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "ebb/runtime.h"
#include "external_data_model.h"
#include "test_util.h"

namespace ebb {
namespace {

namespace fs = std::filesystem;
using testing::ImageInput;
using testing::ModelPath;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

void WriteFile(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Deterministic inputs for any of the bundled models.
std::vector<NamedTensor> InputsFor(const Session& s) {
  std::vector<NamedTensor> inputs;
  uint32_t seed = 1;
  for (const TensorInfo& info : s.inputs()) {
    Shape shape = info.shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] < 0) shape[d] = (shape.size() == 4 && d >= 2) ? 64 : 1;
    }
    Tensor t = info.type == DataType::kFloat32 ? testing::RandomTensor(shape, seed++) : Tensor(info.type, shape);
    if (info.type != DataType::kFloat32) {
      for (size_t i = 0; i < t.byte_size(); ++i) t.data()[i] = std::byte(i % 2);
    }
    inputs.push_back({info.name, std::move(t)});
  }
  return inputs;
}

// Every output's bytes, concatenated.
std::string OutputBytes(const std::vector<NamedTensor>& outputs) {
  std::string bytes;
  for (const NamedTensor& o : outputs) bytes.append(reinterpret_cast<const char*>(o.tensor.data()), o.tensor.byte_size());
  return bytes;
}

class OptimizedModelCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("ebb_optcache_" + std::to_string(getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  MemoryPolicy Policy(GraphOptimization level = GraphOptimization::kExtended, bool cache = true) const {
    MemoryPolicy p;
    p.graph_optimization = level;
    p.optimized_model_cache.enabled = cache;
    p.optimized_model_cache.dir = dir_.string();
    return p;
  }

  struct Outcome {
    std::string outputs;
    LoadRecord load;
  };

  // A fresh Runtime (so nothing is reused from the session cache), one load,
  // one run of deterministic inputs.
  Outcome LoadAndRun(const std::string& path, const MemoryPolicy& policy) {
    auto rt = Runtime::Create(policy);
    EXPECT_TRUE(rt.ok()) << rt.status().ToString();
    if (!rt.ok()) return {};
    auto s = (*rt)->Load(path, {.device = DeviceRequest::Cpu()});
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return {};
    auto out = (*s)->Run(InputsFor(**s));
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return {out.ok() ? OutputBytes(*out) : "", (*s)->load_record()};
  }

  // The entry files now in the cache folder, by extension.
  std::vector<fs::path> Entries(const std::string& extension) const {
    std::vector<fs::path> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_, ec)) {
      if (e.path().extension() == extension) found.push_back(e.path());
    }
    return found;
  }

  fs::path dir_;
};

TEST_F(OptimizedModelCacheTest, OutputsAreBitwiseIdenticalWithAndWithoutTheCacheAtEveryLevel) {
  // Every bundled model at `all` and `extended`; the two real conv models at
  // `basic` and `disabled` too.
  std::vector<std::pair<std::string, GraphOptimization>> cases;
  for (const char* model : {"convnet", "tiny", "mixed", "twochannel", "ppocr_det", "waifu2x_scale2x"}) {
    cases.emplace_back(model, GraphOptimization::kAll);
    cases.emplace_back(model, GraphOptimization::kExtended);
  }
  for (const char* model : {"ppocr_det", "waifu2x_scale2x"}) {
    cases.emplace_back(model, GraphOptimization::kBasic);
    cases.emplace_back(model, GraphOptimization::kDisabled);
  }
  for (const auto& [model, level] : cases) {
    {
      SCOPED_TRACE(model + " at " + GraphOptimizationName(level));
      const std::string path = ModelPath(model);
      const Outcome plain = LoadAndRun(path, Policy(level, /*cache=*/false));
      EXPECT_FALSE(plain.load.from_optimized_cache);
      const Outcome first = LoadAndRun(path, Policy(level));
      EXPECT_TRUE(first.load.wrote_optimized_cache) << first.load.optimized_cache_note;
      EXPECT_TRUE(first.load.from_optimized_cache) << "the first load runs from the entry it wrote";
      const Outcome again = LoadAndRun(path, Policy(level));
      EXPECT_TRUE(again.load.from_optimized_cache) << again.load.optimized_cache_note;
      EXPECT_FALSE(again.load.wrote_optimized_cache);
      ASSERT_FALSE(plain.outputs.empty());
      EXPECT_TRUE(first.outputs == plain.outputs) << "first load through the cache differs";
      EXPECT_TRUE(again.outputs == plain.outputs) << "load from the cache differs";
    }
  }
  // One entry per (model, level): the level is part of the key.
  EXPECT_EQ(Entries(".ort").size(), cases.size());
  EXPECT_EQ(Entries(".json").size(), cases.size());
}

TEST_F(OptimizedModelCacheTest, EntryHeaderNamesItsKey) {
  (void)LoadAndRun(ModelPath("convnet"), Policy(GraphOptimization::kAll));
  ASSERT_EQ(Entries(".json").size(), 1u);
  const std::string header = ReadFile(Entries(".json")[0]);
  EXPECT_NE(header.find("\"ort_version\": \"1.29.0\""), std::string::npos) << header;
  EXPECT_NE(header.find("\"options\": \"graph_optimization=all\""), std::string::npos) << header;
  EXPECT_NE(header.find("\"cpu_features\""), std::string::npos) << header;
  EXPECT_NE(header.find("\"xxh3_64\""), std::string::npos) << header;
  EXPECT_EQ(fs::status(dir_).permissions() & fs::perms::all, fs::perms::owner_all) << "the folder is private";
}

// Breaks the one entry in the folder with `damage`, then checks that a load
// falls back to the model's file with the same outputs, says why, and
// replaces the entry with a good one.
class DamagedEntryTest : public OptimizedModelCacheTest {
 protected:
  void Check(const std::function<void(const fs::path& ort, const fs::path& json)>& damage, const std::string& why) {
    const std::string path = ModelPath("convnet");
    const Outcome first = LoadAndRun(path, Policy());
    ASSERT_TRUE(first.load.wrote_optimized_cache);
    ASSERT_EQ(Entries(".ort").size(), 1u);
    damage(Entries(".ort")[0], Entries(".json")[0]);
    const Outcome fallback = LoadAndRun(path, Policy());
    EXPECT_NE(fallback.load.optimized_cache_note.find(why), std::string::npos) << fallback.load.optimized_cache_note;
    EXPECT_TRUE(fallback.load.wrote_optimized_cache) << "the bad entry is replaced";
    EXPECT_TRUE(fallback.outputs == first.outputs);
    const Outcome healed = LoadAndRun(path, Policy());
    EXPECT_TRUE(healed.load.from_optimized_cache) << healed.load.optimized_cache_note;
    EXPECT_TRUE(healed.outputs == first.outputs);
  }
};

TEST_F(DamagedEntryTest, CorruptEntry) {
  Check([](const fs::path& ort, const fs::path&) {
    std::string bytes = ReadFile(ort);
    bytes[bytes.size() / 2] ^= 0x5a;  // inside the weights
    WriteFile(ort, bytes);
  }, "checksum");
}

TEST_F(DamagedEntryTest, TruncatedEntry) {
  Check([](const fs::path& ort, const fs::path&) { fs::resize_file(ort, fs::file_size(ort) / 2); }, "truncated");
}

TEST_F(DamagedEntryTest, EmptyEntry) {
  Check([](const fs::path& ort, const fs::path&) { fs::resize_file(ort, 0); }, "cannot map");
}

TEST_F(DamagedEntryTest, UnreadableHeader) {
  Check([](const fs::path&, const fs::path& json) { WriteFile(json, "{\"format\": 1, \"bytes\": "); }, "header");
}

TEST_F(DamagedEntryTest, ModelWithoutHeader) {
  Check([](const fs::path&, const fs::path& json) { fs::remove(json); }, "without its header");
}

TEST_F(DamagedEntryTest, StaleEntryOfAnotherOrtVersion) {
  Check([](const fs::path&, const fs::path& json) {
    std::string header = ReadFile(json);
    header.replace(header.find("1.29.0"), 6, "1.28.0");
    WriteFile(json, header);
  }, "another key (ort_version)");
}

TEST_F(DamagedEntryTest, EntryOrtRefusesThoughItsChecksumMatches) {
  Check([](const fs::path& ort, const fs::path& json) {
    std::string bytes(4096, '\x11');  // not a flatbuffer; header rewritten to match it
    WriteFile(ort, bytes);
    char sum[17];
    std::snprintf(sum, sizeof sum, "%016llx", static_cast<unsigned long long>(XXH3_64bits(bytes.data(), bytes.size())));
    std::string header = ReadFile(json);
    const size_t b = header.find("\"bytes\": ") + 9;
    header.replace(b, header.find(',', b) - b, "4096");
    const size_t x = header.find("\"xxh3_64\": \"") + 12;
    header.replace(x, 16, sum);
    WriteFile(json, header);
  }, "refused");
}

TEST_F(OptimizedModelCacheTest, ForeignEntryFallsBackAndIsReplaced) {
  // The entry of one model put in place of another's: its header names the
  // other model, so it is not used.
  const Outcome tiny = LoadAndRun(ModelPath("tiny"), Policy());
  ASSERT_EQ(Entries(".ort").size(), 1u);
  const fs::path tiny_ort = Entries(".ort")[0], tiny_json = Entries(".json")[0];
  const Outcome convnet = LoadAndRun(ModelPath("convnet"), Policy());
  fs::path convnet_ort, convnet_json;
  for (const fs::path& p : Entries(".ort")) {
    if (p != tiny_ort) convnet_ort = p;
  }
  convnet_json = fs::path(convnet_ort).replace_extension(".json");
  fs::copy_file(tiny_ort, convnet_ort, fs::copy_options::overwrite_existing);
  fs::copy_file(tiny_json, convnet_json, fs::copy_options::overwrite_existing);

  const Outcome again = LoadAndRun(ModelPath("convnet"), Policy());
  EXPECT_NE(again.load.optimized_cache_note.find("another key (model_sha256)"), std::string::npos)
      << again.load.optimized_cache_note;
  EXPECT_TRUE(again.load.wrote_optimized_cache);
  EXPECT_TRUE(again.outputs == convnet.outputs);
  EXPECT_NE(ReadFile(convnet_ort), ReadFile(tiny_ort)) << "replaced by convnet's own entry";
  EXPECT_TRUE(LoadAndRun(ModelPath("tiny"), Policy()).load.from_optimized_cache) << "tiny's entry untouched";
}

TEST_F(OptimizedModelCacheTest, FolderStaysWithinItsBoundLeastRecentlyUsedFirst) {
  // Three variants of the convnet (distinct bytes, so distinct entries of the
  // same size) under a bound that holds two.
  std::vector<std::string> paths;
  for (int i = 0; i < 3; ++i) {
    paths.push_back((dir_.parent_path() / ("ebb_optcache_variant_" + std::to_string(getpid()) + "_" +
                                           std::to_string(i) + ".onnx")).string());
    testing::WriteModelVariant(ModelPath("convnet"), paths.back(), "variant " + std::to_string(i));
  }
  ASSERT_TRUE(LoadAndRun(paths[0], Policy()).load.wrote_optimized_cache);
  uint64_t entry_bytes = 0;
  for (const auto& e : fs::directory_iterator(dir_)) entry_bytes += e.file_size();
  MemoryPolicy policy = Policy();
  policy.optimized_model_cache.max_bytes = entry_bytes * 5 / 2;
  auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(30)); };  // distinct mtimes
  pause();
  ASSERT_TRUE(LoadAndRun(paths[1], policy).load.wrote_optimized_cache);
  pause();
  ASSERT_TRUE(LoadAndRun(paths[0], policy).load.from_optimized_cache);  // 0 is now the most recently used
  pause();
  ASSERT_TRUE(LoadAndRun(paths[2], policy).load.wrote_optimized_cache);
  EXPECT_EQ(Entries(".ort").size(), 2u);
  uint64_t total = 0;
  for (const auto& e : fs::directory_iterator(dir_)) total += e.file_size();
  EXPECT_LE(total, policy.optimized_model_cache.max_bytes);
  EXPECT_TRUE(LoadAndRun(paths[0], policy).load.from_optimized_cache) << "kept: recently used";
  EXPECT_TRUE(LoadAndRun(paths[2], policy).load.from_optimized_cache) << "kept: just written";
  EXPECT_TRUE(LoadAndRun(paths[1], policy).load.wrote_optimized_cache) << "the least recently used went";
  for (const auto& p : paths) fs::remove(p);
}

TEST_F(OptimizedModelCacheTest, EntryLargerThanTheBoundIsNotKept) {
  MemoryPolicy policy = Policy();
  policy.optimized_model_cache.max_bytes = 1000;
  const Outcome plain = LoadAndRun(ModelPath("convnet"), Policy(GraphOptimization::kExtended, false));
  const Outcome out = LoadAndRun(ModelPath("convnet"), policy);
  EXPECT_FALSE(out.load.wrote_optimized_cache);
  EXPECT_NE(out.load.optimized_cache_note.find("larger than the cache's bound"), std::string::npos)
      << out.load.optimized_cache_note;
  EXPECT_TRUE(out.outputs == plain.outputs);
  EXPECT_TRUE(Entries(".ort").empty());
  std::error_code ec;
  EXPECT_TRUE(fs::is_empty(dir_, ec)) << "no temporary file left behind";
}

TEST_F(OptimizedModelCacheTest, UnusableFolderMeansNoCacheNotAFailure) {
  WriteFile(dir_.string() + ".file", "x");
  MemoryPolicy policy = Policy();
  policy.optimized_model_cache.dir = dir_.string() + ".file/cache";  // under a regular file
  const Outcome out = LoadAndRun(ModelPath("convnet"), policy);
  EXPECT_FALSE(out.load.from_optimized_cache);
  EXPECT_NE(out.load.optimized_cache_note.find("cache off"), std::string::npos) << out.load.optimized_cache_note;
  EXPECT_FALSE(out.outputs.empty());
  fs::remove(dir_.string() + ".file");
}

TEST_F(OptimizedModelCacheTest, SessionKeepsRunningAfterItsEntryIsRemoved) {
  auto rt = Runtime::Create(Policy());
  ASSERT_TRUE(rt.ok());
  auto s = (*rt)->Load(ModelPath("waifu2x_scale2x"), {.device = DeviceRequest::Cpu()});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->load_record().from_optimized_cache);
  auto before = (*s)->Run(ImageInput(32, 32));
  ASSERT_TRUE(before.ok());
  fs::remove_all(dir_);  // the mapping keeps the removed file alive
  auto after = (*s)->Run(ImageInput(32, 32));
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(OutputBytes(*before) == OutputBytes(*after));
}

TEST_F(OptimizedModelCacheTest, ModelFileRewrittenInPlaceIsHashedAgain) {
  // A file hashed more than 2 s after its last change has its hash
  // remembered; a write in place afterwards must still be seen.
  const std::string path = (dir_.parent_path() / ("ebb_optcache_rewrite_" + std::to_string(getpid()) + ".onnx")).string();
  testing::WriteModelVariant(ModelPath("tiny"), path, "version A");
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  auto rt = Runtime::Create(Policy());
  ASSERT_TRUE(rt.ok());
  auto a = (*rt)->Load(path, {.device = DeviceRequest::Cpu()});
  ASSERT_TRUE(a.ok());
  auto a_again = (*rt)->Load(path, {.device = DeviceRequest::Cpu()});
  ASSERT_TRUE(a_again.ok());
  EXPECT_EQ(a->get(), a_again->get());
  {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(-1, std::ios::end);
    f.put('B');  // "version A" -> "version B", same size
  }
  auto b = (*rt)->Load(path, {.device = DeviceRequest::Cpu()});
  ASSERT_TRUE(b.ok());
  EXPECT_NE(a->get(), b->get()) << "new content, new identity, new session";
  fs::remove(path);
}

// Each Runtime here is a fresh process's view: nothing in its session cache, only the folder.
TEST_F(OptimizedModelCacheTest, ExternalWeightsAreKeyedAndStoredInTheEntry) {
  const fs::path folder = dir_.string() + "_model";
  fs::remove_all(folder);
  const std::string path = testing::WriteMatMulModel(folder, 1.f);
  for (GraphOptimization level : {GraphOptimization::kExtended, GraphOptimization::kAll}) {
    SCOPED_TRACE(GraphOptimizationName(level));
    testing::ReplaceMatMulWeights(folder / "weights.bin", 1.f);
    const Outcome plain = LoadAndRun(path, Policy(level, /*cache=*/false));
    const Outcome first = LoadAndRun(path, Policy(level));
    EXPECT_TRUE(first.load.wrote_optimized_cache) << first.load.optimized_cache_note;
    const Outcome again = LoadAndRun(path, Policy(level));
    EXPECT_TRUE(again.load.from_optimized_cache) << again.load.optimized_cache_note;
    ASSERT_FALSE(plain.outputs.empty());
    EXPECT_TRUE(first.outputs == plain.outputs) << "first load through the cache differs";
    EXPECT_TRUE(again.outputs == plain.outputs) << "load from the cache differs";
    // New weights, the same model.onnx: a miss, a new entry, the new weights; then a hit on it.
    testing::ReplaceMatMulWeights(folder / "weights.bin", 2.f);
    const Outcome plain_changed = LoadAndRun(path, Policy(level, /*cache=*/false));
    const Outcome changed = LoadAndRun(path, Policy(level));
    EXPECT_TRUE(changed.load.wrote_optimized_cache) << "a miss: " << changed.load.optimized_cache_note;
    const Outcome changed_again = LoadAndRun(path, Policy(level));
    EXPECT_TRUE(changed_again.load.from_optimized_cache) << changed_again.load.optimized_cache_note;
    EXPECT_FALSE(plain_changed.outputs == plain.outputs) << "the weights changed the outputs";
    EXPECT_TRUE(changed.outputs == plain_changed.outputs) << "the new weights, not the old entry's";
    EXPECT_TRUE(changed_again.outputs == plain_changed.outputs);
  }
  // The entries hold the weights themselves (ORT format inlines them): an entry is at least as
  // large as the weights, and a hit does not depend on what weights.bin holds beyond its hash.
  for (const fs::path& entry : Entries(".ort")) EXPECT_GE(fs::file_size(entry), 64u * 64 * 4) << entry;
  EXPECT_EQ(Entries(".ort").size(), 4u) << "(weights 1, weights 2) x (extended, all)";
  // Without its weights file the model is refused, not served from an entry.
  fs::remove(folder / "weights.bin");
  auto rt = Runtime::Create(Policy());
  ASSERT_TRUE(rt.ok());
  auto gone = (*rt)->Load(path, {.device = DeviceRequest::Cpu()});
  EXPECT_EQ(gone.status().code(), StatusCode::kFailedPrecondition) << gone.status().ToString();
  fs::remove_all(folder);
}

}  // namespace
}  // namespace ebb
