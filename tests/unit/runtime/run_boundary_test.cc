// The run boundary on real ONNX Runtime, measured with ORT's own allocator
// statistics and the process RSS.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "ebb/runtime.h"
#include "port.h"
#include "test_util.h"

namespace ebb {
namespace {

using testing::ImageInput;
using testing::kMiB;
using testing::ModelPath;

// 1024x1024 through the generated convnet: each 16-channel activation is
// 64 MiB, so a run needs a few hundred MiB of arena.
constexpr int64_t kSide = 1024;

// The run boundary's release at an operation's end: a single run is a whole operation and releases
// when it ends, under operation_end (the default, idle, releases single runs once they pause:
// idle_release_test).
class RunBoundaryTest : public ::testing::Test {
 protected:
  void Start(MemoryPolicy policy = testing::OperationEndPolicy()) {
    auto loaded = testing::LoadOnCpu(policy, "convnet");
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    runtime_ = std::move(loaded->runtime);
    session_ = loaded->session;
  }

  ArenaStats Shared() const {
    MemoryReading r = runtime_->ReadMemory();
    const std::optional<ArenaStats> a = r.Find("cpu:shared");
    EXPECT_TRUE(a.has_value());
    return a ? *a : ArenaStats{};
  }

  Result<std::vector<NamedTensor>> RunOnce(bool ends_operation, std::vector<RunRecord>* records = nullptr,
                                           int64_t side = kSide, uint32_t seed = 1) {
    RunObserver observer = [records](const RunRecord& r) {
      if (records) records->push_back(r);
    };
    RunFlags flags;
    flags.ends_operation = ends_operation;
    flags.observer = &observer;
    return session_->Run(ImageInput(side, side, seed), flags);
  }

  std::unique_ptr<Runtime> runtime_;
  std::shared_ptr<Session> session_;
};

TEST_F(RunBoundaryTest, SingleRunThatEndsTheOperationReleases) {
  Start();
  const int64_t reserved_after_load = Shared().reserved;
  const int64_t rss_after_load = ReadRssBytes();

  // A run that does not end the operation keeps its memory: that is the peak.
  ASSERT_TRUE(RunOnce(false).ok());
  const ArenaStats held = Shared();
  const int64_t rss_held = ReadRssBytes();
  EXPECT_GT(held.reserved, reserved_after_load + 100 * kMiB);

  // The same single run as a whole operation gives it all back.
  std::vector<RunRecord> records;
  ASSERT_TRUE(RunOnce(true, &records).ok());
  const ArenaStats released = Shared();
  const int64_t rss_released = ReadRssBytes();
  EXPECT_LE(released.reserved, reserved_after_load + kMiB);
  EXPECT_GT(released.shrinks, held.shrinks);
  if (testing::kRssBoundsHold) {
    EXPECT_LT(rss_released, rss_held - 100 * kMiB) << "RSS must fall, not only the arena counter";
    EXPECT_LT(rss_released, rss_after_load + 64 * kMiB);
  } else {
    std::printf("%s\n", testing::kNoRssBounds);
  }
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].release_spec, "cpu:0");
  EXPECT_TRUE(records[0].outputs_preallocated) << "outputs must not pin arena regions";
}

TEST_F(RunBoundaryTest, FirstRunOfANewShapeStillReleasesEverything) {
  // No output shape is known yet, so ORT allocates the outputs; the region
  // they pinned is trimmed once they are copied out.
  Start();
  const int64_t reserved_after_load = Shared().reserved;
  std::vector<RunRecord> records;
  ASSERT_TRUE(RunOnce(true, &records).ok());
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].outputs_preallocated);
  EXPECT_TRUE(records[0].trimmed);
  EXPECT_LE(Shared().reserved, reserved_after_load + kMiB);
}

