// Release when idle (ReleaseMode::kIdle): the timer alone (src/ort/idle_release.h),
// then the Runtime's idle release on real ONNX Runtime, measured with the
// shared arena's own statistics and the process RSS.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ebb/operation.h"
#include "ebb/runtime.h"
#include "idle_release.h"
#include "test_util.h"

namespace ebb {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testing::ImageInput;
using testing::kMiB;
using testing::ModelPath;

double MsSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Waits up to `limit` for `done`; true when it came.
template <typename F>
bool WaitFor(F done, milliseconds limit = milliseconds(5000)) {
  const auto end = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return true;
}

// --- The timer ------------------------------------------------------------------------------

TEST(IdleTimerTest, FiresOnceAfterTheDebounceAndNotDuringABurst) {
  std::atomic<int> calls{0};
  std::atomic<int64_t> fired_at_ns{0};
  const auto start = Clock::now();
  detail::IdleTimer timer(milliseconds(150), [&] {
    fired_at_ns = (Clock::now() - start).count();
    ++calls;
    return true;
  });
  // A burst: a touch every 10 ms for 600 ms, four times the debounce.
  Clock::time_point last_touch;
  while (MsSince(start) < 600) {
    timer.Touch();
    last_touch = Clock::now();
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(calls.load(), 0) << "the timer fired during the burst";
  ASSERT_TRUE(WaitFor([&] { return calls.load() == 1; }));
  const double after_last_touch_ms =
      std::chrono::duration<double, std::milli>(start + std::chrono::nanoseconds(fired_at_ns.load()) - last_touch)
          .count();
  EXPECT_GE(after_last_touch_ms, 150 - 1) << "fired before the debounce had passed";
  EXPECT_EQ(timer.fired(), 1u);
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_EQ(calls.load(), 1) << "fired again with no touch";
  EXPECT_FALSE(timer.armed());
}

TEST(IdleTimerTest, NeverStartsWithoutATouch) {
  std::atomic<int> calls{0};
  {
    detail::IdleTimer timer(milliseconds(5), [&] { return ++calls, true; });
    std::this_thread::sleep_for(milliseconds(60));
  }
  EXPECT_EQ(calls.load(), 0);
}

TEST(IdleTimerTest, AHoldDelaysTheActionUntilItEnds) {
  std::atomic<int> calls{0};
  detail::IdleTimer timer(milliseconds(20), [&] { return ++calls, true; });
  timer.Hold();
  timer.Touch();
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(calls.load(), 0) << "fired while held";
  timer.Unhold();
  EXPECT_TRUE(WaitFor([&] { return calls.load() == 1; }));
}

TEST(IdleTimerTest, NotNowIsTriedAgainAfterAnotherDebounce) {
  std::atomic<int> calls{0};
  detail::IdleTimer timer(milliseconds(20), [&] { return ++calls >= 3; });
  timer.Touch();
  ASSERT_TRUE(WaitFor([&] { return timer.fired() == 1; }));
  EXPECT_EQ(calls.load(), 3);
  EXPECT_FALSE(timer.armed());
}

TEST(IdleTimerTest, StopEndsTheThreadAndLaterTouchesDoNothing) {
  std::atomic<int> calls{0};
  detail::IdleTimer timer(milliseconds(10), [&] { return ++calls, true; });
  timer.Touch();
  timer.Stop();
  timer.Touch();
  std::this_thread::sleep_for(milliseconds(80));
  EXPECT_LE(calls.load(), 1);  // at most the one due before Stop, if it had already begun
  const int seen = calls.load();
  timer.Touch();
  std::this_thread::sleep_for(milliseconds(40));
  EXPECT_EQ(calls.load(), seen);
}

TEST(IdleTimerTest, ManyThreadsTouchingAtOnce) {
  std::atomic<int> calls{0};
  detail::IdleTimer timer(milliseconds(100), [&] { return ++calls, true; });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) timer.Touch();
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(WaitFor([&] { return calls.load() == 1; }));
  std::this_thread::sleep_for(milliseconds(250));
  EXPECT_EQ(calls.load(), 1);
}

// --- The Runtime's idle release, on the real ONNX Runtime -----------------------------------

constexpr int64_t kSide = 512;  // convnet: a run needs tens of MiB of arena

class IdleReleaseTest : public ::testing::Test {
 protected:
  void Start(int idle_ms) {
    MemoryPolicy policy;
    policy.release = ReleaseMode::kIdle;
    policy.idle_release_ms = idle_ms;
    auto loaded = testing::LoadOnCpu(policy, "convnet");
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    runtime_ = std::move(loaded->runtime);
    session_ = loaded->session;
    floor_ = Reserved();
  }
  int64_t Reserved() const { return runtime_->ReadSharedArena()->reserved; }
  int64_t Shrinks() const { return runtime_->ReadSharedArena()->shrinks; }
  void Run(std::vector<RunRecord>* records = nullptr) {
    RunObserver observer = [records](const RunRecord& r) {
      if (records) records->push_back(r);
    };
    RunFlags flags;
    flags.observer = &observer;
    auto out = session_->Run(ImageInput(kSide, kSide), flags);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
  }

