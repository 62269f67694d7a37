// The optimized-model cache on real ONNX Runtime and real files: outputs
// bitwise identical with and without it, at every level; a corrupt,
// truncated, foreign or ORT-refused entry falls back to the model's file and
// is replaced; the folder stays within its bound, least recently used first;
// a model with external data is keyed by its weights too (issue 18).
// Issue 17, finding 5: a folder others can write is refused; an entry
// truncated or rewritten under a live session changes nothing; an entry
// copied from another model under the victim's key is rejected; a header that
// is a link, a device, a FIFO or huge is refused at once with bounded memory.
// Issue 38: a hit is mapped again, under a guard (a read lease): a truncation, by this
// process or another, waits until the mapping is a private copy; an entry someone has open
// for writing is copied instead.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "ebb/runtime.h"
#include "external_data_model.h"
#include "port.h"
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

// An entry's checksum as the cache computes it: XXH3-64 seeded with a hash of the entry id (its file name).
std::string Checksum(const fs::path& ort, const std::string& bytes) {
  const std::string id = ort.stem().string();
  char sum[17];
  std::snprintf(sum, sizeof sum, "%016llx",
                static_cast<unsigned long long>(
                    XXH3_64bits_withSeed(bytes.data(), bytes.size(), XXH3_64bits(id.data(), id.size()))));
  return sum;
}

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM").
int64_t OwnStatusBytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;
  }
  return -1;
}

// Whether this process maps `path` now (/proc/self/maps; a removed file reads "<path> (deleted)").
bool Mapped(const fs::path& path) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find(path.string()) != std::string::npos) return true;
  }
  return false;
}

// Whether files in `dir` can be mapped under a guard (a read lease): where not, hits are copied.
bool GuardedMappingsIn(const fs::path& dir) {
  const fs::path probe = dir / "guard_probe";
  fs::create_directories(dir);
  std::ofstream(probe, std::ios::binary) << "probe";
  Result<port::ReadOnlyFile> file = port::ReadOnlyFile::Open(probe.string(), true);
  const bool guarded = file.ok() && port::GuardedMapping::Map(*file, 5).ok();
  fs::remove(probe);
  return guarded;
}

// The value of a string field of an entry's header.
std::string HeaderField(const std::string& header, const std::string& name) {
  const std::string key = "\"" + name + "\": \"";
  const size_t at = header.find(key);
  if (at == std::string::npos) return "";
  const size_t begin = at + key.size();
  return header.substr(begin, header.find('"', begin) - begin);
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
  EXPECT_NE(header.find("\"checksum\""), std::string::npos) << header;
  EXPECT_EQ(fs::status(dir_).permissions() & fs::perms::all, fs::perms::owner_all) << "the folder is private";
}

TEST_F(OptimizedModelCacheTest, ALoadsOwnLevelIsTheEntrysAndTheSessionsKey) {
  auto rt = Runtime::Create(Policy(GraphOptimization::kExtended));
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  const std::string path = ModelPath("convnet");
  auto plain = (*rt)->Load(path, {.device = DeviceRequest::Cpu()});
  auto all = (*rt)->Load(path, {.device = DeviceRequest::Cpu(), .graph_optimization = GraphOptimization::kAll});
  auto named = (*rt)->Load(path, {.device = DeviceRequest::Cpu(), .graph_optimization = GraphOptimization::kExtended});
  ASSERT_TRUE(plain.ok() && all.ok() && named.ok());
  EXPECT_EQ((*plain)->load_record().graph_optimization, GraphOptimization::kExtended);
  EXPECT_EQ((*all)->load_record().graph_optimization, GraphOptimization::kAll);
  EXPECT_NE(&(*all)->state(), &(*plain)->state()) << "two levels are two sessions";
  EXPECT_EQ(&(*named)->state(), &(*plain)->state()) << "naming the policy's level is the policy's session";
  EXPECT_EQ((*rt)->load_count(), 2u);
  // One cache entry per level, each saying its level.
  std::vector<std::string> options;
  for (const fs::path& header : Entries(".json")) {
    const std::string text = ReadFile(header);
    for (const char* level : {"graph_optimization=all", "graph_optimization=extended"}) {
      if (text.find(level) != std::string::npos) options.push_back(level);
    }
  }
  std::sort(options.begin(), options.end());
  EXPECT_EQ(options, (std::vector<std::string>{"graph_optimization=all", "graph_optimization=extended"}));
  auto out_all = (*all)->Run(InputsFor(**all));
  auto out_plain = (*plain)->Run(InputsFor(**plain));
  ASSERT_TRUE(out_all.ok() && out_plain.ok());
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
  Check([](const fs::path& ort, const fs::path&) { fs::resize_file(ort, 0); }, "truncated");
}