TEST_F(RunBoundaryTest, MultiRunOperationReleasesOnlyOnItsLastRun) {
  Start();
  ASSERT_TRUE(RunOnce(true).ok());  // learn the output shapes; start from the floor
  const ArenaStats start = Shared();
  std::vector<RunRecord> records;
  std::vector<ArenaStats> after;
  const int kRuns = 4;
  for (int i = 0; i < kRuns; ++i) {
    ASSERT_TRUE(RunOnce(i == kRuns - 1, &records, kSide, i + 2).ok());
    after.push_back(Shared());
  }
  ASSERT_EQ(records.size(), static_cast<size_t>(kRuns));
  for (int i = 0; i < kRuns - 1; ++i) {
    EXPECT_TRUE(records[i].release_spec.empty()) << "run " << i;
    EXPECT_EQ(after[i].shrinks, start.shrinks) << "no shrink before the last run (run " << i << ")";
    EXPECT_GT(after[i].reserved, start.reserved + 100 * kMiB) << "memory stays between runs (run " << i << ")";
  }
  EXPECT_EQ(after[1].reserved, after[0].reserved) << "held memory is reused, not regrown";
  EXPECT_EQ(records.back().release_spec, "cpu:0");
  EXPECT_GT(after.back().shrinks, start.shrinks);
  EXPECT_LE(after.back().reserved, start.reserved + kMiB);
}

// The outputs of a run that ends no operation are written into the buffer the previous output gave
// back, not into fresh pages (a page fault per 4 KiB: plain ORT writes into its warm arena); the
// release at the operation's end frees what is kept, and an output taken before it is not kept.
TEST_F(RunBoundaryTest, MidOperationOutputsReuseTheBufferThePreviousOneGaveBack) {
  Start();
  constexpr int64_t kSmall = 256;  // the output: [1,3,256,256] FP32, 768 KiB
  constexpr size_t kOutputBytes = 3 * kSmall * kSmall * sizeof(float);
  ASSERT_TRUE(RunOnce(true, nullptr, kSmall).ok());  // learns the output shape; ends with a release
  ASSERT_EQ(detail::OutputBuffers::kept_bytes(), 0u);
  const std::byte* previous = nullptr;
  Tensor first;
  {
    auto out = RunOnce(false, nullptr, kSmall);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ((*out)[0].tensor.byte_size(), kOutputBytes);
    previous = (*out)[0].tensor.data();
    first = (*out)[0].tensor.Clone();
  }
  EXPECT_EQ(detail::OutputBuffers::kept_bytes(), kOutputBytes) << "the freed output is kept for the next run";
  const std::vector<NamedTensor> input = ImageInput(kSmall, kSmall, 1);  // made before: its pages are not the run's
  RunFlags mid_operation;
  mid_operation.ends_operation = false;
  const int64_t faults_before = port::MinorPageFaults();
  auto again = session_->Run(input, mid_operation);
  const int64_t faults = port::MinorPageFaults() - faults_before;
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)[0].tensor.data(), previous) << "written into the buffer given back";
  EXPECT_TRUE((*again)[0].tensor.BitwiseEquals(first));
  EXPECT_EQ(detail::OutputBuffers::kept_bytes(), 0u);
  EXPECT_LT(faults, static_cast<int64_t>(kOutputBytes / 4096 / 2))
      << "a run into a warm buffer faults in far fewer pages than its output has";
  again->clear();  // gives the buffer back
  EXPECT_EQ(detail::OutputBuffers::kept_bytes(), kOutputBytes);

  auto held = RunOnce(false, nullptr, kSmall);  // still held by the caller when the operation ends
  ASSERT_TRUE(held.ok());
  auto last = RunOnce(true, nullptr, kSmall);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(detail::OutputBuffers::kept_bytes(), 0u) << "the release frees what was kept";
  held->clear();
  last->clear();
  EXPECT_EQ(detail::OutputBuffers::kept_bytes(), 0u) << "outputs taken before the release are freed, not kept";

  // An operation ended by Runtime::Trim (a failed or cancelled one, a Python block left by an
  // exception) gives the kept buffers back too.
  ASSERT_TRUE(RunOnce(false, nullptr, kSmall).ok());  // its output freed at once: kept
  EXPECT_EQ(detail::OutputBuffers::kept_bytes(), kOutputBytes);
  ASSERT_TRUE(runtime_->Trim().ok());
  EXPECT_EQ(detail::OutputBuffers::kept_bytes(), 0u) << "Runtime::Trim frees what was kept";
}

