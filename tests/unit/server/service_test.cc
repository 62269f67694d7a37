// The server core's InferenceService in process, on the bundled models and the real ONNX
// Runtime: what a front end asks it beside the operations the HTTP and gRPC tests reach
// through their wire formats (server_test.cc, grpc_test.py).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <memory>
#include <thread>

#include "core/service.h"
#include "ebb/model_location.h"
#include "ebb/image.h"
#include "ebb/runtime.h"
#include "test_util.h"

namespace ebb::server {
namespace {

using std::chrono::nanoseconds;
using std::chrono::seconds;

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto rt = Runtime::Create();
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    runtime_ = std::move(rt).value();
    auto service = InferenceService::Create(*runtime_, {.root = EBB_MODELS_DIR, .default_device = "cpu"}, {});
    ASSERT_TRUE(service.ok()) << service.status().ToString();
    service_ = std::move(service).value();
  }

  // `tiny`'s one input, filled with halves.
  InferRequest TinyRequest() {
    auto info = service_->DescribeModel("tiny");
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    InferRequest request;
    if (!info.ok()) return request;
    Shape shape = info->inputs[0].shape;
    for (int64_t& d : shape) d = d < 0 ? 1 : d;
    Tensor t(DataType::kFloat32, shape);
    for (float& v : t.values<float>()) v = 0.5f;
    request.inputs.push_back({info->inputs[0].name, std::move(t)});
    return request;
  }

  Status InferTiny() {
    return service_->Infer("tiny", "", [&]() -> Result<InferRequest> { return TinyRequest(); }).status();
  }

  std::unique_ptr<Runtime> runtime_;
  std::unique_ptr<InferenceService> service_;
};

// An attached model detached and attached again under its name: the repository's and the pool's
// lookups that keep the last one found at hand do not keep the one erased (ASan sees it otherwise).
TEST_F(ServiceTest, AModelDetachedAndAttachedAgainIsFoundAfresh) {
  Result<ModelFile> file = ResolveModelFile(EBB_MODELS_DIR, "tiny");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ModelRepository& repository = service_->repository();
  const auto infer = [&](const std::string& model) {
    return service_->Infer(model, "", [&]() -> Result<InferRequest> { return TinyRequest(); }).status();
  };
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(repository.Attach("attached", *file).ok());
    EXPECT_TRUE(infer("attached").ok()) << "round " << round;
    EXPECT_TRUE(infer("attached").ok()) << "round " << round;
    EXPECT_TRUE(infer("tiny").ok());  // another model between, then back
    EXPECT_TRUE(infer("attached").ok()) << "round " << round;
    ASSERT_TRUE(repository.Detach("attached").ok());
    EXPECT_EQ(infer("attached").code(), StatusCode::kNotFound) << "round " << round;
  }
}

// A request refused after its inputs were decoded (here: an input the model does not have) reaches no
// run, so no release: the large input it decoded into a kept buffer (Tensor::Reusable, as the
// HTTP and gRPC decoders do) must not stay kept. A request that runs leaves it for the next one.
TEST_F(ServiceTest, ARefusedRequestKeepsNoBufferItsInputsTook) {
  ASSERT_TRUE(service_->Load("tiny").ok());
  detail::OutputBuffers::Drop();
  auto big_input = [](const std::string& name) {
    InferRequest request;
    Tensor t = Tensor::Reusable(DataType::kFloat32, {1, 65536});  // 256 KiB
    for (float& v : t.values<float>()) v = 0.5f;
    request.inputs.push_back({name, std::move(t)});
    return request;
  };
  Result<InferResponse> refused =
      service_->Infer("tiny", "", [&]() -> Result<InferRequest> { return big_input("no_such_input"); });
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(detail::OutputBuffers::kept_bytes(), 0u) << refused.status().ToString();

  // Kept when the request was refused while decoding, after its tensor went back: freed too.
  refused = service_->Infer("tiny", "", [&]() -> Result<InferRequest> {
    (void)big_input("x");  // decoded, then the decoder fails
    return InvalidArgument("element 7 is not a number");
  });
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(detail::OutputBuffers::kept_bytes(), 0u);
}

