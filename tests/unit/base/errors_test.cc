// Failures on real ONNX Runtime: real out-of-memory, unusable CUDA, bad
// models and bad inputs. Each is a clear error and loses nothing else.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ebb/runtime.h"
#include "test_util.h"

namespace ebb {
namespace {

using testing::ImageInput;
using testing::kMiB;
using testing::ModelPath;

std::unique_ptr<Runtime> MakeRuntime(MemoryPolicy policy = {}) {
  auto rt = Runtime::Create(policy);
  EXPECT_TRUE(rt.ok()) << rt.status().ToString();
  return rt.ok() ? std::move(rt).value() : nullptr;
}

bool Mentions(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

TEST(OutOfMemoryTest, ArenaCapBelowTheNeedIsResourceExhaustedAndDropsOnlyThatSession) {
  MemoryPolicy policy;
  policy.cpu.arena_settings.max_bytes = 64 * kMiB;
  auto runtime = MakeRuntime(policy);
  ASSERT_TRUE(runtime);
  auto convnet = runtime->Load(ModelPath("convnet"), {.device = DeviceRequest::Cpu()});
  auto tiny = runtime->Load(ModelPath("tiny"), {.device = DeviceRequest::Cpu()});
  ASSERT_TRUE(convnet.ok() && tiny.ok());
  EXPECT_EQ(runtime->load_count(), 2u);

  auto failed = (*convnet)->Run(ImageInput(1024, 1024));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kResourceExhausted) << failed.status().ToString();
  EXPECT_TRUE(Mentions(failed.status(), "out of memory")) << failed.status().message();
  EXPECT_TRUE(Mentions(failed.status(), "cap")) << failed.status().message();
  EXPECT_TRUE(Mentions(failed.status(), "requested")) << failed.status().message();
  EXPECT_TRUE(Mentions(failed.status(), "MiB")) << failed.status().message();

  // The broken session left the cache; the next request loads it afresh and
  // succeeds on an input that fits. The other model was not touched.
  auto reloaded = runtime->Load(ModelPath("convnet"), {.device = DeviceRequest::Cpu()});
  ASSERT_TRUE(reloaded.ok());
  EXPECT_NE(reloaded->get(), convnet->get());
  EXPECT_EQ(runtime->load_count(), 3u);
  auto fits = (*reloaded)->Run(ImageInput(64, 64));
  EXPECT_TRUE(fits.ok()) << fits.status().ToString();
  auto tiny_again = runtime->Load(ModelPath("tiny"), {.device = DeviceRequest::Cpu()});
  ASSERT_TRUE(tiny_again.ok());
  EXPECT_EQ(tiny_again->get(), tiny->get());
  EXPECT_TRUE((*tiny_again)->Run(testing::One("x", testing::RandomTensor({1, 64}))).ok());
  // The failed run's memory went back as well.
  const std::optional<ArenaStats> shared = runtime->ReadMemory().Find("cpu:shared");
  ASSERT_TRUE(shared.has_value());
  EXPECT_LE(shared->reserved, 2 * kMiB);
}

TEST(DeviceTest, CudaOnAMachineWithoutItFallsBackInAutoAndFailsInStrictMode) {
  auto runtime = MakeRuntime();
  ASSERT_TRUE(runtime);
  auto automatic = runtime->Load(ModelPath("tiny"));
  ASSERT_TRUE(automatic.ok()) << automatic.status().ToString();
  if ((*automatic)->device().kind == DeviceKind::kCuda) GTEST_SKIP() << "this machine has a usable GPU";
  EXPECT_EQ((*automatic)->device().provider, "CPUExecutionProvider");
  EXPECT_FALSE((*automatic)->device().fallback_reason.empty());

  auto lenient = runtime->Load(ModelPath("tiny"), {.device = DeviceRequest::Cuda(0)});
  ASSERT_TRUE(lenient.ok());
  EXPECT_EQ((*lenient)->device().ToString(), "cpu");
  EXPECT_TRUE(Mentions(Status(StatusCode::kUnavailable, (*lenient)->device().fallback_reason), "CUDA"));

  auto strict = runtime->Load(ModelPath("tiny"), {.device = DeviceRequest::Cuda(0), .strict_device = true});
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Mentions(strict.status(), "cuda:0")) << strict.status().message();
  EXPECT_TRUE(Mentions(strict.status(), "strict")) << strict.status().message();
}

TEST(DeviceTest, ParsesRequests) {
  EXPECT_EQ(DeviceRequest::Parse("cuda:3")->index, 3);
  EXPECT_EQ(DeviceRequest::Parse("cpu")->kind, DeviceRequest::Kind::kCpu);
  EXPECT_EQ(DeviceRequest::Parse("auto")->kind, DeviceRequest::Kind::kAuto);
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:1x", ""}) {
    EXPECT_FALSE(DeviceRequest::Parse(bad).ok()) << bad;
  }
}

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime_ = MakeRuntime();
    ASSERT_TRUE(runtime_);
    auto s = runtime_->Load(ModelPath("convnet"), {.device = DeviceRequest::Cpu()});
    ASSERT_TRUE(s.ok());
    session_ = *s;
  }
  // After any error the session still serves a good request.
  void ExpectStillServes() {
    auto ok = session_->Run(ImageInput(16, 16));
    EXPECT_TRUE(ok.ok()) << ok.status().ToString();
  }
  std::unique_ptr<Runtime> runtime_;
  std::shared_ptr<Session> session_;
};