// Tensor::Reusable takes the buffer a tensor of its size gave back; a ReusableBufferScope frees what
// is kept when it ends (work that reached no run, so no release), unless Keep() left it to the run.
TEST(ReusableBufferTest, AScopeFreesWhatItsWorkLeftUnlessItWasKept) {
  detail::OutputBuffers::Drop();
  const Shape shape{1, 65536};  // 256 KiB of float: kept (128 KiB and more)
  constexpr size_t kBytes = 65536 * sizeof(float);
  {
    ReusableBufferScope scope;
    Tensor t = Tensor::Reusable(DataType::kFloat32, shape);
    EXPECT_EQ(t.byte_size(), kBytes);
  }  // given back, then freed by the scope
  EXPECT_EQ(detail::OutputBuffers::kept_bytes(), 0u);
  const std::byte* kept = nullptr;
  {
    ReusableBufferScope scope;
    {
      Tensor t = Tensor::Reusable(DataType::kFloat32, shape);
      kept = t.data();
    }
    EXPECT_EQ(detail::OutputBuffers::kept_bytes(), kBytes) << "given back: kept for the next taker";
    Tensor again = Tensor::Reusable(DataType::kFloat32, shape);
    EXPECT_EQ(again.data(), kept) << "the buffer given back, warm";
    EXPECT_EQ(detail::OutputBuffers::kept_bytes(), 0u);
    scope.Keep();
  }
  EXPECT_EQ(detail::OutputBuffers::kept_bytes(), kBytes) << "kept: left to the run that took it over";
  Tensor late;
  {
    ReusableBufferScope scope;
    late = Tensor::Reusable(DataType::kFloat32, shape);
  }
  late = Tensor();
  EXPECT_EQ(detail::OutputBuffers::kept_bytes(), 0u) << "held past its scope's end: freed, not kept";
}

TEST_F(RunBoundaryTest, SessionWithoutShrinkableArenaRunsPlainly) {
  MemoryPolicy policy = testing::OperationEndPolicy();
  policy.cpu.arena = CpuArenaMode::kNone;
  Start(policy);
  EXPECT_TRUE(session_->release_targets().empty());
  std::vector<RunRecord> records;
  auto out = RunOnce(true, &records, 256);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_TRUE(records[0].release_wanted);
  EXPECT_EQ(records[0].release_spec, "") << "no shrink configuration may be submitted";
  EXPECT_FALSE(records[0].trimmed);
  EXPECT_EQ(session_->release_count(), 0u);
}

TEST_F(RunBoundaryTest, PerSessionArenaReleasesItsOwnArenaOnly) {
  MemoryPolicy policy = testing::OperationEndPolicy();
  policy.cpu.arena = CpuArenaMode::kPerSession;
  Start(policy);
  ASSERT_EQ(session_->release_targets(), std::vector<std::string>{"cpu:0"});
  std::vector<RunRecord> records;
  ASSERT_TRUE(RunOnce(false, &records, 512).ok());
  ASSERT_TRUE(RunOnce(true, &records, 512).ok());
  EXPECT_EQ(records[1].release_spec, "cpu:0");
  std::vector<ArenaStats> own = session_->ReadOwnArenas();
  ASSERT_EQ(own.size(), 1u);
  EXPECT_GT(own[0].shrinks, 0);
}

TEST_F(RunBoundaryTest, OutputsAreBitwiseIdenticalWithAndWithoutRelease) {
  Start();
  auto held = RunOnce(false, nullptr, 512, 7);
  auto released = RunOnce(true, nullptr, 512, 7);
  auto after_release = RunOnce(true, nullptr, 512, 7);
  ASSERT_TRUE(held.ok() && released.ok() && after_release.ok());
  EXPECT_TRUE((*held)[0].tensor.BitwiseEquals((*released)[0].tensor));
  EXPECT_TRUE((*held)[0].tensor.BitwiseEquals((*after_release)[0].tensor));

  runtime_.reset();
  session_.reset();
  MemoryPolicy never;
  never.release = ReleaseMode::kNever;
  Start(never);
  auto plain = RunOnce(true, nullptr, 512, 7);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE((*held)[0].tensor.BitwiseEquals((*plain)[0].tensor));
}

