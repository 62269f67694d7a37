// The cache's own orchestration: keys, single loading under concurrency,
// failed loads not cached, and sessions outliving their entries. Sessions are
// real (the tiny model on real ONNX Runtime); the loaders are the tests'.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <tuple>
#include <thread>

#include "ebb/runtime.h"
#include "ebb/session_cache.h"
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
  EXPECT_EQ(runtime_->cache().size(), 0u);
  EXPECT_TRUE((*a)->Run(testing::One("x", testing::RandomTensor({1, 64}))).ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ebb