  std::unique_ptr<Runtime> runtime_;
  std::shared_ptr<Session> session_;
  int64_t floor_ = 0;
};

TEST_F(IdleReleaseTest, ABurstKeepsTheArenaAndTheMemoryGoesBackAfterTheDebounce) {
  Start(300);
  std::vector<RunRecord> records;
  const auto start = Clock::now();
  Run(&records);
  const int64_t grown = Reserved();
  ASSERT_GT(grown, floor_ + 8 * kMiB) << "the run did not grow the arena";
  const int64_t shrinks = Shrinks();
  // Back to back: no run releases, the arena stays as grown, nothing is shrunk in between.
  while (MsSince(start) < 250 || records.size() < 5) Run(&records);
  const double burst_ms = MsSince(start);
  for (const RunRecord& r : records) {
    EXPECT_FALSE(r.release_wanted);
    EXPECT_EQ(r.release_spec, "");
  }
  if (burst_ms < 280) {  // the whole burst inside one debounce (not so on a very slow machine)
    EXPECT_EQ(Shrinks(), shrinks) << "a shrink happened during the burst";
    EXPECT_EQ(runtime_->idle_release_count(), 0u);
    EXPECT_GE(Reserved(), grown);
  }
  // On a slow machine (a sanitizer, a loaded CI) a gap between two runs of the burst may outlast the
  // debounce and release there; what holds everywhere is one release a debounce after the last run.
  const uint64_t released_in_burst = runtime_->idle_release_count();
  const auto burst_end = Clock::now();
  ASSERT_TRUE(WaitFor([&] { return runtime_->idle_release_count() >= released_in_burst + 1; }));
  const double after_ms = MsSince(burst_end);
  EXPECT_GE(after_ms, 300 - 5);
  EXPECT_LE(Reserved(), floor_ + kMiB) << "the idle release left the arena above its floor";
  EXPECT_EQ(session_->release_count(), runtime_->idle_release_count());
  std::this_thread::sleep_for(milliseconds(700));
  EXPECT_EQ(runtime_->idle_release_count(), released_in_burst + 1) << "released again with no run";
}

TEST_F(IdleReleaseTest, RssFallsBackToTheFloor) {
  if (!testing::kRssBoundsHold) GTEST_SKIP() << "RSS bounds do not hold under a sanitizer";
  Start(50);
  const int64_t rss_floor = ReadRssBytes();
  for (int i = 0; i < 3; ++i) Run();
  // Waited for both: on a loaded machine a gap between two runs (making the next input) may outlast
  // the 50 ms debounce, so a first release may come before the last run.
  ASSERT_TRUE(WaitFor([&] { return runtime_->idle_release_count() >= 1 && Reserved() <= floor_ + kMiB; }))
      << "reserved " << Reserved() << " floor " << floor_;
  EXPECT_LE(ReadRssBytes(), rss_floor + 16 * kMiB);
}

TEST_F(IdleReleaseTest, AHoldKeepsTheMemoryUntilItEnds) {
  Start(30);
  {
    std::unique_ptr<IdleReleaseHold> hold = runtime_->HoldIdleRelease();
    Run();
    std::this_thread::sleep_for(milliseconds(250));
    EXPECT_EQ(runtime_->idle_release_count(), 0u);
    EXPECT_GT(Reserved(), floor_ + 8 * kMiB);
  }
  ASSERT_TRUE(WaitFor([&] { return runtime_->idle_release_count() == 1; }));
  EXPECT_LE(Reserved(), floor_ + kMiB);
}

TEST_F(IdleReleaseTest, APerRunOverrideReleasesAtOnceAndTheListenerNamesTheModel) {
  Start(30);
  std::vector<std::string> named;
  std::mutex mu;
  runtime_->SetIdleReleaseListener([&](const std::string& model) {
    std::lock_guard<std::mutex> lock(mu);
    named.push_back(model);
  });
  // The server's sequence: runs as kOperationEnd, the last one releases at its end.
  std::vector<RunRecord> records;
  RunObserver observer = [&](const RunRecord& r) { records.push_back(r); };
  RunFlags flags;
  flags.observer = &observer;
  flags.release = ReleaseMode::kOperationEnd;
  flags.ends_operation = false;
  ASSERT_TRUE(session_->Run(ImageInput(kSide, kSide), flags).ok());
  flags.ends_operation = true;
  ASSERT_TRUE(session_->Run(ImageInput(kSide, kSide), flags).ok());
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].release_spec, "");
  EXPECT_EQ(records[1].release_spec, "cpu:0");
  EXPECT_LE(Reserved(), floor_ + kMiB);
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(runtime_->idle_release_count(), 0u) << "an overridden run armed the idle timer";
  Run();
  ASSERT_TRUE(WaitFor([&] { return runtime_->idle_release_count() == 1; }));
  runtime_->SetIdleReleaseListener({});
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(named, std::vector<std::string>{session_->name()});
}

