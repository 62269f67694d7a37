// The memory budget on real models and real memory: three variants of the
// convnet (distinct bytes, so distinct sessions), charges measured from the
// process RSS, a budget that holds two of them.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <thread>

#include "ebb/model_pool.h"
#include "test_util.h"

namespace ebb {
namespace {

namespace fs = std::filesystem;
using testing::ImageInput;
using testing::kMiB;

// Variants of the convnet with distinct bytes, so distinct sessions.
std::vector<std::string> MakeVariants(int n) {
  std::vector<std::string> paths;
  for (int i = 0; i < n; ++i) {
    paths.push_back(::testing::TempDir() + "/ebb_variant_" + std::to_string(getpid()) + "_" + std::to_string(i) +
                    ".onnx");
    testing::WriteModelVariant(testing::ModelPath("convnet"), paths.back(), "variant " + std::to_string(i));
  }
  return paths;
}

const char* kNames[] = {"a", "b", "c"};

class ModelPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto rt = Runtime::Create();
    ASSERT_TRUE(rt.ok());
    runtime_ = std::move(rt).value();
    paths_ = MakeVariants(3);
  }
  void TearDown() override {
    pool_.reset();
    for (const auto& p : paths_) fs::remove(p);
  }

  void MakePool(PoolOptions options) {
    pool_ = std::make_unique<ModelPool>(*runtime_, options, [this](const PoolEvent& e) {
      std::lock_guard<std::mutex> lock(events_mu_);
      events_.push_back(e);
    });
    for (int i = 0; i < 3; ++i) {
      pool_->Add({kNames[i], paths_[i], {.device = DeviceRequest::Cpu()}, pinned_[i], std::nullopt});
    }
  }

  // One operation on a model: a 512x512 run (~50 MiB of transient memory).
  Status Use(const std::string& name, AcquireOptions options = {}) {
    auto lease = pool_->Acquire(name, options);
    if (!lease.ok()) return lease.status();
    auto out = lease->session()->Run(ImageInput(512, 512));
    return out.status();
  }

  std::vector<std::string> Evicted(EvictReason reason) {
    std::lock_guard<std::mutex> lock(events_mu_);
    std::vector<std::string> names;
    for (const PoolEvent& e : events_) {
      if (e.kind == PoolEvent::Kind::kEvict && e.reason == reason) names.push_back(e.name);
    }
    return names;
  }

  PoolState State(const std::string& name) { return pool_->StatusOf(name)->state; }

  // Uses every model once, so that the pool knows all charges; forgets the events.
  void WarmUp() {
    for (const char* n : kNames) ASSERT_TRUE(Use(n).ok()) << n;
    std::lock_guard<std::mutex> lock(events_mu_);
    events_.clear();
  }

  // The largest charge of the three, measured with an unbounded pool.
  int64_t MeasureCharge() {
    MakePool({.cpu_budget_bytes = int64_t{1} << 40});
    int64_t charge = 0;
    for (const char* n : kNames) {
      EXPECT_TRUE(Use(n).ok());
      charge = std::max(charge, pool_->StatusOf(n)->charge_bytes);
    }
    pool_.reset();
    events_.clear();
    return charge;
  }

  std::unique_ptr<Runtime> runtime_;
  std::unique_ptr<ModelPool> pool_;
  std::vector<std::string> paths_;
  bool pinned_[3] = {false, false, false};
  std::mutex events_mu_;
  std::vector<PoolEvent> events_;
};

TEST_F(ModelPoolTest, ChargesAreMeasuredFromLoadsAndOperations) {
  MakePool({.cpu_budget_bytes = int64_t{1} << 40});
  const int64_t file = static_cast<int64_t>(fs::file_size(paths_[0]));
  EXPECT_EQ(pool_->StatusOf("a")->charge_bytes, file) << "before a first load: the file size";
  ASSERT_TRUE(Use("a").ok());
  ModelStatus s = *pool_->StatusOf("a");
  EXPECT_GT(s.transient_bytes, 32 * kMiB) << "a 512x512 run holds 16-channel activations of 16 MiB";
  EXPECT_LT(s.transient_bytes, 512 * kMiB);
  EXPECT_EQ(s.charge_bytes, std::max(s.load_bytes + s.transient_bytes, file));
  EXPECT_EQ(pool_->used("cpu"), s.charge_bytes);
}

