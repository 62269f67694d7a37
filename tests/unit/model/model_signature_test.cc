// ReadModelSignature against what ONNX Runtime itself reports, on every
// bundled model, and on files that are not models; ReadModelFiles on models
// with external data, wherever their tensors name it, and on every location
// that must be refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ebb/model_signature.h"
#include "ebb/runtime.h"
#include "external_data_model.h"
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

namespace fs = std::filesystem;
namespace pb = testing::pb;

class ModelFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("ebb_model_files_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "m");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // dir_/m/model.onnx naming `location`, weights written where the location leads.
  Result<ModelFiles> FilesNaming(const std::string& location) {
    return ReadModelFiles(testing::WriteMatMulModel(dir_ / "m", 1.f, location, /*write_weights=*/false));
  }
  // A model whose graph is `graph` (GraphProto bytes).
  std::string WriteGraph(const std::string& graph) {
    std::string model;
    pb::Int(model, 1, 8);
    pb::Bytes(model, 7, graph);
    const std::string path = (dir_ / "m" / "model.onnx").string();
    std::ofstream(path, std::ios::binary | std::ios::trunc) << model;
    return path;
  }

  fs::path dir_;
};

// Element types and dims as the wire holds them, whatever they are: an element type no enum value
// names (the fuzzer's first find: 99 was cast to ONNXTensorElementDataType, undefined behaviour) is
// refused naming it; a negative dim (int64 on the wire) reads as unknown, as a symbolic one.
TEST_F(ModelFilesTest, OddElementTypesAndDimsFromTheWire) {
  auto value = [](uint64_t elem, int64_t dim) {
    std::string dims, d;
    pb::Int(d, 1, static_cast<uint64_t>(dim));
    pb::Bytes(dims, 1, d);
    std::string tensor_type;
    pb::Int(tensor_type, 1, elem);
    pb::Bytes(tensor_type, 2, dims);
    std::string type, info;
    pb::Bytes(type, 1, tensor_type);
    pb::Bytes(info, 1, "x");
    pb::Bytes(info, 2, type);
    return info;
  };
  for (uint64_t elem : {uint64_t{99}, uint64_t{17}, uint64_t{1} << 40, ~uint64_t{0}}) {
    std::string graph;
    pb::Bytes(graph, 11, value(elem, 4));
    auto s = ReadModelSignature(WriteGraph(graph));
    ASSERT_EQ(s.status().code(), StatusCode::kInvalidArgument) << elem;
    EXPECT_NE(s.status().message().find("ONNX element type " + std::to_string(elem)), std::string::npos)
        << s.status().ToString();
  }
  std::string graph;
  pb::Bytes(graph, 11, value(1, -5));
  auto s = ReadModelSignature(WriteGraph(graph));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->inputs.size(), 1u);
  EXPECT_EQ(s->inputs[0].shape, (Shape{-1}));
}

TEST_F(ModelFilesTest, OneFileModelsReadNothingElse) {
  const std::string path = testing::ModelPath("convnet");
  auto files = ReadModelFiles(path);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_TRUE(files->external_data.empty());
  EXPECT_EQ(files->total_bytes, static_cast<int64_t>(fs::file_size(path)));
}

TEST_F(ModelFilesTest, ExternalDataBesideTheModelAndInSubfolders) {
  for (const std::string location : {"weights.bin", "sub/w.bin", "./sub/../sub/w.bin"}) {
    const std::string model = testing::WriteMatMulModel(dir_ / "m", 1.f, location);
    auto files = ReadModelFiles(model);
    ASSERT_TRUE(files.ok()) << location << ": " << files.status().ToString();
    ASSERT_EQ(files->external_data.size(), 1u) << location;
    EXPECT_EQ(files->external_data[0], (dir_ / "m" / location).string());
    EXPECT_EQ(files->total_bytes, static_cast<int64_t>(fs::file_size(model) + 64 * 64 * 4)) << location;
  }
  // A link inside the folder to a file inside it is fine.
  if (const std::string no_links = testing::MakeSymlink("weights.bin", dir_ / "m" / "link.bin"); !no_links.empty()) {
    GTEST_SKIP() << no_links;
  }
  EXPECT_TRUE(FilesNaming("link.bin").ok());
}