TEST_F(IdleReleaseTest, ConcurrentRunsAndTheTimerGiveCorrectOutputs) {
  Start(1);  // the timer fires between nearly every pair of runs
  auto reference = session_->Run(ImageInput(128, 128, 7));
  ASSERT_TRUE(reference.ok());
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        auto out = session_->Run(ImageInput(128, 128, 7));
        if (!out.ok() || out->at(0).tensor.byte_size() != reference->at(0).tensor.byte_size() ||
            std::memcmp(out->at(0).tensor.data(), reference->at(0).tensor.data(), out->at(0).tensor.byte_size())) {
          ++mismatches;
        }
        if (i % 5 == 0) std::this_thread::sleep_for(milliseconds(3));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  // The count goes up just after the release's shrink, so wait for both.
  EXPECT_TRUE(WaitFor([&] {
    return runtime_->ReadSharedArena()->reserved <= floor_ + kMiB && runtime_->idle_release_count() >= 1;
  })) << "reserved " << runtime_->ReadSharedArena()->reserved << " floor " << floor_ << " releases "
      << runtime_->idle_release_count();
}

TEST(IdleReleasePolicyTest, ASessionWhoseArenaOnlyItsRunsCanShrinkReleasesAtItsOperationsEnd) {
  MemoryPolicy policy;
  policy.release = ReleaseMode::kIdle;
  policy.cpu.arena = CpuArenaMode::kPerSession;  // no trim of its own: ORT shrinks it only in one of its runs
  auto rt = Runtime::Create(policy);
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  auto s = (*rt)->Load(ModelPath("convnet"), {.device = DeviceRequest::Cpu()});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::vector<RunRecord> records;
  RunObserver observer = [&](const RunRecord& r) { records.push_back(r); };
  RunFlags flags;
  flags.observer = &observer;
  ASSERT_TRUE((*s)->Run(ImageInput(kSide, kSide), flags).ok());
  ASSERT_EQ(records.size(), 1u);
  EXPECT_TRUE(records[0].release_wanted);
  EXPECT_EQ(records[0].release_spec, "cpu:0");
  EXPECT_EQ((*rt)->idle_release_count(), 0u);
}

