// Operations on real ONNX Runtime: every kind releases exactly once, after
// its final run, and holds its memory in between (ORT's own statistics).
#include <gtest/gtest.h>

#include <cmath>

#include "ebb/operation.h"
#include "ebb/tiler.h"
#include "test_util.h"

namespace ebb {
namespace {

using testing::kMiB;
using testing::ModelPath;
using testing::RandomTensor;

// What an operation did, run by run.
struct Trace {
  std::vector<RunRecord> runs;
  std::vector<int64_t> reserved_after_run;  // shared arena, read after every run
};

class OperationTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }

  void Start(const MemoryPolicy& policy) {
    session_.reset();
    runtime_.reset();
    auto rt = Runtime::Create(policy);
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    runtime_ = std::move(rt).value();
    session_ = Load("convnet");
  }

  std::shared_ptr<Session> Load(const std::string& name) {
    auto s = runtime_->Load(ModelPath(name), {.device = DeviceRequest::Cpu()});
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : nullptr;
  }

  int64_t Reserved() {
    const std::optional<ArenaStats> a = runtime_->ReadMemory().Find("cpu:shared");
    return a ? a->reserved : -1;
  }

  // Options that record every run and the arena after it.
  OperationOptions Traced(Trace* trace) {
    observer_ = [trace](const RunRecord& r) { trace->runs.push_back(r); };
    OperationOptions options;
    options.observer = &observer_;
    options.on_progress = [this, trace](const Progress&) { trace->reserved_after_run.push_back(Reserved()); };
    return options;
  }

  // Only the final run ended the operation and asked for release; memory was
  // held between runs and given back at the end.
  void ExpectReleasedOnlyAtTheEnd(const Trace& trace, size_t runs, int64_t floor, int64_t held = 4 * kMiB) {
    ASSERT_EQ(trace.runs.size(), runs);
    ASSERT_EQ(trace.reserved_after_run.size(), runs);
    for (size_t i = 0; i + 1 < runs; ++i) {
      EXPECT_FALSE(trace.runs[i].ends_operation) << "run " << i;
      EXPECT_EQ(trace.runs[i].release_spec, "") << "run " << i;
      EXPECT_GT(trace.reserved_after_run[i], floor + held) << "memory held after run " << i;
    }
    EXPECT_TRUE(trace.runs.back().ends_operation);
    EXPECT_EQ(trace.runs.back().release_spec, "cpu:0");
    EXPECT_LE(trace.reserved_after_run.back(), floor + kMiB);
    EXPECT_LE(Reserved(), floor + kMiB);
  }

  std::vector<Tensor> Frames(int n, int64_t h, int64_t w) {
    std::vector<Tensor> frames;
    for (int i = 0; i < n; ++i) frames.push_back(RandomTensor({1, 3, h, w}, 10 + i));
    return frames;
  }

  std::shared_ptr<Runtime> runtime_;
  std::shared_ptr<Session> session_;
  RunObserver observer_;
};

TEST_F(OperationTest, PerFrameReleasesOnlyAfterTheLastFrame) {
  const int64_t floor = Reserved();
  Trace trace;
  auto out = RunPerFrame(*runtime_, session_, Frames(4, 256, 256), Traced(&trace));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->size(), 4u);
  ExpectReleasedOnlyAtTheEnd(trace, 4, floor);
}

TEST_F(OperationTest, ImageSequenceOfDifferentSizesReleasesOnce) {
  const int64_t floor = Reserved();
  std::vector<Tensor> images;
  images.push_back(RandomTensor({1, 3, 300, 200}, 1));
  images.push_back(RandomTensor({1, 3, 128, 256}, 2));
  images.push_back(RandomTensor({1, 3, 256, 256}, 3));
  Trace trace;
  auto out = RunPerFrame(*runtime_, session_, images, Traced(&trace));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 3, 300, 200}));
  ExpectReleasedOnlyAtTheEnd(trace, 3, floor);
}