TEST_F(DamagedEntryTest, EntryThatIsALink) {
  const fs::path elsewhere = dir_.string() + ".elsewhere.ort";
  Check([&](const fs::path& ort, const fs::path&) {
    fs::rename(ort, elsewhere);
    fs::create_symlink(elsewhere, ort);
  }, "symbolic link");
  fs::remove(elsewhere);
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
    std::string header = ReadFile(json);
    const size_t b = header.find("\"bytes\": ") + 9;
    header.replace(b, header.find(',', b) - b, "4096");
    const size_t x = header.find("\"checksum\": \"") + 13;
    header.replace(x, 16, Checksum(ort, bytes));
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
  fs::remove_all(dir_);  // the mapping keeps the removed file's bytes
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

// ---- Issue 17, finding 5: the cache trusted its folder ---------------------------------------------

TEST_F(OptimizedModelCacheTest, FolderOthersCanWriteOrAnotherUsersIsRefusedWithAWarning) {
  const Outcome plain = LoadAndRun(ModelPath("convnet"), Policy(GraphOptimization::kExtended, /*cache=*/false));
  struct Case {
    fs::perms mode;
    uid_t owner;  // -1: this user
    const char* why;
  };
  std::vector<Case> cases = {{fs::perms::all, static_cast<uid_t>(-1), "writable by group or others (mode 0777"},
                             {fs::perms::owner_all | fs::perms::group_all, static_cast<uid_t>(-1), "(mode 0770"}};
  if (geteuid() == 0) cases.push_back({fs::perms::owner_all, 65534, "belongs to user 65534"});  // chown needs root
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::permissions(dir_, c.mode, fs::perm_options::replace);
    if (c.owner != static_cast<uid_t>(-1)) {
      ASSERT_EQ(chown(dir_.c_str(), c.owner, static_cast<gid_t>(-1)), 0);
    }
    ::testing::internal::CaptureStderr();
    const Outcome out = LoadAndRun(ModelPath("convnet"), Policy());
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_FALSE(out.load.from_optimized_cache);
    EXPECT_FALSE(out.load.wrote_optimized_cache);
    EXPECT_NE(out.load.optimized_cache_note.find("optimized-model cache off: refused: the folder"), std::string::npos)
        << out.load.optimized_cache_note;
    EXPECT_NE(out.load.optimized_cache_note.find(c.why), std::string::npos) << out.load.optimized_cache_note;
    EXPECT_NE(log.find("warning: optimized-model cache off: refused"), std::string::npos) << log;
    EXPECT_TRUE(out.outputs == plain.outputs) << "the model still loads, from its file";
    std::error_code ec;
    EXPECT_TRUE(fs::is_empty(dir_, ec)) << "nothing written into a refused folder";
  }
}

TEST_F(OptimizedModelCacheTest, EntriesArePrivateWhateverTheUmaskAndOneOthersCanWriteIsRefused) {
  const mode_t old_umask = umask(0);
  const Outcome first = LoadAndRun(ModelPath("convnet"), Policy());
  umask(old_umask);
  ASSERT_TRUE(first.load.wrote_optimized_cache) << first.load.optimized_cache_note;
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.status().permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write)
        << e.path();
  }
  fs::permissions(Entries(".ort")[0], fs::perms::group_write | fs::perms::others_write, fs::perm_options::add);
  const Outcome again = LoadAndRun(ModelPath("convnet"), Policy());
  EXPECT_NE(again.load.optimized_cache_note.find("writable by group or others"), std::string::npos)
      << again.load.optimized_cache_note;
  EXPECT_TRUE(again.load.wrote_optimized_cache) << "replaced by a private one";
  EXPECT_TRUE(again.outputs == first.outputs);
}

