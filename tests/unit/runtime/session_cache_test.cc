// The cache's own orchestration: keys, single loading under concurrency,
// failed loads not cached, and sessions outliving their entries. Sessions are
// real (the tiny model on real ONNX Runtime); the loaders are the tests'.
// Then Runtime::Load's key for models with external data: new weights are a
// new model (issue 18), and a weights file that is missing or leads out of
// the model's folder is refused.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <tuple>
#include <thread>

#include "ebb/runtime.h"
#include "ebb/session_cache.h"
#include "external_data_model.h"
#include "test_util.h"

namespace ebb {
namespace {

class SessionCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto rt = Runtime::Create();
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    runtime_ = std::move(rt).value();
  }

  // A new Session object each call (the runtime's own cache is cleared first).
  std::shared_ptr<Session> FreshSession() {
    runtime_->Clear();
    auto s = runtime_->Load(testing::ModelPath("tiny"));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : nullptr;
  }

  std::unique_ptr<Runtime> runtime_;
  SessionCache cache_;
  const SessionKey key_{"aaaa", "cpu", ""};
};

TEST_F(SessionCacheTest, SameKeyGivesSameSessionWithoutReload) {
  int calls = 0;
  auto loader = [&]() -> Result<std::shared_ptr<Session>> {
    ++calls;
    return FreshSession();
  };
  bool loaded = false;
  auto a = cache_.GetOrLoad(key_, loader, &loaded);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(loaded);
  auto b = cache_.GetOrLoad(key_, loader, &loaded);
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(loaded);
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(cache_.loads(key_), 1u);
}

TEST_F(SessionCacheTest, DifferentDeviceOrOptionsAreDifferentEntries) {
  auto loader = [&]() -> Result<std::shared_ptr<Session>> { return FreshSession(); };
  auto a = cache_.GetOrLoad({"aaaa", "cpu", ""}, loader);
  auto b = cache_.GetOrLoad({"aaaa", "auto", ""}, loader);
  auto c = cache_.GetOrLoad({"aaaa", "cpu", "strict"}, loader);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_NE(a->get(), b->get());
  EXPECT_NE(a->get(), c->get());
  EXPECT_EQ(cache_.size(), 3u);
  EXPECT_EQ(cache_.total_loads(), 3u);
}

TEST_F(SessionCacheTest, FailedLoadsAreNotCached) {
  int calls = 0;
  auto failing = [&]() -> Result<std::shared_ptr<Session>> {
    ++calls;
    return InvalidArgument("broken model");
  };
  auto a = cache_.GetOrLoad(key_, failing);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "broken model");
  EXPECT_EQ(cache_.size(), 0u);
  auto b = cache_.GetOrLoad(key_, [&]() -> Result<std::shared_ptr<Session>> { return FreshSession(); });
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(cache_.loads(key_), 1u);
}

TEST_F(SessionCacheTest, ConcurrentRequestsForOneKeyLoadOnce) {
  std::atomic<int> calls{0};
  auto template_session = FreshSession();
  auto slow = [&]() -> Result<std::shared_ptr<Session>> {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return template_session;
  };
  std::vector<std::thread> threads;
  std::vector<Session*> got(8, nullptr);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto s = cache_.GetOrLoad(key_, slow);
      if (s.ok()) got[i] = s->get();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls.load(), 1);
  for (Session* s : got) EXPECT_EQ(s, template_session.get());
}

TEST_F(SessionCacheTest, EraseDropsTheEntryButNotASessionInUse) {
  auto s = cache_.GetOrLoad(key_, [&]() -> Result<std::shared_ptr<Session>> { return FreshSession(); });
  ASSERT_TRUE(s.ok());
  std::weak_ptr<Session> weak = *s;
  EXPECT_TRUE(cache_.Erase(key_));
  EXPECT_EQ(cache_.Find(key_), nullptr);
  // The caller still holds it: it is alive and runs.
  auto out = (*s)->Run(testing::One("x", testing::RandomTensor({1, 64})));
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  s = Status(Internal("drop"));
  runtime_->Clear();
  EXPECT_TRUE(weak.expired());
}