TEST_F(OperationTest, JointRunIsOneRunThatReleasesAndMatchesPerFrame) {
  const int64_t floor = Reserved();
  Trace trace;
  auto joint = RunJoint(*runtime_, session_, Frames(3, 128, 128), Traced(&trace));
  ASSERT_TRUE(joint.ok()) << joint.status().ToString();
  ExpectReleasedOnlyAtTheEnd(trace, 1, floor);
  auto per_frame = RunPerFrame(*runtime_, session_, Frames(3, 128, 128));
  ASSERT_TRUE(per_frame.ok());
  ASSERT_EQ(joint->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    auto a = (*joint)[i].values<float>(), b = (*per_frame)[i].values<float>();
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) ASSERT_NEAR(a[k], b[k], 1e-4) << "frame " << i << " element " << k;
  }
}

TEST_F(OperationTest, TilesOverSeveralFramesReleaseAfterTheLastTileOfTheLastFrame) {
  const int64_t floor = Reserved();
  Trace trace;
  TileOptions tiles{.tile = 64, .overlap = 8, .scale = 1};
  auto out = RunTiled(*runtime_, session_, Frames(2, 100, 130), tiles, Traced(&trace));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // 100 rows -> cores of 48: 3 rows of tiles; 130 columns: 3 columns; 2 frames.
  // A 64x64 tile needs about 512 KiB of arena (16 channels x 64 x 64 x 4 bytes, twice).
  ExpectReleasedOnlyAtTheEnd(trace, 18, floor, 256 * 1024);
  EXPECT_EQ((*out)[1].shape(), (Shape{1, 3, 100, 130}));
}

TEST_F(OperationTest, PipelineFeedsEachStageAndReleasesOnlyAtTheVeryEnd) {
  auto second = Load("waifu2x_scale2x");
  ASSERT_TRUE(second);
  const int64_t floor = Reserved();
  Trace trace;
  auto out = RunPipeline(*runtime_, {session_, second}, Frames(2, 48, 40), Traced(&trace));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectReleasedOnlyAtTheEnd(trace, 4, floor, 128 * 1024);
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 3, 96, 80}));
  // Same result as running the stages by hand.
  auto stage1 = session_->Run(testing::One("x", Frames(2, 48, 40)[1].Clone()));
  ASSERT_TRUE(stage1.ok());
  auto stage2 = second->Run(testing::One("x", std::move((*stage1)[0].tensor)));
  ASSERT_TRUE(stage2.ok());
  EXPECT_TRUE((*stage2)[0].tensor.BitwiseEquals((*out)[1]));
}

TEST_F(OperationTest, CancellationStopsBetweenRunsAndGivesMemoryBackAtOnce) {
  const int64_t floor = Reserved();
  std::stop_source stop;
  Trace trace;
  OperationOptions options = Traced(&trace);
  auto record = options.on_progress;
  options.on_progress = [&](const Progress& p) {
    record(p);
    if (p.done == 2) stop.request_stop();
  };
  options.stop = stop.get_token();
  auto out = RunPerFrame(*runtime_, session_, Frames(5, 256, 256), options);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kCancelled);
  EXPECT_NE(out.status().message().find("after 2 of 5 runs"), std::string::npos) << out.status().message();
  ASSERT_EQ(trace.runs.size(), 2u);
  EXPECT_GT(trace.reserved_after_run[1], floor + 4 * kMiB);
  EXPECT_LE(Reserved(), floor + kMiB) << "a cancelled operation's memory goes back right away";
  EXPECT_EQ(runtime_->load_count(), 1u);
}