// --- The default policy: single runs release when idle, operations at their end ---------------

class DefaultPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(MemoryPolicy{}.release, ReleaseMode::kIdle);
    auto loaded = testing::LoadOnCpu({}, "convnet");  // the library's defaults, as C, Java and Python get them
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    runtime_ = std::move(loaded->runtime);
    session_ = loaded->session;
    floor_ = Reserved();
  }
  int64_t Reserved() const { return runtime_->ReadSharedArena()->reserved; }

  std::shared_ptr<Runtime> runtime_;
  std::shared_ptr<Session> session_;
  int64_t floor_ = 0;
};

TEST_F(DefaultPolicyTest, ALoopOfSingleRunsKeepsTheArenaAndAPauseGivesItBack) {
  std::vector<RunRecord> records;
  RunObserver observer = [&](const RunRecord& r) { records.push_back(r); };
  RunFlags flags;  // as a plain Session::Run: one run, its own operation
  flags.observer = &observer;
  const std::vector<NamedTensor> input = ImageInput(kSide, kSide);  // made once: nothing but runs in the loop
  ASSERT_TRUE(session_->Run(input, flags).ok());
  const int64_t grown = Reserved();
  ASSERT_GT(grown, floor_ + 8 * kMiB) << "the run did not grow the arena";
  const int64_t shrinks = runtime_->ReadSharedArena()->shrinks;
  // Back to back: no run releases; the gaps between runs are measured so that a gap as long as the
  // debounce (the thread descheduled on a loaded machine) is told apart from a release by a run.
  double longest_gap_ms = 0;
  auto last_end = Clock::now();
  for (int i = 0; i < 5; ++i) {
    longest_gap_ms = std::max(longest_gap_ms, MsSince(last_end));
    ASSERT_TRUE(session_->Run(input, flags).ok());
    last_end = Clock::now();
  }
  ASSERT_EQ(records.size(), 6u);
  for (const RunRecord& r : records) {
    EXPECT_TRUE(r.ends_operation);
    EXPECT_FALSE(r.release_wanted) << "run " << r.sequence << " wanted a release";
    EXPECT_EQ(r.release_spec, "");
    EXPECT_FALSE(r.trimmed);
  }
  if (longest_gap_ms < runtime_->policy().idle_release_ms / 2.0) {
    EXPECT_EQ(runtime_->ReadSharedArena()->shrinks, shrinks) << "the arena was shrunk between runs";
    EXPECT_EQ(runtime_->idle_release_count(), 0u);
    EXPECT_GE(Reserved(), grown) << "the arena was given back between runs";
  }
  // The caller pauses: the memory goes back.
  ASSERT_TRUE(WaitFor([&] { return runtime_->idle_release_count() >= 1 && Reserved() <= floor_ + kMiB; }))
      << "reserved " << Reserved() << " floor " << floor_ << " releases " << runtime_->idle_release_count();
  EXPECT_GE(session_->release_count(), 1u);
}