TEST_F(ModelFilesTest, MissingEscapingAndOddLocationsAreRefused) {
  testing::WriteMatMulWeights(dir_ / "outside.bin", 1.f);
  const std::string no_links = testing::MakeSymlink(dir_ / "outside.bin", dir_ / "m" / "out_link.bin");
  fs::create_directories(dir_ / "m" / "folder.bin");
  std::ofstream(dir_ / "m" / "empty.bin").close();
  struct Case {
    std::string location;
    StatusCode code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"missing.bin", StatusCode::kFailedPrecondition, "does not exist"},
      {"../outside.bin", StatusCode::kInvalidArgument, "leaves the model's folder"},
      {"sub/../../outside.bin", StatusCode::kInvalidArgument, "leaves the model's folder"},
      {(dir_ / "outside.bin").string(), StatusCode::kInvalidArgument, "absolute"},
      {"out_link.bin", StatusCode::kInvalidArgument, "outside the model's folder"},
      {"folder.bin", StatusCode::kInvalidArgument, "not a regular file"},
      {"empty.bin", StatusCode::kInvalidArgument, "empty"},
  };
  for (const Case& c : cases) {
    if (!no_links.empty() && c.location == "out_link.bin") continue;
    auto files = FilesNaming(c.location);
    ASSERT_FALSE(files.ok()) << c.location;
    EXPECT_EQ(files.status().code(), c.code) << c.location << ": " << files.status().ToString();
    EXPECT_NE(files.status().message().find(c.says), std::string::npos) << files.status().ToString();
    EXPECT_NE(files.status().message().find(c.location), std::string::npos) << "the message names the location";
  }
  if (!no_links.empty()) GTEST_SKIP() << no_links;
}

TEST_F(ModelFilesTest, EveryTensorOfTheGraphIsWalked) {
  testing::WriteMatMulWeights(dir_ / "m" / "a.bin", 1.f);
  testing::WriteMatMulWeights(dir_ / "m" / "b.bin", 1.f);
  testing::WriteMatMulWeights(dir_ / "m" / "c.bin", 1.f);
  // A Constant node's value (attribute t), an If node's then_branch (attribute g) holding an
  // initializer, and a sparse initializer's values: each naming its own file, a.bin twice.
  std::string constant_attr;
  pb::Bytes(constant_attr, 1, "value");
  pb::Bytes(constant_attr, 5, testing::MatMulInitializer(1.f, "a.bin"));
  std::string constant;
  pb::Bytes(constant, 4, "Constant");
  pb::Bytes(constant, 5, constant_attr);
  std::string subgraph;
  pb::Bytes(subgraph, 5, testing::MatMulInitializer(1.f, "b.bin"));
  pb::Bytes(subgraph, 5, testing::MatMulInitializer(1.f, "a.bin"));
  std::string if_attr;
  pb::Bytes(if_attr, 1, "then_branch");
  pb::Bytes(if_attr, 6, subgraph);
  std::string if_node;
  pb::Bytes(if_node, 4, "If");
  pb::Bytes(if_node, 5, if_attr);
  std::string sparse;
  pb::Bytes(sparse, 1, testing::MatMulInitializer(1.f, "c.bin"));
  std::string graph;
  pb::Bytes(graph, 1, constant);
  pb::Bytes(graph, 1, if_node);
  pb::Bytes(graph, 15, sparse);
  auto files = ReadModelFiles(WriteGraph(graph));
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  const std::string m = (dir_ / "m").string();
  EXPECT_EQ(files->external_data, (std::vector<std::string>{(dir_ / "m" / "a.bin").string(), (dir_ / "m" / "b.bin").string(),
                                                            (dir_ / "m" / "c.bin").string()}));
  // A tensor marked external that names no location; a truncated model.
  std::string no_location;
  pb::Bytes(no_location, 8, "w");
  pb::Int(no_location, 14, 1);
  std::string bad_graph;
  pb::Bytes(bad_graph, 5, no_location);
  auto none = ReadModelFiles(WriteGraph(bad_graph));
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("names no location"), std::string::npos) << none.status().ToString();
  // A name longer than a path is only skipped; a location longer than a path, or with a NUL byte, is refused.
  auto initializer = [](const std::string& name, const std::string& location) {
    std::string t;
    pb::Bytes(t, 8, name);
    pb::Bytes(t, 13, pb::Entry("location", location));
    pb::Int(t, 14, 1);
    std::string g;
    pb::Bytes(g, 5, t);
    return g;
  };
  auto long_name = ReadModelFiles(WriteGraph(initializer(std::string(5000, 'n'), "a.bin")));
  ASSERT_TRUE(long_name.ok()) << long_name.status().ToString();
  EXPECT_EQ(long_name->external_data.size(), 1u);
  auto long_location = ReadModelFiles(WriteGraph(initializer("w", std::string(5000, 'l'))));
  EXPECT_NE(long_location.status().message().find("longer than 4096 bytes"), std::string::npos)
      << long_location.status().ToString();
  auto nul = ReadModelFiles(WriteGraph(initializer("w", std::string("a.bin\0/etc/passwd", 17))));
  EXPECT_NE(nul.status().message().find("NUL byte"), std::string::npos) << nul.status().ToString();
  const std::string whole = testing::MatMulModelBytes(1.f, "a.bin");
  std::ofstream(dir_ / "m" / "model.onnx", std::ios::binary | std::ios::trunc) << whole.substr(0, whole.size() - 5);
  EXPECT_EQ(ReadModelFiles((dir_ / "m" / "model.onnx").string()).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ebb