TEST_F(OperationTest, FailureInTheMiddleReportsGivesMemoryBackAndKeepsTheSession) {
  const int64_t floor = Reserved();
  std::vector<Tensor> frames = Frames(2, 256, 256);
  frames.push_back(RandomTensor({1, 4, 256, 256}, 3));  // wrong channel count
  frames.push_back(RandomTensor({1, 3, 256, 256}, 4));
  Trace trace;
  auto out = RunPerFrame(*runtime_, session_, frames, Traced(&trace));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_LE(Reserved(), floor + kMiB);
  auto again = runtime_->Load(ModelPath("convnet"), {.device = DeviceRequest::Cpu()});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), session_.get()) << "other errors keep the session";
}

TEST_F(OperationTest, OutOfMemoryInTheMiddleDropsTheSession) {
  MemoryPolicy policy;
  policy.cpu.arena_settings.max_bytes = 96 * kMiB;
  Start(policy);
  std::vector<Tensor> frames = Frames(1, 128, 128);
  frames.push_back(RandomTensor({1, 3, 1024, 1024}, 2));  // needs far more than 96 MiB
  auto out = RunPerFrame(*runtime_, session_, frames);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted) << out.status().ToString();
  EXPECT_LE(Reserved(), kMiB);
  auto again = runtime_->Load(ModelPath("convnet"), {.device = DeviceRequest::Cpu()});
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->get(), session_.get()) << "the exhausted session was dropped and is loaded afresh";
  EXPECT_TRUE(RunPerFrame(*runtime_, *again, Frames(1, 128, 128)).ok());
}

// --- ScopedOperation: the operation a caller drives run by run ------------------

TEST_F(OperationTest, ScopedOperationReleasesOnItsPlannedLastRunOrAtItsEnd) {
  const int64_t floor = Reserved();
  for (const int planned : {3, 0}) {
    SCOPED_TRACE("planned " + std::to_string(planned));
    Trace trace;
    ScopedOperation op(runtime_, planned, Traced(&trace));
    std::vector<Tensor> frames = Frames(3, 256, 256);
    for (Tensor& frame : frames) {
      auto out = op.Run(*session_, testing::One("x", std::move(frame)));
      ASSERT_TRUE(out.ok()) << out.status().ToString();
    }
    EXPECT_EQ(op.runs_done(), 3);
    if (planned > 0) {
      ExpectReleasedOnlyAtTheEnd(trace, 3, floor);
      EXPECT_TRUE(op.released());
      auto more = op.Run(*session_, testing::One("x", RandomTensor({1, 3, 64, 64}, 1)));
      EXPECT_EQ(more.status().code(), StatusCode::kFailedPrecondition);
      EXPECT_EQ(more.status().message(), "this operation planned 3 runs and all of them are done");
    } else {
      for (const RunRecord& r : trace.runs) EXPECT_FALSE(r.ends_operation);
      EXPECT_GT(Reserved(), floor + 4 * kMiB) << "kept until the end";
      EXPECT_FALSE(op.released());
    }
    EXPECT_FALSE(op.ended());
    ASSERT_TRUE(op.End().ok());
    EXPECT_TRUE(op.ended() && op.released());
    EXPECT_LE(Reserved(), floor + kMiB);
    EXPECT_TRUE(op.End().ok()) << "a second End does nothing";
    auto after = op.Run(*session_, testing::One("x", RandomTensor({1, 3, 64, 64}, 1)));
    EXPECT_EQ(after.status().message(), "this operation has ended");
  }
}