TEST_F(SessionCacheTest, EraseIfSameIgnoresAStaleSession) {
  auto loader = [&]() -> Result<std::shared_ptr<Session>> { return FreshSession(); };
  auto old_session = cache_.GetOrLoad(key_, loader);
  ASSERT_TRUE(old_session.ok());
  ASSERT_TRUE(cache_.Erase(key_));
  auto fresh = cache_.GetOrLoad(key_, loader);
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE(cache_.EraseIfSame(key_, old_session->get()));
  EXPECT_EQ(cache_.Find(key_).get(), fresh->get());
  EXPECT_TRUE(cache_.EraseIfSame(key_, fresh->get()));
  EXPECT_EQ(cache_.loads(key_), 2u);
}

// Issue 9, finding 9: two model files with the same bytes share one loaded model (the cache is
// keyed by content), but each name keeps its own name in what it reports.
TEST_F(SessionCacheTest, ModelsSharedByContentKeepTheirOwnNames) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("ebb_same_bytes_" + std::to_string(getpid()));
  fs::create_directories(dir / "a");
  fs::create_directories(dir / "a_copy");
  fs::copy_file(testing::ModelPath("tiny"), dir / "a" / "model.onnx", fs::copy_options::overwrite_existing);
  fs::copy_file(testing::ModelPath("tiny"), dir / "a_copy" / "model.onnx", fs::copy_options::overwrite_existing);
  const LoadOptions cpu{.device = DeviceRequest::Cpu()};
  auto a = runtime_->Load((dir / "a" / "model.onnx").string(), cpu);
  auto copy = runtime_->Load((dir / "a_copy" / "model.onnx").string(), cpu);
  ASSERT_TRUE(a.ok() && copy.ok());
  EXPECT_EQ(runtime_->load_count(), 1u) << "one load: the content is the same";
  EXPECT_EQ((*a)->name(), "a");
  EXPECT_EQ((*copy)->name(), "a_copy");
  EXPECT_EQ((*copy)->source_path(), (dir / "a_copy" / "model.onnx").string());
  EXPECT_TRUE((*a)->SharesArenaWith(**copy));
  // Loads under one name keep giving one object.
  EXPECT_EQ(runtime_->Load((dir / "a" / "model.onnx").string(), cpu)->get(), a->get());
  EXPECT_EQ(runtime_->Load((dir / "a_copy" / "model.onnx").string(), cpu)->get(), copy->get());

  for (const auto& [session, own, other] : {std::tuple{*a, "'a'", "'a_copy'"}, std::tuple{*copy, "'a_copy'", "'a'"}}) {
    auto run = session->Run(testing::One("y", testing::RandomTensor({1, 64})));
    ASSERT_FALSE(run.ok());
    EXPECT_NE(run.status().message().find(std::string("model ") + own), std::string::npos) << run.status().message();
    EXPECT_EQ(run.status().message().find(other), std::string::npos) << run.status().message();
    EXPECT_TRUE(session->Run(testing::One("x", testing::RandomTensor({1, 64}))).ok());
  }
  EXPECT_EQ((*a)->run_count(), 4u) << "counters belong to the loaded model";
  // Unloading either drops the one cache entry; the sessions held stay usable.
  EXPECT_TRUE(runtime_->Unload(**copy));
  EXPECT_EQ(runtime_->cached_sessions(), 0u);
  EXPECT_TRUE((*a)->Run(testing::One("x", testing::RandomTensor({1, 64}))).ok());
  fs::remove_all(dir);
}