TEST_F(ModelPoolTest, BudgetForTwoOfThreeEvictsTheLeastRecentlyUsedIdleModel) {
  const int64_t charge = MeasureCharge();
  const int64_t budget = charge * 5 / 2;
  MakePool({.cpu_budget_bytes = budget});
  for (int round = 0; round < 3; ++round) {
    for (const char* n : kNames) {
      ASSERT_TRUE(Use(n).ok()) << n;
      EXPECT_LE(pool_->used("cpu"), budget) << "after " << n << " in round " << round;
    }
  }
  // Cycling a, b, c with room for two, the model evicted is always the one
  // used longest ago: the one after the model just used, in cycle order.
  std::vector<std::string> evicted = Evicted(EvictReason::kBudget);
  ASSERT_GE(evicted.size(), 6u);
  for (size_t i = evicted.size() - 6; i + 1 < evicted.size(); ++i) {
    const char next = static_cast<char>('a' + (evicted[i][0] - 'a' + 1) % 3);
    EXPECT_EQ(evicted[i + 1], std::string(1, next)) << "eviction " << i;
  }
  int ready = 0;
  for (const char* n : kNames) ready += State(n) == PoolState::kReady;
  EXPECT_EQ(ready, 2);
}

TEST_F(ModelPoolTest, AModelInFlightIsNeverEvicted) {
  const int64_t charge = MeasureCharge();
  MakePool({.cpu_budget_bytes = charge * 5 / 2});
  WarmUp();
  ASSERT_TRUE(Use("b").ok());
  ASSERT_TRUE(Use("c").ok());
  auto held = pool_->Acquire("a");  // a is in flight; b and c are loaded and idle
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(held->session()->Run(ImageInput(512, 512)).ok());
  ASSERT_TRUE(Use("b").ok());
  EXPECT_EQ(State("a"), PoolState::kReady);
  for (const std::string& n : Evicted(EvictReason::kBudget)) EXPECT_NE(n, "a");
}

TEST_F(ModelPoolTest, PinnedModelsStay) {
  const int64_t charge = MeasureCharge();
  pinned_[0] = true;
  MakePool({.cpu_budget_bytes = charge * 5 / 2});
  for (int round = 0; round < 2; ++round) {
    for (const char* n : kNames) ASSERT_TRUE(Use(n).ok());
  }
  EXPECT_EQ(State("a"), PoolState::kReady);
  for (const std::string& n : Evicted(EvictReason::kBudget)) EXPECT_NE(n, "a");
  EXPECT_FALSE(Evicted(EvictReason::kBudget).empty());
}

TEST_F(ModelPoolTest, WhenNothingIdleCanGoTheCallerGetsAClearError) {
  const int64_t charge = MeasureCharge();
  MakePool({.cpu_budget_bytes = charge * 3 / 2});
  WarmUp();
  auto a = pool_->Acquire("a");
  ASSERT_TRUE(a.ok());
  auto b = pool_->Acquire("b");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(b.status().message().find("cannot fit model 'b'"), std::string::npos) << b.status().message();
}

