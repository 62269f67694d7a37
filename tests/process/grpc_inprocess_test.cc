// gRPC answers against in-process runs of the same models, bit for bit: the
// real `ebb serve` over a real gRPC channel (C++ client from the generated
// stubs), and Session::Run in this process. The rest of the gRPC front end is
// tested from Python (tests/process/grpc_test.py).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ebb/runtime.h"
#include "grpc_service.grpc.pb.h"
#include "server_process.h"
#include "test_util.h"

namespace ebb {
namespace {

class GrpcInProcessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    namespace fs = std::filesystem;
    repository_ = ::testing::TempDir() + "/ebb_grpc_inprocess_" + std::to_string(getpid());
    for (const char* model : {"convnet", "mixed", "strings", "halves"}) {
      fs::create_directories(repository_ + "/" + model);
      fs::copy_file(Path(model), repository_ + "/" + model + "/model.onnx", fs::copy_options::overwrite_existing);
    }
    server_ = new testing::ServerProcess();
    ASSERT_TRUE(server_->Start({"--repository", repository_, "--no-load", "--grpc-port", "-1"}));
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->grpc_port()),
                                       grpc::InsecureChannelCredentials());
    stub_ = inference::GRPCInferenceService::NewStub(channel).release();
    auto rt = Runtime::Create();
    ASSERT_TRUE(rt.ok());
    runtime_ = std::move(rt).value().release();
  }
  static void TearDownTestSuite() {
    delete stub_;
    EXPECT_EQ(server_->Stop(SIGTERM), 0);
    delete server_;
    delete runtime_;
    std::filesystem::remove_all(repository_);
  }

  static std::string Path(const std::string& model) {
    return model == "halves" ? testing::TestModelPath(model) : testing::ModelPath(model);
  }

  // Runs `inputs` on `model` over gRPC (raw contents) and in-process; expects the same outputs.
  static void ExpectSameAsInProcess(const std::string& model, const std::vector<NamedTensor>& inputs) {
    inference::ModelInferRequest request;
    request.set_model_name(model);
    for (const NamedTensor& in : inputs) {
      auto* tensor = request.add_inputs();
      tensor->set_name(in.name);
      tensor->set_datatype(DataTypeName(in.tensor.type()));
      for (int64_t d : in.tensor.shape()) tensor->add_shape(d);
      request.add_raw_input_contents(in.tensor.data(), in.tensor.byte_size());
    }
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    grpc::Status st = stub_->ModelInfer(&context, request, &response);
    ASSERT_TRUE(st.ok()) << model << ": " << st.error_message();
    auto session = runtime_->Load(Path(model), {.device = DeviceRequest::Cpu()});
    ASSERT_TRUE(session.ok());
    auto local = (*session)->Run(inputs);
    ASSERT_TRUE(local.ok()) << local.status().ToString();
    ASSERT_EQ(response.outputs_size(), static_cast<int>(local->size()));
    for (size_t i = 0; i < local->size(); ++i) {
      const Tensor& t = (*local)[i].tensor;
      EXPECT_EQ(response.outputs(i).name(), (*local)[i].name);
      EXPECT_EQ(response.outputs(i).datatype(), DataTypeName(t.type()));
      EXPECT_EQ(Shape(response.outputs(i).shape().begin(), response.outputs(i).shape().end()), t.shape());
      EXPECT_EQ(response.raw_output_contents(i), std::string(reinterpret_cast<const char*>(t.data()), t.byte_size()))
          << model << " output " << (*local)[i].name;
    }
  }

  static inline std::string repository_;
  static inline testing::ServerProcess* server_ = nullptr;
  static inline inference::GRPCInferenceService::Stub* stub_ = nullptr;
  static inline Runtime* runtime_ = nullptr;
};

TEST_F(GrpcInProcessTest, ConvnetBitForBit) {
  ExpectSameAsInProcess("convnet", testing::One("x", testing::RandomTensor({2, 3, 40, 28}, 5)));
}

TEST_F(GrpcInProcessTest, MixedTypesBitForBit) {
  std::vector<NamedTensor> in;
  in.push_back({"a", testing::RandomTensor({3, 4}, 6)});
  Tensor b(DataType::kInt64, {3, 4}), c(DataType::kUInt8, {3, 4}), flag(DataType::kBool, {3, 4});
  for (int i = 0; i < 12; ++i) {
    b.values<int64_t>()[i] = (i * 7919) % 1000 - 500;
    c.values<uint8_t>()[i] = static_cast<uint8_t>(i * 21);
    flag.values<uint8_t>()[i] = i % 3 == 0;
  }
  in.push_back({"b", std::move(b)});
  in.push_back({"c", std::move(c)});
  in.push_back({"flag", std::move(flag)});
  ExpectSameAsInProcess("mixed", in);
}