// Issue 34: copies of one model (the same bytes in other files) are one model in every call:
// IsSameModel, Unload by any copy's path, and a load for "auto" and one for "cpu" on a machine
// whose CUDA cannot be used.
TEST_F(SessionCacheTest, CopiesOfOneModelAreOneModelInEveryCall) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("ebb_copies_" + std::to_string(getpid()));
  for (const char* sub : {"p", "q", "r"}) {
    fs::create_directories(dir / sub);
    fs::copy_file(testing::ModelPath("tiny"), dir / sub / "tiny.onnx", fs::copy_options::overwrite_existing);
  }
  const std::string p = (dir / "p" / "tiny.onnx").string(), q = (dir / "q" / "tiny.onnx").string();
  const std::string r = (dir / "r" / "tiny.onnx").string();
  auto first = runtime_->Load(p);  // "auto"
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  if ((*first)->device().kind != DeviceKind::kCpu) GTEST_SKIP() << "CUDA works here: auto is not the CPU";
  auto on_cpu = runtime_->Load(p, {.device = DeviceRequest::Cpu()});
  auto copy = runtime_->Load(q, {.device = DeviceRequest::Cpu()});
  auto other = runtime_->Load(r);
  ASSERT_TRUE(on_cpu.ok() && copy.ok() && other.ok());
  EXPECT_EQ(runtime_->load_count(), 1u) << "auto and cpu on a CPU-only machine, and the copies: one load";
  EXPECT_EQ(runtime_->cached_sessions(), 1u);
  EXPECT_TRUE((*first)->IsSameModel(**copy));
  EXPECT_TRUE((*copy)->IsSameModel(**other));
  EXPECT_EQ((*copy)->name(), "tiny");  // the same name from another file: that file's path
  EXPECT_EQ((*copy)->source_path(), q);
  // Unloaded by the path of a copy that was not the first to load it.
  EXPECT_EQ(runtime_->Unload(q), 1u);
  EXPECT_EQ(runtime_->cached_sessions(), 0u);
  EXPECT_EQ(runtime_->Unload(p), 0u);
  fs::remove_all(dir);
}