// A run passes ORT wrappers of its tensors that earlier runs made when they passed the same memory
// (detail::TensorWrappers): each run must still read the values in that memory now and write its
// outputs where they go now. One input buffer rewritten between mid-operation runs (so that its
// outputs go into the buffer the run before gave back, under a kept wrapper too) gives each
// run the outputs a fresh tensor with those values gets.
TEST_F(RunBoundaryTest, RunsThroughKeptWrappersReadTheirInputsAndWriteTheirOutputsAnew) {
  Start();
  constexpr int64_t kSmall = 64;
  RunFlags mid_operation;
  mid_operation.ends_operation = false;
  std::vector<NamedTensor> reused = ImageInput(kSmall, kSmall, 1);
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    const std::vector<NamedTensor> fresh = ImageInput(kSmall, kSmall, seed);
    std::memcpy(reused[0].tensor.data(), fresh[0].tensor.data(), fresh[0].tensor.byte_size());
    auto through_kept = session_->Run(reused, mid_operation);
    auto through_new = session_->Run(fresh, mid_operation);
    ASSERT_TRUE(through_kept.ok() && through_new.ok());
    EXPECT_TRUE((*through_kept)[0].tensor.BitwiseEquals((*through_new)[0].tensor)) << "seed " << seed;
    if (seed > 1) {
      const std::vector<NamedTensor> first = ImageInput(kSmall, kSmall, 1);
      auto of_first = session_->Run(first, mid_operation);
      ASSERT_TRUE(of_first.ok());
      EXPECT_FALSE((*through_kept)[0].tensor.BitwiseEquals((*of_first)[0].tensor)) << "seed " << seed
          << ": the run read the buffer's first values, not its present ones";
    }
  }
  ASSERT_TRUE(RunOnce(true, nullptr, kSmall).ok());  // the operation ends
}

TEST_F(RunBoundaryTest, CachedSessionSurvivesRelease) {
  Start();
  ASSERT_TRUE(RunOnce(true).ok());
  EXPECT_EQ(runtime_->load_count(), 1u);
  auto again = runtime_->Load(ModelPath("convnet"), {.device = DeviceRequest::Cpu()});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), session_.get());
  EXPECT_EQ(runtime_->load_count(), 1u);
  ASSERT_TRUE((*again)->Run(ImageInput(64, 64)).ok());
}

TEST_F(RunBoundaryTest, TrimGivesIdleMemoryBackAtAnyMoment) {
  Start();
  const int64_t floor = Shared().reserved;
  ASSERT_TRUE(RunOnce(false).ok());  // e.g. an operation cancelled after this run
  ASSERT_GT(Shared().reserved, floor + 100 * kMiB);
  ASSERT_TRUE(runtime_->Trim().ok());
  EXPECT_LE(Shared().reserved, floor + kMiB);
}