TEST_F(GrpcInProcessTest, StringsBitForBit) {
  using namespace std::string_literals;
  ExpectSameAsInProcess("strings", testing::One("text", Tensor::FromStrings({2, 2}, std::vector<std::string>{
                                                                                     "banana", "", "nul\0inside"s, "kiwi"})));
}

TEST_F(GrpcInProcessTest, SixteenBitFloatsBitForBit) {
  std::vector<NamedTensor> in;
  Tensor half(DataType::kFloat16, {4}), brain(DataType::kBFloat16, {4});
  const uint16_t bits[] = {0x3c00, 0x8000, 0x7bff, 0x0001};
  for (int i = 0; i < 4; ++i) half.values<uint16_t>()[i] = brain.values<uint16_t>()[i] = bits[i];
  in.push_back({"in_fp16", std::move(half)});
  in.push_back({"in_bf16", std::move(brain)});
  ExpectSameAsInProcess("halves", in);
}

// Round four: a gRPC sequence_id had no length limit (20 starts of a 64 MiB id held 2.7 GB), each
// conflicting start logged the whole id (four starts of a 16 MiB id: 64 MiB of log), and the START
// error quoted it whole (an 8 MiB id turned the answer into RESOURCE_EXHAUSTED on its metadata).
TEST(GrpcSequenceIdTest, LongIdsAreRefusedAndTheLogQuotesIdsClipped) {
  namespace fs = std::filesystem;
  const std::string repository = ::testing::TempDir() + "/ebb_grpc_sequence_" + std::to_string(getpid());
  fs::create_directories(repository + "/tiny");
  fs::copy_file(testing::ModelPath("tiny"), repository + "/tiny/model.onnx", fs::copy_options::overwrite_existing);
  const std::string log = repository + ".stderr";
  testing::ServerProcess server;
  ASSERT_TRUE(server.Start({"--repository", repository, "--grpc-port", "-1"}, log));
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(server.grpc_port()), grpc::InsecureChannelCredentials()));
  auto infer = [&](const std::string& id, bool start, bool end) {
    inference::ModelInferRequest request;
    request.set_model_name("tiny");
    auto* x = request.add_inputs();
    x->set_name("x");
    x->set_datatype("FP32");
    x->add_shape(1);
    x->add_shape(64);
    request.add_raw_input_contents(std::string(64 * sizeof(float), '\0'));
    (*request.mutable_parameters())["sequence_id"].set_string_param(id);
    (*request.mutable_parameters())["sequence_start"].set_bool_param(start);
    (*request.mutable_parameters())["sequence_end"].set_bool_param(end);
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    return stub->ModelInfer(&context, request, &response);
  };
  for (size_t size : {size_t{1025}, size_t{8} << 20}) {
    grpc::Status st = infer(std::string(size, 'q'), /*start=*/false, false);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message().substr(0, 200);
    EXPECT_EQ(st.error_message(), "parameters.sequence_id is a string of " + std::to_string(size) +
                                      " bytes, longer than the limit of 1024 bytes");
  }
  const std::string longest(1024, 'q');
  grpc::Status unknown = infer(longest, false, false);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LT(unknown.error_message().size(), 400u);
  // Four starts of one open id: three conflicts, each one log line with the id clipped.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(infer(longest, true, false).ok());
  ASSERT_TRUE(infer(longest, false, true).ok());
  EXPECT_EQ(server.Stop(SIGTERM), 0);
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  const std::string logged = text.str();
  size_t conflicts = 0;
  for (size_t at = logged.find("has a conflict"); at != std::string::npos; at = logged.find("has a conflict", at + 1)) {
    ++conflicts;
  }
  EXPECT_EQ(conflicts, 3u) << logged.substr(0, 2000);
  EXPECT_NE(logged.find(std::string(128, 'q') + "... (1024 bytes)"), std::string::npos);
  EXPECT_EQ(logged.find(std::string(129, 'q')), std::string::npos) << "an id quoted whole";
  fs::remove_all(repository);
  fs::remove(log);
}

}  // namespace
}  // namespace ebb