TEST_F(OptimizedModelCacheTest, EntryTruncatedOrRewrittenInPlaceUnderALiveSessionChangesNothing) {
  // Before issue 17, the session's weights were the entry's file pages, unguarded: truncating the file
  // made the next run fault (SIGBUS), rewriting it changed the weights. Issue 17 made a hit a private
  // copy; issue 38 maps it again, under a lease: the truncation waits until the mapping is a copy.
  for (const char* model : {"tiny", "mixed", "waifu2x_scale2x"}) {
    SCOPED_TRACE(model);
    fs::remove_all(dir_);
    ASSERT_TRUE(LoadAndRun(ModelPath(model), Policy()).load.wrote_optimized_cache);
    auto rt = Runtime::Create(Policy());
    ASSERT_TRUE(rt.ok());
    auto s = (*rt)->Load(ModelPath(model), {.device = DeviceRequest::Cpu()});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_TRUE((*s)->load_record().from_optimized_cache) << (*s)->load_record().optimized_cache_note;
    const std::vector<NamedTensor> inputs = InputsFor(**s);
    auto before = (*s)->Run(inputs);
    ASSERT_TRUE(before.ok());
    const fs::path ort = Entries(".ort")[0];
    EXPECT_EQ(Mapped(ort), GuardedMappingsIn(dir_)) << "a hit maps its entry where it can be guarded";
    const uintmax_t size = fs::file_size(ort);
    fs::resize_file(ort, 0);  // in place: the same file, now empty
    EXPECT_FALSE(Mapped(ort)) << "the session's bytes are a private copy now";
    auto truncated = (*s)->Run(inputs);
    ASSERT_TRUE(truncated.ok()) << truncated.status().ToString();
    EXPECT_TRUE(OutputBytes(*truncated) == OutputBytes(*before));
    {
      std::fstream f(ort, std::ios::binary | std::ios::in | std::ios::out);
      const std::string garbage(size, '\x5a');
      f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));  // same size, other bytes
    }
    ASSERT_EQ(fs::file_size(ort), size);
    auto rewritten = (*s)->Run(inputs);
    ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
    EXPECT_TRUE(OutputBytes(*rewritten) == OutputBytes(*before));
  }
}