// Issue 34: a caller who only lets go of its handles (Java's close()) still gets the memory back:
// at most max_unused_models unused models stay cached, the least recently handed out go first.
TEST(SessionCacheBound, UnusedModelsPastTheBoundAreDroppedLeastRecentFirst) {
  namespace fs = std::filesystem;
  MemoryPolicy policy;
  policy.max_unused_models = 2;
  auto rt = Runtime::Create(policy);
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  Runtime& runtime = **rt;
  const fs::path dir = fs::path(::testing::TempDir()) / ("ebb_unused_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::vector<std::string> paths;
  for (int i = 0; i < 6; ++i) {
    paths.push_back((dir / ("m" + std::to_string(i) + ".onnx")).string());
    testing::WriteModelVariant(testing::ModelPath("tiny"), paths.back(), "copy " + std::to_string(i));
  }
  std::vector<std::shared_ptr<Session>> held;
  for (int i = 0; i < 4; ++i) held.push_back(*runtime.Load(paths[i]));
  EXPECT_EQ(runtime.cached_sessions(), 4u) << "held models are never dropped";
  std::weak_ptr<Session> oldest = held[0];
  held.clear();  // all four closed: m0 was handed out first
  ASSERT_TRUE(runtime.Load(paths[4]).ok());  // held while it loads, by nobody after this line
  EXPECT_EQ(runtime.cached_sessions(), 3u) << "m4 and two unused (the bound): m2, m3";
  EXPECT_TRUE(oldest.expired()) << "the least recently handed out went, and was destroyed";
  EXPECT_EQ(runtime.load_count(), 5u);
  ASSERT_TRUE(runtime.Load(paths[3]).ok());  // within the bound: back without a load
  EXPECT_EQ(runtime.load_count(), 5u);
  auto kept = runtime.Load(paths[5]);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(runtime.cached_sessions(), 3u) << "m5 (held) and two unused: m3, m4 (m2 went)";
  ASSERT_TRUE(runtime.Trim().ok());
  EXPECT_EQ(runtime.cached_sessions(), 3u);
  fs::remove_all(dir);
}

class ExternalDataKeyTest : public SessionCacheTest {
 protected:
  void SetUp() override {
    SessionCacheTest::SetUp();
    dir_ = std::filesystem::path(::testing::TempDir()) / ("ebb_ext_key_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Loads `path` on the CPU and runs it on ones: the first output's values, or {} on failure.
  std::vector<float> Run(const std::string& path, std::shared_ptr<Session>* held = nullptr) {
    auto s = runtime_->Load(path, {.device = DeviceRequest::Cpu()});
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return {};
    auto out = (*s)->Run(testing::MatMulInput());
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (held) *held = *s;
    if (!out.ok()) return {};
    auto values = (*out)[0].tensor.values<float>();
    return std::vector<float>(values.begin(), values.end());
  }

  std::filesystem::path dir_;
};

TEST_F(ExternalDataKeyTest, NewWeightsBesideTheSameModelFileAreANewModel) {
  const std::string path = testing::WriteMatMulModel(dir_ / "ext", 1.f);
  std::shared_ptr<Session> first;
  EXPECT_EQ(Run(path, &first), std::vector<float>(64, 64.f));
  const uint64_t loads = runtime_->load_count();
  EXPECT_EQ(Run(path), std::vector<float>(64, 64.f));
  EXPECT_EQ(runtime_->load_count(), loads) << "unchanged files: the cached session";
  // A new weights file renamed over the old one: the same model.onnx, another model.
  testing::ReplaceMatMulWeights(dir_ / "ext" / "weights.bin", 2.f);
  std::shared_ptr<Session> second;
  EXPECT_EQ(Run(path, &second), std::vector<float>(64, 128.f));
  EXPECT_EQ(runtime_->load_count(), loads + 1);
  EXPECT_NE(first.get(), second.get());
  // Rewritten in place (same inode, same size) after its hash was remembered (still for 2 s).
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  EXPECT_EQ(Run(path), std::vector<float>(64, 128.f));
  EXPECT_EQ(Run(path), std::vector<float>(64, 128.f));
  EXPECT_EQ(runtime_->load_count(), loads + 1);
  testing::ReplaceMatMulWeights(dir_ / "ext" / "weights.bin", 3.f, /*in_place=*/true);
  EXPECT_EQ(Run(path), std::vector<float>(64, 192.f));
  EXPECT_EQ(runtime_->load_count(), loads + 2);
  // The sessions loaded before keep their own weights.
  auto old = first->Run(testing::MatMulInput());
  ASSERT_TRUE(old.ok());
  EXPECT_TRUE(testing::AllEqual(*old, 64.f));
}

TEST_F(ExternalDataKeyTest, OutputsEqualTheSameModelInOneFile) {
  const std::string external = testing::WriteMatMulModel(dir_ / "ext", 0.25f);
  const std::string single = testing::WriteMatMulModel(dir_ / "single", 0.25f, /*location=*/"");
  ASSERT_GT(std::filesystem::file_size(single), std::filesystem::file_size(external) + 16000);
  const std::vector<float> a = Run(external), b = Run(single);
  EXPECT_EQ(a, std::vector<float>(64, 16.f));
  EXPECT_EQ(a, b);
}

TEST_F(ExternalDataKeyTest, MissingOrEscapingWeightsAreRefusedAndLoseNothing) {
  const std::string good = testing::WriteMatMulModel(dir_ / "good", 1.f);
  EXPECT_EQ(Run(good), std::vector<float>(64, 64.f));
  testing::WriteMatMulWeights(dir_ / "outside.bin", 1.f);
  std::filesystem::create_directories(dir_ / "link");
  const std::string no_links = testing::MakeSymlink(dir_ / "outside.bin", dir_ / "link" / "weights.bin");
  struct Case {
    std::string folder, location;
    bool write_weights;
    StatusCode code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"missing", "weights.bin", false, StatusCode::kFailedPrecondition, "does not exist"},
      {"dotdot", "../outside.bin", false, StatusCode::kInvalidArgument, "leaves the model's folder"},
      {"absolute", (dir_ / "outside.bin").string(), false, StatusCode::kInvalidArgument, "absolute"},
      {"link", "weights.bin", false, StatusCode::kInvalidArgument, "outside the model's folder"},
  };
  for (const Case& c : cases) {
    if (!no_links.empty() && c.folder == "link") continue;
    const std::string path = testing::WriteMatMulModel(dir_ / c.folder, 1.f, c.location, c.write_weights);
    auto s = runtime_->Load(path, {.device = DeviceRequest::Cpu()});
    ASSERT_FALSE(s.ok()) << c.folder;
    EXPECT_EQ(s.status().code(), c.code) << s.status().ToString();
    EXPECT_NE(s.status().message().find(c.says), std::string::npos) << s.status().ToString();
    EXPECT_NE(s.status().message().find("external-data file '" + c.location + "'"), std::string::npos)
        << s.status().ToString();
  }
  // Nothing was cached for them, and the good model still runs from its cached session.
  const uint64_t loads = runtime_->load_count();
  EXPECT_EQ(Run(good), std::vector<float>(64, 64.f));
  EXPECT_EQ(runtime_->load_count(), loads);
  EXPECT_EQ(runtime_->cached_sessions(), 1u);
  if (!no_links.empty()) GTEST_SKIP() << no_links;
}

// Issue 32: an offset or length past the file's end, or one that is not a number, was `internal` with
// ONNX Runtime's text where `invalid_argument` is promised. They are checked against the file first.
TEST_F(ExternalDataKeyTest, OffsetsAndLengthsOutsideTheFileAreInvalidArgument) {
  const std::string bytes = std::to_string(testing::kMatMulSide * testing::kMatMulSide * sizeof(float));  // 16384
  struct Case {
    std::string folder;
    testing::Extent extent;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"offset_past_end", {"16384", bytes}, "reads it up to byte 32768"},
      {"offset_huge", {"18446744073709551615", bytes}, "past 2^64"},
      {"length_past_end", {"0", "16385"}, "reads it up to byte 16385"},
      {"no_length_past_end", {"8", ""}, "reads it up to byte 16392"},
      {"offset_not_a_number", {"-1", bytes}, "offset '-1'"},
      {"length_not_a_number", {"0", "16384x"}, "length '16384x'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.folder);
    std::filesystem::create_directories(dir_ / c.folder);
    testing::WriteMatMulWeights(dir_ / c.folder / "weights.bin", 1.f);
    const std::string path = (dir_ / c.folder / "model.onnx").string();
    std::ofstream(path, std::ios::binary) << testing::MatMulModelBytes(1.f, "weights.bin", "", c.extent);
    auto s = runtime_->Load(path, {.device = DeviceRequest::Cpu()});
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << s.status().ToString();
    EXPECT_NE(s.status().message().find(c.says), std::string::npos) << s.status().ToString();
  }
  // What ONNX writes (offset 0, the tensor's length, or no length at all) loads and runs.
  for (const testing::Extent& fine : {testing::Extent{}, testing::Extent{"0", ""}, testing::Extent{"", ""}}) {
    const std::filesystem::path folder = dir_ / ("fine" + fine.offset + "_" + fine.length);
    std::filesystem::create_directories(folder);
    testing::WriteMatMulWeights(folder / "weights.bin", 2.f);
    std::ofstream(folder / "model.onnx", std::ios::binary) << testing::MatMulModelBytes(2.f, "weights.bin", "", fine);
    EXPECT_EQ(Run((folder / "model.onnx").string()), std::vector<float>(64, 128.f));
  }
}

TEST_F(ExternalDataKeyTest, BytesNamingExternalDataAreRefused) {
  const std::string bytes = testing::MatMulModelBytes(1.f, "weights.bin");
  auto s = runtime_->LoadFromBytes(bytes, {.device = DeviceRequest::Cpu()});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("external-data files ('weights.bin')"), std::string::npos)
      << s.status().ToString();
  auto single = runtime_->LoadFromBytes(testing::MatMulModelBytes(1.f, ""), {.device = DeviceRequest::Cpu()});
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  auto out = (*single)->Run(testing::MatMulInput());
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(testing::AllEqual(*out, 64.f));
}

}  // namespace
}  // namespace ebb