TEST_F(ModelPoolTest, AModelMeasuredLargerThanTheWholeBudgetIsUnloadedWithAClearError) {
  // Its file fits (the only charge known before a load); its first 512x512 run measures more
  // than 32 MiB of transient memory, so it is then charged more than the whole budget.
  MakePool({.cpu_budget_bytes = 16 * kMiB});
  ASSERT_TRUE(Use("a").ok()) << "the first call runs: the charge is measured as it runs";
  ASSERT_GT(pool_->StatusOf("a")->charge_bytes, 16 * kMiB);
  auto again = pool_->Acquire("a");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(again.status().message().find("cannot fit model 'a' even alone"), std::string::npos)
      << again.status().message();
  EXPECT_NE(again.status().message().find("as measured once loaded); it was unloaded"), std::string::npos)
      << again.status().message();
  EXPECT_EQ(State("a"), PoolState::kUnloaded) << "not left holding memory that nothing can run";
  EXPECT_EQ(Evicted(EvictReason::kBudget), std::vector<std::string>{"a"});
  // Asked again, it is refused without a load, and the others still serve.
  auto third = pool_->Acquire("a");
  EXPECT_EQ(third.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(pool_->StatusOf("a")->loads, 1u);
  auto b = pool_->Acquire("b");
  EXPECT_TRUE(b.ok()) << b.status().message();
}

TEST_F(ModelPoolTest, WaitingForCapacityGetsTheModelOnceTheCallInFlightEnds) {
  const int64_t charge = MeasureCharge();
  MakePool({.cpu_budget_bytes = charge * 3 / 2, .wait_for_capacity = std::chrono::seconds(20)});
  WarmUp();
  auto a = pool_->Acquire("a");
  ASSERT_TRUE(a.ok());
  std::thread finisher([lease = std::move(a).value()]() mutable {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  });
  auto b = pool_->Acquire("b");  // waits for a's call to end, then evicts a
  finisher.join();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(State("a"), PoolState::kUnloaded);
}

TEST_F(ModelPoolTest, KeepAliveZeroNegativeAndPositive) {
  MakePool({.cpu_budget_bytes = int64_t{1} << 40});
  ASSERT_TRUE(Use("a", {.keep_alive_ms = 0}).ok());
  EXPECT_EQ(State("a"), PoolState::kUnloaded) << "keep_alive 0 unloads right after the request";
  ASSERT_TRUE(Use("b", {.keep_alive_ms = -1}).ok());
  ASSERT_TRUE(Use("c", {.keep_alive_ms = 100}).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(State("b"), PoolState::kReady) << "a negative keep_alive never unloads";
  EXPECT_EQ(State("c"), PoolState::kUnloaded) << "unloaded after 100 ms idle";
  EXPECT_EQ(Evicted(EvictReason::kKeepAlive), (std::vector<std::string>{"a", "c"}));
}

// Issue 9, finding 7: milliseconds converted to the clock's nanoseconds overflowed, so a huge
// keep-alive unloaded the model after a few seconds. A library caller may still pass any value.
TEST_F(ModelPoolTest, TheLargestKeepAliveAndWaitNeverOverflow) {
  MakePool({.cpu_budget_bytes = int64_t{1} << 40,
            .wait_for_capacity = std::chrono::milliseconds::max(),
            .default_keep_alive_ms = std::numeric_limits<int64_t>::max()});
  ASSERT_TRUE(Use("a").ok());
  ASSERT_TRUE(Use("b", {.keep_alive_ms = std::numeric_limits<int64_t>::max() / 2}).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // six reaper rounds
  EXPECT_EQ(State("a"), PoolState::kReady);
  EXPECT_EQ(State("b"), PoolState::kReady);
  EXPECT_TRUE(Evicted(EvictReason::kKeepAlive).empty());
}

TEST_F(ModelPoolTest, AnExplicitLoadKeepsTheModelWhateverTheKeepAliveDefault) {
  MakePool({.cpu_budget_bytes = int64_t{1} << 40, .default_keep_alive_ms = 0});
  ASSERT_TRUE(pool_->Load("a").ok());
  EXPECT_EQ(State("a"), PoolState::kReady) << "a load is not a request: keep_alive 0 does not unload it";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the reaper runs every 50 ms
  EXPECT_EQ(State("a"), PoolState::kReady);
  EXPECT_TRUE(Evicted(EvictReason::kKeepAlive).empty());
  // A request applies its keep-alive again.
  ASSERT_TRUE(Use("a").ok());
  EXPECT_EQ(State("a"), PoolState::kUnloaded);

  MakePool({.cpu_budget_bytes = int64_t{1} << 40, .default_keep_alive_ms = 50});
  ASSERT_TRUE(Use("b").ok());
  ASSERT_TRUE(pool_->Load("b").ok()) << "loading a loaded model holds it too";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(State("b"), PoolState::kReady);
}

TEST_F(ModelPoolTest, LookingAtAModelNeitherLoadsNorTouchesIt) {
  MakePool({.cpu_budget_bytes = int64_t{1} << 40});
  EXPECT_EQ(pool_->SignatureOf("a").status().code(), StatusCode::kUnavailable) << "never loaded";
  EXPECT_EQ(pool_->SignatureOf("nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(State("a"), PoolState::kUnloaded);
  ASSERT_TRUE(Use("a").ok());
  ASSERT_TRUE(pool_->Unload("a").ok());
  auto signature = pool_->SignatureOf("a");
  ASSERT_TRUE(signature.ok()) << "the last session's signature is kept";
  EXPECT_EQ(signature->inputs[0].name, "x");
  EXPECT_EQ(signature->outputs[0].shape, Shape({-1, 3, -1, -1}));
  EXPECT_EQ(State("a"), PoolState::kUnloaded);
  EXPECT_EQ(pool_->StatusOf("a")->loads, 1u);
}

TEST_F(ModelPoolTest, OnDemandLoadAndItsAbsence) {
  MakePool({.cpu_budget_bytes = int64_t{1} << 40});
  auto off = pool_->Acquire("a", {.load_on_demand = false});
  ASSERT_FALSE(off.ok());
  EXPECT_EQ(off.status().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(Use("a").ok());
  EXPECT_EQ(pool_->StatusOf("a")->loads, 1u);
  EXPECT_EQ(pool_->Acquire("nope").status().code(), StatusCode::kNotFound);
}

// A removed model whose lease is still out is gone for every caller at once, and its entry with the
// last lease: no reload of it, no entry left behind.
TEST_F(ModelPoolTest, ARemovedModelIsGoneAtOnceEvenWithALeaseOut) {
  MakePool({.cpu_budget_bytes = int64_t{1} << 40});
  {
    auto lease = pool_->Acquire("a");
    ASSERT_TRUE(lease.ok());
    ASSERT_TRUE(pool_->Remove("a").ok());
    EXPECT_FALSE(pool_->Contains("a"));
    EXPECT_EQ(pool_->Acquire("a").status().code(), StatusCode::kNotFound) << "not loaded again";
    EXPECT_EQ(pool_->Unload("a").code(), StatusCode::kNotFound);
    EXPECT_EQ(pool_->StatusOf("a").status().code(), StatusCode::kNotFound);
    EXPECT_EQ(pool_->Remove("a").code(), StatusCode::kNotFound);
    EXPECT_TRUE(lease->session()->Run(ImageInput(64, 64)).ok()) << "the lease keeps its session";
  }
  for (const ModelStatus& m : pool_->Snapshot()) EXPECT_NE(m.name, "a");
  pool_->Add({"a", paths_[0], {.device = DeviceRequest::Cpu()}, false, std::nullopt});
  EXPECT_TRUE(Use("a").ok()) << "added again, it loads";
}

// Unload, Remove and Acquire of one model at once, while its load is in progress: each waits for
// the load, and whichever wakes after Remove erased the entry must look it up again, not use the
// one it found before waiting (a use after free, and heap corruption, in ModelMesh's unloadModel
// racing KServe's load and unload). Each round's file is new, so its load hashes 32 MiB first.
TEST(PoolRaceTest, WaitersOnALoadInProgressSurviveTheModelsRemoval) {
  auto rt = Runtime::Create();
  ASSERT_TRUE(rt.ok());
  const std::string path = ::testing::TempDir() + "/ebb_race_" + std::to_string(getpid()) + ".onnx";
  for (int round = 0; round < 12; ++round) {
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      const std::string block(1 << 20, static_cast<char>(0x40 + round));  // not a model: its load fails
      for (int i = 0; i < 32; ++i) out << block;
    }
    ModelPool pool(**rt, {.cpu_budget_bytes = int64_t{1} << 40});
    pool.Add({"m", path, {.device = DeviceRequest::Cpu()}, false, std::nullopt});
    std::thread load([&] { EXPECT_FALSE(pool.Acquire("m").ok()); });
    for (int i = 0; i < 2000; ++i) {
      auto s = pool.StatusOf("m");
      if (!s.ok() || s->state == PoolState::kLoading) break;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    Status unloaded, removed, acquired;
    // Half the rounds Remove waits first, half Unload: which waiter wakes first is the scheduler's.
    auto unload = [&] { unloaded = pool.Unload("m"); };
    auto remove = [&] { removed = pool.Remove("m"); };
    std::thread first(round % 2 ? std::function<void()>(unload) : std::function<void()>(remove));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::thread second(round % 2 ? std::function<void()>(remove) : std::function<void()>(unload));
    std::thread acquire([&] { acquired = pool.Acquire("m").status(); });
    load.join();
    first.join();
    second.join();
    acquire.join();
    EXPECT_TRUE(removed.ok()) << removed.ToString();
    EXPECT_TRUE(unloaded.ok() || unloaded.code() == StatusCode::kNotFound) << unloaded.ToString();
    EXPECT_FALSE(acquired.ok());
    EXPECT_FALSE(pool.Contains("m")) << "round " << round;
  }
  fs::remove(path);
}

// Every pool call at once on a few models, from several threads, for a while: Acquire (and run),
// Load, Unload, Remove, Add, ReapNow, Snapshot, with a budget that makes the pool evict. Under ASan
// and TSan (make asan, make tsan) this is the test of every wait-then-use in the pool: a random
// load/unload storm over ModelMesh crashed in Unload. Outcomes are whatever the interleaving gives;
// what must hold is no crash, no report, and a pool that works afterwards.
TEST(PoolRaceTest, AStormOfConcurrentCallsLeavesAWorkingPool) {
  auto rt = Runtime::Create();
  ASSERT_TRUE(rt.ok());
  std::vector<std::string> paths;
  for (int i = 0; i < 3; ++i) {
    paths.push_back(::testing::TempDir() + "/ebb_storm_" + std::to_string(getpid()) + "_" + std::to_string(i) + ".onnx");
    testing::WriteModelVariant(testing::ModelPath("tiny"), paths.back(), "storm " + std::to_string(i));
  }
  const std::vector<std::string> names = {"s0", "s1", "s2"};
  // Room for about two of the three (as measured here), so acquiring one evicts another.
  int64_t charge = 0;
  {
    ModelPool measure(**rt, {.cpu_budget_bytes = int64_t{1} << 40});
    measure.Add({"m", paths[0], {.device = DeviceRequest::Cpu()}, false, std::nullopt});
    ASSERT_TRUE(measure.Load("m").ok());
    charge = measure.StatusOf("m")->charge_bytes;
  }
  ModelPool pool(**rt, {.cpu_budget_bytes = charge * 5 / 2, .wait_for_capacity = std::chrono::milliseconds(5),
                        .default_keep_alive_ms = 1});
  for (int i = 0; i < 3; ++i) pool.Add({names[i], paths[i], {.device = DeviceRequest::Cpu()}, false, std::nullopt});
  std::atomic<int> runs{0};
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      unsigned seed = 1234u + static_cast<unsigned>(t);
      while (std::chrono::steady_clock::now() < until) {
        seed = seed * 1103515245u + 12345u;
        const int which = static_cast<int>((seed >> 8) % 3);
        const std::string& name = names[which];
        switch ((seed >> 16) % 8) {
          case 0: case 1: case 2: {
            auto lease = pool.Acquire(name);
            if (lease.ok()) {
              std::vector<NamedTensor> in;
              in.push_back({"x", Tensor::FromFloats({1, 64}, std::vector<float>(64, 1.0f))});
              if (lease->session()->Run(in).ok()) ++runs;
            }
            break;
          }
          case 3: (void)pool.Load(name); break;
          case 4: (void)pool.Unload(name); break;
          case 5: (void)pool.Remove(name); break;
          case 6: pool.Add({name, paths[which], {.device = DeviceRequest::Cpu()}, false, std::nullopt}); break;
          default: pool.ReapNow(); (void)pool.Snapshot(); break;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_GT(runs.load(), 0);
  for (int i = 0; i < 3; ++i) {
    pool.Add({names[i], paths[i], {.device = DeviceRequest::Cpu()}, false, std::nullopt});
    auto lease = pool.Acquire(names[i]);
    EXPECT_TRUE(lease.ok()) << names[i] << ": " << lease.status().ToString();
  }
  for (const auto& p : paths) fs::remove(p);
}

TEST(SharedArenaTest, TotalStaysUnderTheCapAsSessionsAreAdded) {
  MemoryPolicy policy;
  policy.cpu.arena_settings.max_bytes = 256 * kMiB;
  auto rt = Runtime::Create(policy);
  ASSERT_TRUE(rt.ok());
  std::vector<std::string> paths = MakeVariants(8);
  std::vector<std::shared_ptr<Session>> sessions;
  for (const std::string& p : paths) {
    auto s = (*rt)->Load(p, {.device = DeviceRequest::Cpu()});
    ASSERT_TRUE(s.ok());
    sessions.push_back(*s);
    RunFlags hold;
    hold.ends_operation = false;  // keep what it grew, the worst case
    ASSERT_TRUE((*s)->Run(ImageInput(384, 384), hold).ok());
    const std::optional<ArenaStats> shared = (*rt)->ReadMemory().Find("cpu:shared");
    ASSERT_TRUE(shared.has_value());
    EXPECT_LE(shared->reserved, 256 * kMiB) << sessions.size() << " sessions";
  }
  for (const auto& p : paths) fs::remove(p);
}

}  // namespace
}  // namespace ebb

namespace ebb {
namespace {

TEST(PoolRecoveryTest, ARealOutOfMemoryIsRecoveredByEvictingTrimmingAndRetryingOnce) {
  // Release mode never and a 160 MiB cap: after a 768x768 run the shared
  // arena keeps 72 MiB of free regions sized for that run's 36 MiB tensors,
  // so a 1024x1024 run of another model (128 MiB, in 64 MiB pieces) hits the
  // cap for real; after a trim it fits.
  MemoryPolicy policy;
  policy.release = ReleaseMode::kNever;
  policy.cpu.arena_settings.max_bytes = 160 * kMiB;
  auto rt = Runtime::Create(policy);
  ASSERT_TRUE(rt.ok());
  std::vector<std::string> paths = MakeVariants(2);
  std::vector<PoolEvent> events;
  std::mutex mu;
  ModelPool pool(**rt, {.cpu_budget_bytes = int64_t{1} << 40}, [&](const PoolEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(e);
  });
  pool.Add({"a", paths[0], {.device = DeviceRequest::Cpu()}, false, std::nullopt});
  pool.Add({"b", paths[1], {.device = DeviceRequest::Cpu()}, false, std::nullopt});
  auto run = [](int64_t side) {
    return [side](const std::shared_ptr<Session>& s) { return s->Run(ImageInput(side, side)).status(); };
  };
  ASSERT_TRUE(pool.RunWithRecovery("a", {}, run(768)).ok());
  int attempts = 0;
  Status st = pool.RunWithRecovery("b", {}, [&](const std::shared_ptr<Session>& s) {
    ++attempts;
    return run(1024)(s);
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(attempts, 2) << "the first attempt ran out of memory for real";
  std::vector<std::string> oom;
  for (const PoolEvent& e : events) {
    if (e.kind == PoolEvent::Kind::kEvict && e.reason == EvictReason::kOutOfMemory) oom.push_back(e.name);
  }
  EXPECT_EQ(oom, (std::vector<std::string>{"a", "b"})) << "the idle model and the broken session went";
  EXPECT_EQ(pool.StatusOf("b")->loads, 2u) << "b was loaded afresh for the retry";
  // Without room even after recovery, the error is reported.
  Status too_big = pool.RunWithRecovery("a", {}, run(2048));
  EXPECT_EQ(too_big.code(), StatusCode::kResourceExhausted) << too_big.ToString();
  for (const auto& p : paths) fs::remove(p);
}

}  // namespace
}  // namespace ebb