TEST_F(OperationTest, ScopedOperationEndsEarlyOnCancellationFailureOrAbandonAndGivesMemoryBackAtOnce) {
  const int64_t floor = Reserved();
  auto run = [&](ScopedOperation& op, int channels = 3) {
    return op.Run(*session_, testing::One("x", RandomTensor({1, channels, 256, 256}, 1)));
  };
  {
    std::stop_source stop;
    OperationOptions options;
    options.stop = stop.get_token();
    options.on_progress = [&](const Progress& p) {
      EXPECT_EQ(p.total, 0);
      if (p.done == 2) stop.request_stop();
    };
    ScopedOperation op(runtime_, 0, options);
    ASSERT_TRUE(run(op).ok());
    ASSERT_TRUE(run(op).ok());
    EXPECT_GT(Reserved(), floor + 4 * kMiB);
    auto cancelled = run(op);
    EXPECT_EQ(cancelled.status().code(), StatusCode::kCancelled);
    EXPECT_EQ(cancelled.status().message(), "operation cancelled after 2 runs");
    EXPECT_TRUE(op.ended() && op.released());
    EXPECT_LE(Reserved(), floor + kMiB) << "a cancelled operation's memory goes back right away";
    EXPECT_EQ(run(op).status().message(), "this operation already ended: cancelled: operation cancelled after 2 runs");
    EXPECT_TRUE(op.End().ok());
  }
  {
    ScopedOperation op(runtime_, 4);
    ASSERT_TRUE(run(op).ok());
    auto failed = run(op, /*channels=*/4);
    ASSERT_EQ(failed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(op.ended() && op.released());
    EXPECT_LE(Reserved(), floor + kMiB) << "a failed run's operation gives its memory back at once";
    auto later = run(op);
    EXPECT_EQ(later.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(later.status().message(), "this operation already ended: " + failed.status().ToString());
  }
  {
    ScopedOperation op(runtime_, 0);
    ASSERT_TRUE(run(op).ok());
    EXPECT_GT(Reserved(), floor + 4 * kMiB);
    op.Abandon();
    EXPECT_TRUE(op.ended() && op.released());
    EXPECT_LE(Reserved(), floor + kMiB);
    EXPECT_EQ(run(op).status().code(), StatusCode::kFailedPrecondition);
    op.Abandon();  // nothing once ended
  }
  {
    ScopedOperation op(runtime_, 0);
    ASSERT_TRUE(run(op).ok());
  }  // destroyed while open: ended, the memory back
  EXPECT_LE(Reserved(), floor + kMiB);
}

// --- Tiling ---------------------------------------------------------------------

TEST(TilePlanTest, CoresCoverEveryPixelExactlyOnceAndWindowsStayInside) {
  for (auto [h, w] : {std::pair<int64_t, int64_t>{100, 130}, {64, 64}, {20, 25}, {49, 200}, {1, 1}}) {
    TileOptions options{.tile = 64, .overlap = 8};
    auto plan = PlanTiles(h, w, options);
    ASSERT_TRUE(plan.ok());
    std::vector<int> covered(static_cast<size_t>(h * w), 0);
    for (const TileRect& r : *plan) {
      if (h >= 64) {
        EXPECT_LE(r.window_y + 64, h);
      }
      if (w >= 64) {
        EXPECT_LE(r.window_x + 64, w);
      }
      EXPECT_GE(r.core_y, r.window_y);
      EXPECT_LE(r.core_y + r.core_h, r.window_y + 64);
      for (int64_t y = r.core_y; y < r.core_y + r.core_h; ++y) {
        for (int64_t x = r.core_x; x < r.core_x + r.core_w; ++x) ++covered[static_cast<size_t>(y * w + x)];
      }
    }
    for (int c : covered) ASSERT_EQ(c, 1) << h << "x" << w;
  }
  EXPECT_FALSE(PlanTiles(10, 10, {.tile = 16, .overlap = 8}).ok());
}

TEST(TileExtractTest, RepeatsEdgePixelsPastTheBorder) {
  Tensor image(DataType::kFloat32, {1, 1, 2, 3});
  for (size_t i = 0; i < 6; ++i) image.values<float>()[i] = static_cast<float>(i);
  Tensor tile = ExtractTile(image, 0, {0, 0, 0, 0, 2, 3}, 4);
  const std::vector<float> expected = {0, 1, 2, 2, 3, 4, 5, 5, 3, 4, 5, 5, 3, 4, 5, 5};
  auto got = tile.values<float>();
  EXPECT_EQ(std::vector<float>(got.begin(), got.end()), expected);
}

// --- Sizes (issue 32, finding 2: the root of finding 1) -----------------------------------------

TEST(CheckedByteSizeTest, RefusesEveryCountOrByteSizeThatOverflowsAndNothingElse) {
  const int64_t big = int64_t{1} << 62;
  EXPECT_EQ(*CheckedByteSize(DataType::kFloat32, {1, 3, 8, 8}), 768);
  EXPECT_EQ(*CheckedByteSize(DataType::kFloat32, {}), 4);
  EXPECT_EQ(*CheckedByteSize(DataType::kBytes, {5}), 20) << "BYTES: at least the 4-byte lengths";
  EXPECT_EQ(*CheckedByteSize(DataType::kFloat32, {int64_t{1} << 40, 0, int64_t{1} << 20}), 0) << "a zero dim: empty";
  EXPECT_EQ(*CheckedByteSize(DataType::kUInt8, {big}), big);
  // The non-zero dims' product is checked beside a zero dim too (no stride over them can wrap).
  for (const Shape& shape : {Shape{big}, Shape{big + 1, 4}, Shape{1, 3, int64_t{1} << 31, int64_t{1} << 31},
                             Shape{INT64_MAX, INT64_MAX, 0}, Shape{big, 0, big}}) {
    Result<int64_t> bytes = CheckedByteSize(DataType::kFloat32, shape);
    ASSERT_FALSE(bytes.ok()) << ShapeToString(shape) << " gave " << *bytes;
    EXPECT_EQ(bytes.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(bytes.status().message().find("overflows"), std::string::npos) << bytes.status().message();
  }
  EXPECT_EQ(CheckedByteSize(DataType::kFloat32, {2, -3}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ElementCount({big, big}), INT64_MAX) << "saturates, never wraps";
  EXPECT_EQ(ElementCount({big, big, 0}), 0);
  // The constructors never make a wrapped, too small buffer.
  EXPECT_THROW(Tensor(DataType::kFloat32, {1, 3, int64_t{1} << 31, int64_t{1} << 31}), std::bad_alloc);
  EXPECT_EQ(Tensor::Allocate(DataType::kFloat32, {big + 1, 4}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Tensor::Allocate(DataType::kFloat32, {2, 2}).ok());
}

class TiledUpscaleTest : public OperationTest {};

// Issue 32, findings 1 and 4: a tile of 2^31 over an 8x8 frame made a [1,C,2^31,2^31] tile whose byte
// size wrapped to 0 (a heap overflow in ExtractTile); 65536 threw std::bad_alloc; 30000 over a 16x16
// image built a 10.8 GB tile of repeated edge pixels. A tile is clamped to the frame: one run of the
// frame's own size, whose result is the untiled one.
TEST_F(TiledUpscaleTest, ATileLargerThanTheFrameIsClampedToIt) {
  std::vector<Tensor> frame;
  frame.push_back(RandomTensor({1, 3, 8, 8}, 3));
  auto untiled = RunPerFrame(*runtime_, session_, frame);
  ASSERT_TRUE(untiled.ok()) << untiled.status().ToString();
  for (int64_t tile : {int64_t{1} << 31, int64_t{65536}, int64_t{30000}, int64_t{1} << 62}) {
    Trace trace;
    auto tiled = RunTiled(*runtime_, session_, frame, {.tile = tile, .overlap = 2, .scale = 1}, Traced(&trace));
    ASSERT_TRUE(tiled.ok()) << tile << ": " << tiled.status().ToString();
    ASSERT_EQ(trace.runs.size(), 1u) << tile;
    ASSERT_EQ((*tiled)[0].shape(), (*untiled)[0].shape());
    auto a = (*tiled)[0].values<float>(), b = (*untiled)[0].values<float>();
    for (size_t k = 0; k < a.size(); ++k) ASSERT_NEAR(a[k], b[k], 1e-5) << tile << ", element " << k;
  }
  // The upscaler on a 16x16 image with 30000-pixel tiles, as the server's load API allowed.
  auto upscaler = Load("waifu2x_scale2x");
  ASSERT_TRUE(upscaler);
  std::vector<Tensor> image;
  image.push_back(RandomTensor({1, 3, 16, 16}, 4));
  auto plain = RunPerFrame(*runtime_, upscaler, image);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  auto tiled = RunTiled(*runtime_, upscaler, image, {.tile = 30000, .overlap = 0});
  ASSERT_TRUE(tiled.ok()) << tiled.status().ToString();
  auto a = (*tiled)[0].values<float>(), b = (*plain)[0].values<float>();
  ASSERT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t k = 0; k < a.size(); ++k) worst = std::max(worst, std::abs(a[k] - b[k]));
  EXPECT_LT(worst, 1e-4);
  // A tile (or overlap) whose size overflows is refused, not run.
  for (const TileOptions& bad : {TileOptions{.tile = INT64_MAX, .overlap = INT64_MAX},
                                 TileOptions{.tile = -5, .overlap = 0}, TileOptions{.tile = 64, .overlap = -1}}) {
    EXPECT_EQ(RunTiled(*runtime_, session_, frame, bad).status().code(), StatusCode::kInvalidArgument);
  }
}

// Issue 32, finding 4: a batch of tiles that cannot fit the shared arena's cap is refused before
// anything is allocated or run, with the numbers; smaller tiles then run.
TEST_F(TiledUpscaleTest, ABatchOfTilesThatCannotFitTheArenaCapIsRefusedBeforeItRuns) {
  MemoryPolicy policy;
  policy.cpu.arena_settings.max_bytes = 64 * kMiB;
  Start(policy);
  std::vector<Tensor> frame;
  frame.push_back(RandomTensor({1, 3, 600, 600}, 5));
  Trace trace;
  // 64 tiles of 512x512 FP32, 3 channels: 201 MB of output at scale 1.
  auto refused = RunTiled(*runtime_, session_, frame, {.tile = 512, .overlap = 8, .scale = 1, .tiles_per_run = 64},
                          Traced(&trace));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("cap of 67108864"), std::string::npos) << refused.status().message();
  EXPECT_TRUE(trace.runs.empty()) << "refused before running";
  EXPECT_TRUE(RunTiled(*runtime_, session_, frame, {.tile = 128, .overlap = 8, .scale = 1}).ok());
}

TEST_F(TiledUpscaleTest, TiledEqualsUntiledForTheRealUpscaler) {
  auto upscaler = Load("waifu2x_scale2x");
  ASSERT_TRUE(upscaler);
  // Sizes that are not multiples of the tile, and one smaller than a tile.
  for (auto [h, w] : {std::pair<int64_t, int64_t>{45, 37}, {20, 25}}) {
    std::vector<Tensor> frame;
    frame.push_back(RandomTensor({1, 3, h, w}, 5));
    auto untiled = RunPerFrame(*runtime_, upscaler, frame);
    ASSERT_TRUE(untiled.ok()) << untiled.status().ToString();
    for (int per_run : {1, 3}) {
      auto tiled = RunTiled(*runtime_, upscaler, frame, {.tile = 32, .overlap = 6, .tiles_per_run = per_run});
      ASSERT_TRUE(tiled.ok()) << tiled.status().ToString();
      ASSERT_EQ((*tiled)[0].shape(), (Shape{1, 3, 2 * h, 2 * w}));
      auto a = (*tiled)[0].values<float>(), b = (*untiled)[0].values<float>();
      float worst = 0;
      for (size_t k = 0; k < a.size(); ++k) worst = std::max(worst, std::abs(a[k] - b[k]));
      EXPECT_LT(worst, 1e-4) << h << "x" << w << ", " << per_run << " tile(s) per run";
    }
  }
}

}  // namespace
}  // namespace ebb