TEST_F(BadInputTest, MissingModelFile) {
  auto s = runtime_->Load("no/such/model.onnx");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Mentions(s.status(), "no/such/model.onnx"));
}

TEST_F(BadInputTest, CorruptModelFile) {
  std::string path = ::testing::TempDir() + "/ebb_corrupt.onnx";
  {
    std::ofstream out(path, std::ios::binary);
    out << "this is not an ONNX model at all";
  }
  auto s = runtime_->Load(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << s.status().ToString();
  EXPECT_TRUE(Mentions(s.status(), "ebb_corrupt")) << s.status().message();
  // A truncated real model, too.
  std::ifstream in(ModelPath("convnet"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  }
  auto truncated = runtime_->Load(path);
  EXPECT_FALSE(truncated.ok());
  std::filesystem::remove(path);
  EXPECT_EQ(runtime_->cached_sessions(), 1u) << "failed loads are not cached";
  ExpectStillServes();
}

TEST_F(BadInputTest, UnknownInputName) {
  auto out = session_->Run(ImageInput(16, 16, 1, "image"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Mentions(out.status(), "no input named 'image'")) << out.status().message();
  EXPECT_TRUE(Mentions(out.status(), "its inputs: x")) << out.status().message();
  ExpectStillServes();
}

TEST_F(BadInputTest, MissingInputAndUnknownOutput) {
  auto none = session_->Run({});
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(Mentions(none.status(), "needs input 'x'")) << none.status().message();
  RunFlags flags;
  flags.outputs = {"z"};
  auto out = session_->Run(ImageInput(16, 16), flags);
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(Mentions(out.status(), "no output named 'z'")) << out.status().message();
  ExpectStillServes();
}

TEST_F(BadInputTest, WrongShape) {
  std::vector<NamedTensor> in;
  in.push_back({"x", testing::RandomTensor({1, 4, 16, 16})});
  auto out = session_->Run(in);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Mentions(out.status(), "[1,4,16,16]")) << out.status().message();
  in.clear();
  in.push_back({"x", testing::RandomTensor({3, 16, 16})});
  EXPECT_FALSE(session_->Run(in).ok());
  ExpectStillServes();
}

TEST_F(BadInputTest, WrongType) {
  std::vector<NamedTensor> in;
  in.push_back({"x", Tensor(DataType::kInt64, {1, 3, 8, 8})});
  auto out = session_->Run(in);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Mentions(out.status(), "must be FP32, got INT64")) << out.status().message();
  ExpectStillServes();
}

}  // namespace
}  // namespace ebb
