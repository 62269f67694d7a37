// ReadModelSignature against what ONNX Runtime itself reports, on every
// bundled model, and on files that are not models.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ebb/model_signature.h"
#include "ebb/runtime.h"
#include "test_util.h"

namespace ebb {
namespace {

void ExpectSame(const std::vector<TensorInfo>& a, const std::vector<TensorInfo>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name) << what;
    EXPECT_EQ(a[i].type, b[i].type) << what << " " << a[i].name;
    EXPECT_EQ(a[i].shape, b[i].shape) << what << " " << a[i].name;
  }
}

TEST(ModelSignatureTest, EqualsTheSessionsSignatureForEveryBundledModel) {
  auto rt = Runtime::Create();
  ASSERT_TRUE(rt.ok());
  std::vector<std::string> paths;
  for (const char* name : {"convnet", "tiny", "mixed", "twochannel", "strings", "ppocr_det", "waifu2x_scale2x"}) {
    paths.push_back(testing::ModelPath(name));
  }
  for (const char* name : {"identity", "halves"}) paths.push_back(testing::TestModelPath(name));
  for (const std::string& path : paths) {
    const std::string name = path;
    auto signature = ReadModelSignature(path);
    ASSERT_TRUE(signature.ok()) << name << ": " << signature.status().ToString();
    auto session = (*rt)->Load(path, {.device = DeviceRequest::Cpu()});
    ASSERT_TRUE(session.ok()) << name;
    ExpectSame(signature->inputs, (*session)->inputs(), std::string(name) + " inputs");
    ExpectSame(signature->outputs, (*session)->outputs(), std::string(name) + " outputs");
  }
}

TEST(ModelSignatureTest, FilesThatAreNotModelsAreRefused) {
  const std::string dir = ::testing::TempDir() + "/ebb_signature_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  EXPECT_EQ(ReadModelSignature(dir + "/missing.onnx").status().code(), StatusCode::kNotFound);
  std::ofstream(dir + "/text.onnx") << "not a model";
  auto text = ReadModelSignature(dir + "/text.onnx");
  EXPECT_EQ(text.status().code(), StatusCode::kInvalidArgument) << text.status().ToString();
  std::ifstream in(testing::ModelPath("mixed"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  for (size_t cut : {bytes.size() / 2, bytes.size() - 7, size_t{3}}) {
    std::ofstream(dir + "/cut.onnx", std::ios::binary) << bytes.substr(0, cut);
    auto cut_model = ReadModelSignature(dir + "/cut.onnx");
    EXPECT_EQ(cut_model.status().code(), StatusCode::kInvalidArgument) << "cut at " << cut;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ebb