TEST_F(RunBoundaryTest, ConcurrentRunsWithMixedFlagsAreAllCorrect) {
  Start();
  constexpr int kThreads = 4, kRunsEach = 6;
  std::vector<std::vector<NamedTensor>> expected;
  for (int t = 0; t < kThreads; ++t) {
    auto out = RunOnce(true, nullptr, 128, 100 + t);
    ASSERT_TRUE(out.ok());
    expected.push_back(std::move(out).value());
  }
  std::atomic<int> failures{0}, mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRunsEach; ++i) {
        RunFlags flags;
        flags.ends_operation = (i + t) % 2 == 0;
        auto out = session_->Run(ImageInput(128, 128, 100 + t), flags);
        if (!out.ok()) {
          ++failures;
        } else if (!(*out)[0].tensor.BitwiseEquals(expected[t][0].tensor)) {
          ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(session_->in_flight(), 0);
}

TEST_F(RunBoundaryTest, EndingRunDefersToARunInFlightAndTheLastOneReleases) {
  Start();
  ASSERT_TRUE(RunOnce(true, nullptr, 2048).ok());  // learn shapes
  ASSERT_TRUE(RunOnce(true, nullptr, 64).ok());
  const int64_t floor = Shared().reserved;
  std::vector<RunRecord> long_records;
  std::thread long_run([&] { ASSERT_TRUE(RunOnce(false, &long_records, 2048).ok()); });
  while (session_->in_flight() == 0) std::this_thread::yield();
  std::vector<RunRecord> short_records;
  ASSERT_TRUE(RunOnce(true, &short_records, 64).ok());
  long_run.join();
  ASSERT_EQ(short_records.size(), 1u);
  EXPECT_TRUE(short_records[0].release_deferred);
  EXPECT_EQ(short_records[0].release_spec, "") << "no shrink under a run in flight";
  ASSERT_EQ(long_records.size(), 1u);
  EXPECT_TRUE(long_records[0].trimmed || short_records[0].trimmed) << "the last one out releases";
  EXPECT_LE(Shared().reserved, floor + kMiB);
}

// Issue 34: a shared arena capped below what concurrent runs need together (8 runs of ~10 MiB under a
// 24 MiB cap), though each fits alone. Runs that ran out of memory beside the others wait for them
// and run again alone: none fails, and the session stays cached (it used to fail and be dropped).
// A run that cannot fit even alone still fails, and is dropped.
TEST_F(RunBoundaryTest, UnderACapTooSmallForConcurrentRunsTheyWaitInsteadOfFailing) {
  MemoryPolicy policy = testing::OperationEndPolicy();
  policy.cpu.arena_settings.max_bytes = 24 * kMiB;
  Start(policy);
  std::atomic<int> failed{0}, waited{0};
  std::string first_failure;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      RunObserver observer = [&](const RunRecord& r) {
        if (r.waited_alone) ++waited;
      };
      RunFlags flags;
      flags.observer = &observer;
      for (int i = 0; i < 4; ++i) {
        auto out = session_->Run(ImageInput(192, 192, 10 * t + i), flags);
        if (!out.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (failed++ == 0) first_failure = out.status().ToString();
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failed.load(), 0) << first_failure;
  EXPECT_GT(waited.load(), 0) << "no run ran out of memory beside the others: the cap does not bind";
  EXPECT_EQ(runtime_->cached_sessions(), 1u) << "a run that fit alone dropped its session";
  EXPECT_LE(Shared().reserved, 24 * kMiB);
  // Alone and still too big: kResourceExhausted, and the session leaves the cache.
  auto huge = session_->Run(ImageInput(512, 512));
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted) << huge.status().ToString();
  EXPECT_EQ(runtime_->cached_sessions(), 0u);
}

TEST_F(RunBoundaryTest, RealOcrDetectorReleasesToo) {
  Start();
  auto s = runtime_->Load(ModelPath("ppocr_det"), {.device = DeviceRequest::Cpu()});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const int64_t floor = Shared().reserved;
  RunFlags hold;
  hold.ends_operation = false;
  auto held = (*s)->Run(ImageInput(640, 640), hold);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_EQ((*held)[0].tensor.shape(), (Shape{1, 1, 640, 640}));
  EXPECT_GT(Shared().reserved, floor + 50 * kMiB);
  auto released = (*s)->Run(ImageInput(640, 640));
  ASSERT_TRUE(released.ok());
  EXPECT_TRUE((*held)[0].tensor.BitwiseEquals((*released)[0].tensor));
  EXPECT_LE(Shared().reserved, floor + kMiB);
}

// A model that declares a wrong static output shape (y f32[1,8] for a run that makes [1,4]): plain
// ORT runs it, and so must ebb — it writes outputs into buffers of the declared shape only while
// that works, then lets ORT allocate them, from that run on.
Tensor Int64s(const std::vector<int64_t>& values) {
  Tensor t(DataType::kInt64, {static_cast<int64_t>(values.size())});
  std::memcpy(t.data(), values.data(), values.size() * sizeof(int64_t));
  return t;
}

TEST(DeclaredOutputShapeTest, AWrongStaticOutputShapeFallsBackToOrtsOutputs) {
  auto rt = Runtime::Create();
  ASSERT_TRUE(rt.ok());
  auto session = (*rt)->Load(testing::TestModelPath("wrong_shape"));
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ASSERT_EQ((*session)->outputs()[0].shape, (Shape{1, 8})) << "the declared shape";
  const std::vector<float> x = {1, 2, 3, 4};
  for (int run = 0; run < 3; ++run) {
    RunFlags flags;
    flags.ends_operation = run == 2;
    std::vector<NamedTensor> in;
    in.push_back({"x", Tensor::FromFloats({1, 4}, x)});
    in.push_back({"s", Int64s({1, 4})});
    auto out = (*session)->Run(in, flags);
    ASSERT_TRUE(out.ok()) << "run " << run << ": " << out.status().ToString();
    ASSERT_EQ((*out)[0].tensor.shape(), (Shape{1, 4}));
    const float* y = reinterpret_cast<const float*>((*out)[0].tensor.data());
    EXPECT_EQ(std::vector<float>(y, y + 4), x);
  }
  // A real error is still an error, with ORT's message.
  std::vector<NamedTensor> wrong;
  wrong.push_back({"x", Tensor::FromFloats({1, 4}, x)});
  wrong.push_back({"s", Int64s({1, 5})});
  Status refused = (*session)->Run(wrong).status();
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("Reshape"), std::string::npos) << refused.ToString();
}

}  // namespace
}  // namespace ebb