TEST_F(DefaultPolicyTest, AnExplicitOperationStillReleasesAtItsEnd) {
  std::vector<RunRecord> records;
  RunObserver observer = [&](const RunRecord& r) { records.push_back(r); };
  OperationOptions options;
  options.observer = &observer;
  {
    ScopedOperation op(runtime_, /*planned_runs=*/2, options);
    ASSERT_TRUE(op.Run(*session_, ImageInput(kSide, kSide)).ok());
    EXPECT_GT(Reserved(), floor_ + 8 * kMiB);
    ASSERT_TRUE(op.Run(*session_, ImageInput(kSide, kSide)).ok());
    EXPECT_LE(Reserved(), floor_ + kMiB) << "the planned last run did not release at once";
  }
  ASSERT_EQ(records.size(), 2u);
  EXPECT_FALSE(records[0].release_wanted);
  EXPECT_TRUE(records[1].release_wanted);
  EXPECT_EQ(records[1].release_spec, "cpu:0");
  {
    ScopedOperation op(runtime_, /*planned_runs=*/0, options);  // unplanned: End() releases
    ASSERT_TRUE(op.Run(*session_, ImageInput(kSide, kSide)).ok());
    ASSERT_TRUE(op.End().ok());
    EXPECT_LE(Reserved(), floor_ + kMiB) << "the operation's end did not release at once";
  }
  std::this_thread::sleep_for(milliseconds(4 * runtime_->policy().idle_release_ms));
  EXPECT_EQ(runtime_->idle_release_count(), 0u) << "an operation's runs armed the idle timer";
}

// Single runs (idle) and then an explicit operation whose end gives the arena back: the idle release
// the single runs left pending is done by it, so the timer neither releases again nor counts one.
TEST_F(DefaultPolicyTest, AnOperationsReleaseCoversTheIdleReleasePendingBeforeIt) {
  const std::vector<NamedTensor> input = ImageInput(kSide, kSide);
  auto hold = runtime_->HoldIdleRelease();  // the single runs' release stays pending until the operation
  ASSERT_TRUE(session_->Run(input).ok());
  ASSERT_TRUE(session_->Run(input).ok());
  std::vector<RunRecord> records;
  RunObserver observer = [&](const RunRecord& r) { records.push_back(r); };
  OperationOptions options;
  options.observer = &observer;
  {
    ScopedOperation op(runtime_, /*planned_runs=*/1, options);
    ASSERT_TRUE(op.Run(*session_, input).ok());
  }
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].release_spec, "cpu:0");
  EXPECT_LE(Reserved(), floor_ + kMiB) << "the operation's last run did not release";
  hold.reset();
  std::this_thread::sleep_for(milliseconds(6 * runtime_->policy().idle_release_ms));
  EXPECT_EQ(runtime_->idle_release_count(), 0u) << "an idle release came after the operation's";
  EXPECT_EQ(session_->release_count(), 1u);
  // A single run after it is released when idle again, and counted once.
  ASSERT_TRUE(session_->Run(input).ok());
  ASSERT_TRUE(WaitFor([&] { return runtime_->idle_release_count() == 1 && Reserved() <= floor_ + kMiB; }))
      << "reserved " << Reserved() << " floor " << floor_ << " releases " << runtime_->idle_release_count();
  EXPECT_EQ(session_->release_count(), 2u);
  // Runtime::Trim covers a pending idle release too.
  hold = runtime_->HoldIdleRelease();
  ASSERT_TRUE(session_->Run(input).ok());
  ASSERT_TRUE(runtime_->Trim().ok());
  EXPECT_LE(Reserved(), floor_ + kMiB);
  hold.reset();
  std::this_thread::sleep_for(milliseconds(6 * runtime_->policy().idle_release_ms));
  EXPECT_EQ(runtime_->idle_release_count(), 1u) << "an idle release came after Runtime::Trim";
}

TEST(IdleReleasePolicyTest, ParsesAndChecksTheDebounce) {
  auto p = ParseMemoryPolicy(R"({"release": "idle", "idle_release_ms": 75})");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->release, ReleaseMode::kIdle);
  EXPECT_EQ(p->idle_release_ms, 75);
  EXPECT_NE(MemoryPolicyToJson(*p).find("\"idle_release_ms\": 75"), std::string::npos);
  for (const char* bad : {R"({"idle_release_ms": 0})", R"({"idle_release_ms": -5})", R"({"idle_release_ms": 1.5})",
                          R"({"idle_release_ms": 600001})", R"({"idle_release_ms": "50"})"}) {
    auto r = ParseMemoryPolicy(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("idle_release_ms must be an integer from 1 to 600000"), std::string::npos)
        << r.status().message();
  }
}

}  // namespace
}  // namespace ebb