TEST_F(OptimizedModelCacheTest, EntryTruncatedByAnotherProcessDuringRunsChangesNothing) {
  // Issue 38: the mapped entry truncated by another process of this user while runs go on in this one.
  ASSERT_TRUE(LoadAndRun(ModelPath("waifu2x_scale2x"), Policy()).load.wrote_optimized_cache);
  auto rt = Runtime::Create(Policy());
  ASSERT_TRUE(rt.ok());
  auto s = (*rt)->Load(ModelPath("waifu2x_scale2x"), {.device = DeviceRequest::Cpu()});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE((*s)->load_record().from_optimized_cache) << (*s)->load_record().optimized_cache_note;
  const fs::path ort = Entries(".ort")[0];
  EXPECT_EQ(Mapped(ort), GuardedMappingsIn(dir_));
  const std::vector<NamedTensor> inputs = InputsFor(**s);
  auto before = (*s)->Run(inputs);
  ASSERT_TRUE(before.ok());
  std::atomic<bool> done{false};
  std::atomic<int> runs{0}, differing{0};
  std::thread runner([&] {
    while (!done.load()) {
      auto out = (*s)->Run(inputs);
      if (!out.ok() || OutputBytes(*out) != OutputBytes(*before)) differing.fetch_add(1);
      runs.fetch_add(1);
    }
  });
  while (runs.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(truncate(ort.c_str(), 0) == 0 ? 0 : 1);  // held by the kernel until the copy is made
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  EXPECT_EQ(fs::file_size(ort), 0u);
  const int runs_at_truncation = runs.load();
  while (runs.load() < runs_at_truncation + 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  done = true;
  runner.join();
  EXPECT_EQ(differing.load(), 0);
  EXPECT_FALSE(Mapped(ort));
}

TEST_F(OptimizedModelCacheTest, EntryOpenForWritingElsewhereIsCopiedNotMapped) {
  // No lease on a file someone has open for writing: the hit reads the entry into memory instead.
  const Outcome first = LoadAndRun(ModelPath("convnet"), Policy());
  ASSERT_TRUE(first.load.wrote_optimized_cache);
  const fs::path ort = Entries(".ort")[0];
  std::fstream writer(ort, std::ios::binary | std::ios::in | std::ios::out);
  ASSERT_TRUE(writer.is_open());
  auto rt = Runtime::Create(Policy());
  ASSERT_TRUE(rt.ok());
  auto s = (*rt)->Load(ModelPath("convnet"), {.device = DeviceRequest::Cpu()});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE((*s)->load_record().from_optimized_cache) << (*s)->load_record().optimized_cache_note;
  EXPECT_FALSE(Mapped(ort)) << "copied, not mapped";
  const std::vector<NamedTensor> inputs = InputsFor(**s);
  auto before = (*s)->Run(inputs);
  ASSERT_TRUE(before.ok());
  writer.write(std::string(fs::file_size(ort), '\x5a').data(), static_cast<std::streamsize>(fs::file_size(ort)));
  writer.close();
  auto after = (*s)->Run(inputs);
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(OutputBytes(*after) == OutputBytes(*before));
  EXPECT_TRUE(OutputBytes(*before) == first.outputs);
}

TEST_F(OptimizedModelCacheTest, ARememberedVerificationIsNeverStale) {
  // Issue 38: a mapped entry that verified once, settled, is not checksummed again in this process while its
  // file keeps its identity; a write in place, even of the same size, gives it another, and is caught.
  const Outcome first = LoadAndRun(ModelPath("convnet"), Policy());
  ASSERT_TRUE(first.load.wrote_optimized_cache);
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // settled (model_file.h)
  auto rt = Runtime::Create(Policy());
  ASSERT_TRUE(rt.ok());
  auto load = [&] {
    auto s = (*rt)->Load(ModelPath("convnet"), {.device = DeviceRequest::Cpu()});
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return Outcome{};
    auto out = (*s)->Run(InputsFor(**s));
    EXPECT_TRUE(out.ok());
    Outcome o{out.ok() ? OutputBytes(*out) : "", (*s)->load_record()};
    (*rt)->Unload(**s);
    return o;
  };
  for (int i = 0; i < 2; ++i) {
    const Outcome hit = load();
    EXPECT_TRUE(hit.load.from_optimized_cache) << hit.load.optimized_cache_note;
    EXPECT_TRUE(hit.outputs == first.outputs);
  }
  const fs::path ort = Entries(".ort")[0];
  std::string bytes = ReadFile(ort);
  bytes[bytes.size() / 2] ^= 0x01;  // one bit, same size, in place
  {
    std::fstream f(ort, std::ios::binary | std::ios::in | std::ios::out);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const Outcome after = load();
  EXPECT_TRUE(after.load.wrote_optimized_cache) << "the entry was refused and made again";
  EXPECT_NE(after.load.optimized_cache_note.find("checksum mismatch"), std::string::npos)
      << after.load.optimized_cache_note;
  EXPECT_TRUE(after.outputs == first.outputs);
}

TEST_F(OptimizedModelCacheTest, EntryCopiedFromAnotherModelUnderTheVictimsKeyIsRejected) {
  // The attack of the issue: convnet's entry copied over tiny's, and its header given tiny's
  // model_sha256, so that every key field names tiny. Before, tiny then ran convnet's graph and weights.
  const Outcome tiny_plain = LoadAndRun(ModelPath("tiny"), Policy(GraphOptimization::kExtended, /*cache=*/false));
  ASSERT_TRUE(LoadAndRun(ModelPath("tiny"), Policy()).load.wrote_optimized_cache);
  const fs::path tiny_ort = Entries(".ort")[0], tiny_json = Entries(".json")[0];
  const std::string tiny_sha = HeaderField(ReadFile(tiny_json), "model_sha256");
  ASSERT_EQ(tiny_sha.size(), 64u);
  ASSERT_TRUE(LoadAndRun(ModelPath("convnet"), Policy()).load.wrote_optimized_cache);
  fs::path convnet_ort;
  for (const fs::path& p : Entries(".ort")) {
    if (p != tiny_ort) convnet_ort = p;
  }
  std::string header = ReadFile(fs::path(convnet_ort).replace_extension(".json"));
  const std::string convnet_sha = HeaderField(header, "model_sha256");
  header.replace(header.find(convnet_sha), convnet_sha.size(), tiny_sha);
  fs::copy_file(convnet_ort, tiny_ort, fs::copy_options::overwrite_existing);
  WriteFile(tiny_json, header);

  const Outcome again = LoadAndRun(ModelPath("tiny"), Policy());
  EXPECT_NE(again.load.optimized_cache_note.find("checksum mismatch"), std::string::npos)
      << again.load.optimized_cache_note;
  EXPECT_TRUE(again.load.wrote_optimized_cache) << "replaced by tiny's own entry";
  EXPECT_TRUE(again.outputs == tiny_plain.outputs) << "tiny's outputs, not convnet's";
  const Outcome healed = LoadAndRun(ModelPath("tiny"), Policy());
  EXPECT_TRUE(healed.load.from_optimized_cache) << healed.load.optimized_cache_note;
  EXPECT_TRUE(healed.outputs == tiny_plain.outputs);
}

TEST_F(OptimizedModelCacheTest, HeaderThatIsALinkADeviceAFifoOrHugeIsRefusedAtOnceWithBoundedMemory) {
  // Before: a header linked to /dev/zero was read without a limit (3.1 GiB in 6 s), a FIFO blocked the
  // load for good, and a huge header was read whole.
  const Outcome plain = LoadAndRun(ModelPath("convnet"), Policy(GraphOptimization::kExtended, /*cache=*/false));
  struct Case {
    const char* name;
    std::function<void(const fs::path& json)> make;
    const char* why;
  };
  const std::vector<Case> cases = {
      {"a link to /dev/zero", [](const fs::path& json) { fs::create_symlink("/dev/zero", json); }, "symbolic link"},
      {"a FIFO", [](const fs::path& json) { ASSERT_EQ(mkfifo(json.c_str(), 0600), 0); }, "a FIFO"},
      {"1 GiB (sparse)",
       [](const fs::path& json) {
         WriteFile(json, "{");
         fs::resize_file(json, uintmax_t{1} << 30);
       },
       "larger than the limit of 64 KiB for the entry's header"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    fs::remove_all(dir_);
    ASSERT_TRUE(LoadAndRun(ModelPath("convnet"), Policy()).load.wrote_optimized_cache);
    const fs::path json = Entries(".json")[0];
    fs::remove(json);
    c.make(json);
    std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM := VmRSS
    const int64_t before = OwnStatusBytes("VmRSS");
    const auto t0 = std::chrono::steady_clock::now();
    const Outcome out = LoadAndRun(ModelPath("convnet"), Policy());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int64_t peak = OwnStatusBytes("VmHWM");
    EXPECT_NE(out.load.optimized_cache_note.find(c.why), std::string::npos) << out.load.optimized_cache_note;
    EXPECT_TRUE(out.load.wrote_optimized_cache) << "the bad header is removed and the entry written again";
    EXPECT_TRUE(out.outputs == plain.outputs);
    EXPECT_LT(seconds, 5.0) << "a convnet load takes milliseconds; the bound is for a loaded machine";
    if (testing::kRssBoundsHold) {
      EXPECT_LT(peak - before, 64 * testing::kMiB) << "RSS before " << before << ", peak " << peak;
    }
  }
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