// An OCR pipeline folder's model is its detector in the pool; its classifier and recogniser were
// kept (in the service's pipeline and the Runtime's cache) after the pool let the detector go, so an
// evicted OCR model gave back only part of its memory. Now all three go.
TEST_F(ServiceTest, AnUnloadedOcrModelLeavesNoneOfItsThreeSessions) {
  auto cached = [&] { return runtime_->cached_sessions(); };
  ASSERT_EQ(cached(), 0u);
  const std::string png_path = ::testing::TempDir() + "/ebb_service_blank.png";
  Image white{64, 32, 3, std::vector<uint8_t>(64 * 32 * 3, 255)};
  ASSERT_TRUE(WritePng(png_path, white).ok());
  std::ifstream in(png_path, std::ios::binary);
  const std::string png((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Result<InferResponse> answer = service_->Infer("ocr", "", [&]() -> Result<InferRequest> {
    InferRequest request;
    request.inputs.push_back({"image", Tensor::FromStrings({1}, std::vector<std::string>{png})});
    return request;
  });
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(cached(), 3u) << "detector, classifier, recogniser";
  ASSERT_TRUE(service_->Unload("ocr").ok());
  EXPECT_EQ(cached(), 0u) << "an OCR model's classifier or recogniser stayed after it was unloaded";
  std::remove(png_path.c_str());
}

// RunsAtOnce is what lets the HTTP front end run a request on its event loop (HttpOptions::
// quick_run_us): it must say no whenever the request could wait or its time is not known.
TEST_F(ServiceTest, RunsAtOnceOnlyForALoadedModelAnsweredQuicklyWithNothingElseInFlight) {
  EXPECT_FALSE(service_->RunsAtOnce("tiny", "", seconds(1))) << "not loaded: a load would come first";
  ASSERT_TRUE(service_->Load("tiny").ok());
  EXPECT_FALSE(service_->RunsAtOnce("tiny", "", seconds(1))) << "never answered: its time is not known";
  ASSERT_TRUE(InferTiny().ok());
  EXPECT_TRUE(service_->RunsAtOnce("tiny", "", seconds(1)));
  EXPECT_TRUE(service_->RunsAtOnce("tiny", "1", seconds(1))) << "the default version is 1";
  EXPECT_FALSE(service_->RunsAtOnce("tiny", "", nanoseconds(1))) << "its last request took longer than 1 ns";
  EXPECT_FALSE(service_->RunsAtOnce("tiny", "", nanoseconds(0))) << "a zero limit is never";
  EXPECT_FALSE(service_->RunsAtOnce("tiny", "2", seconds(1))) << "a version not served";
  EXPECT_FALSE(service_->RunsAtOnce("no_such_model", "", seconds(1)));

  // When it says yes, it names the route the request then runs on without a second lookup; a
  // route of another model is not taken (Infer resolves its own).
  {  // (a response holds its outputs' memory until it goes)
    ModelRepository::Route route;
    ASSERT_TRUE(service_->RunsAtOnce("tiny", "", seconds(1), &route));
    EXPECT_EQ(route.name, "tiny");
    EXPECT_EQ(route.version, "1");
    ASSERT_NE(route.config, nullptr);
    const auto decode = [this] { return Result<InferRequest>(TinyRequest()); };
    auto on_route = service_->Infer("tiny", "", decode, {}, &route);
    ASSERT_TRUE(on_route.ok()) << on_route.status().ToString();
    EXPECT_EQ(on_route->model_version, "1");
    auto elsewhere = service_->Infer("no_such_model", "", decode, {}, &route);
    EXPECT_EQ(elsewhere.status().code(), StatusCode::kNotFound) << "another model's route was taken";
    auto other_version = service_->Infer("tiny", "2", decode, {}, &route);
    EXPECT_EQ(other_version.status().code(), StatusCode::kNotFound) << "another version's route was taken";
  }
  {
    ModelRepository::Route route;
    EXPECT_FALSE(service_->RunsAtOnce("tiny", "", nanoseconds(1), &route));
    EXPECT_TRUE(route.name.empty()) << "a route named though the request would not run at once";
  }

  // Another inference in flight (here held in its decoder, after its admission): this one could
  // wait for a worker or for memory.
  std::promise<void> decoding, go_on;
  std::shared_future<void> release = go_on.get_future().share();
  std::thread other([&] {
    auto r = service_->Infer("tiny", "", [&]() -> Result<InferRequest> {
      decoding.set_value();
      release.wait();
      return TinyRequest();
    });
    EXPECT_TRUE(r.ok()) << r.status().ToString();
  });
  decoding.get_future().wait();
  EXPECT_FALSE(service_->RunsAtOnce("tiny", "", seconds(1))) << "another inference is in flight";
  go_on.set_value();
  other.join();
  EXPECT_TRUE(service_->RunsAtOnce("tiny", "", seconds(1))) << "nothing in flight again";

  // A failed request leaves the last successful time as it was.
  auto failed = service_->Infer("tiny", "", []() -> Result<InferRequest> { return InvalidArgument("bad body"); });
  EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(service_->RunsAtOnce("tiny", "", seconds(1)));

  // A reply on its way out holds its outputs' memory (admission by memory, on by default): a run
  // alone, or one that needs that memory, would wait for it, and the thread that would run it (an
  // HTTP event loop) may be the one that must finish sending that reply first. Before this check,
  // `ebb bench http` lost a request to that wait about once in 60 runs on a busy machine.
  {
    Result<InferResponse> sending = service_->Infer("tiny", "", [&]() -> Result<InferRequest> { return TinyRequest(); });
    ASSERT_TRUE(sending.ok()) << sending.status().ToString();
    ASSERT_GT(sending->memory.bytes(), 0);
    EXPECT_FALSE(service_->RunsAtOnce("tiny", "", seconds(1))) << "a reply still holds memory";
    // What is held: the outputs, and nothing beyond them for a reply sent from them (no reply_bytes).
    int64_t outputs = 0;
    for (const NamedTensor& output : sending->outputs) outputs += static_cast<int64_t>(output.tensor.byte_size());
    EXPECT_EQ(sending->memory.bytes(), outputs);
  }
  {  // A reply that takes more (JSON text): what the front end says it takes is held beside them.
    Result<InferResponse> sending = service_->Infer("tiny", "", [&]() -> Result<InferRequest> {
      InferRequest request = TinyRequest();
      request.reply_bytes = [](const NamedTensor& output) { return 16 * output.tensor.element_count(); };
      return request;
    });
    ASSERT_TRUE(sending.ok()) << sending.status().ToString();
    int64_t outputs = 0, elements = 0;
    for (const NamedTensor& output : sending->outputs) {
      outputs += static_cast<int64_t>(output.tensor.byte_size());
      elements += output.tensor.element_count();
    }
    EXPECT_EQ(sending->memory.bytes(), outputs + 16 * elements);
  }
  EXPECT_TRUE(service_->RunsAtOnce("tiny", "", seconds(1))) << "the reply and its memory went";

  ASSERT_TRUE(service_->Unload("tiny").ok());
  EXPECT_FALSE(service_->RunsAtOnce("tiny", "", seconds(1))) << "unloaded: the next request would load it";
  ASSERT_TRUE(InferTiny().ok());  // loaded on demand
  EXPECT_TRUE(service_->RunsAtOnce("tiny", "", seconds(1)));
  service_->BeginShutdown();
  EXPECT_FALSE(service_->RunsAtOnce("tiny", "", seconds(1))) << "shutting down: it would be refused";
}

}  // namespace
}  // namespace ebb::server
