// BYTES tensors (ONNX strings): the library's representation and the run
// boundary, on the real ONNX Runtime with the generated `strings` model
// (text -> echo = Identity(text), id = LabelEncoder(text)).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ebb/runtime.h"
#include "test_util.h"

namespace ebb {
namespace {

using namespace std::string_literals;

std::string Serialized(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) {
    const uint32_t n = static_cast<uint32_t>(v.size());
    for (int i = 0; i < 4; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
    out += v;
  }
  return out;
}

TEST(BytesTensorTest, HoldsTheKServeBinaryFormAndReadsBack) {
  const std::vector<std::string> values = {"apple", "", "with\0nul"s, std::string(300, 'x')};
  Tensor t = Tensor::FromStrings({2, 2}, values);
  EXPECT_EQ(t.type(), DataType::kBytes);
  EXPECT_EQ(DataTypeName(t.type()), std::string("BYTES"));
  EXPECT_EQ(ParseDataType("BYTES"), DataType::kBytes);
  EXPECT_EQ(t.element_count(), 4);
  const std::string wire = Serialized(values);
  ASSERT_EQ(t.byte_size(), wire.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.data()), t.byte_size()), wire);
  const std::vector<std::string_view> back = t.strings();
  ASSERT_EQ(back.size(), 4u);
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(back[i], values[i]);

  auto parsed = Tensor::FromSerializedBytes({2, 2}, wire);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(parsed->BitwiseEquals(t));
  EXPECT_TRUE(t.Clone().BitwiseEquals(t));
  Tensor empties(DataType::kBytes, {3});
  EXPECT_EQ(empties.strings(), std::vector<std::string_view>(3));
}

TEST(BytesTensorTest, MalformedSerialisationsAreRefused) {
  const std::string two = Serialized({"ab", "c"});
  struct Case {
    const char* what;
    Shape shape;
    std::string bytes;
    const char* mentions;
  } cases[] = {
      {"too few elements", {3}, two, "ends before element 2"},
      {"bytes left over", {1}, two, "bytes after its 1 elements"},
      {"a length past the end", {2}, two.substr(0, two.size() - 1), "claims 1 bytes"},
      {"a cut length", {1}, std::string("\x02\x00", 2), "ends before element 0"},
  };
  for (const Case& c : cases) {
    auto t = Tensor::FromSerializedBytes(c.shape, c.bytes);
    ASSERT_FALSE(t.ok()) << c.what;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(t.status().message().find(c.mentions), std::string::npos) << c.what << ": " << t.status().message();
  }
}

TEST(BytesTensorTest, BatchItemsAndStacksOfStrings) {
  Tensor batch = Tensor::FromStrings({3, 1}, std::vector<std::string>{"a", "bb", ""});
  std::vector<Tensor> items;
  for (int64_t n = 0; n < 3; ++n) items.push_back(BatchItem(batch, n));
  EXPECT_EQ(items[1].strings(), std::vector<std::string_view>{"bb"});
  EXPECT_EQ(items[1].shape(), Shape({1, 1}));
  auto stacked = StackBatch(items);
  ASSERT_TRUE(stacked.ok());
  EXPECT_TRUE(stacked->BitwiseEquals(batch));
}

class StringModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto rt = Runtime::Create();
    ASSERT_TRUE(rt.ok()) << rt.status().ToString();
    runtime_ = std::move(rt).value();
    auto s = runtime_->Load(testing::ModelPath("strings"), {.device = DeviceRequest::Cpu()});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    session_ = *s;
  }
  std::unique_ptr<Runtime> runtime_;
  std::shared_ptr<Session> session_;
};

TEST_F(StringModelTest, TheSignatureSaysBytes) {
  ASSERT_EQ(session_->inputs().size(), 1u);
  EXPECT_EQ(session_->inputs()[0].type, DataType::kBytes);
  EXPECT_EQ(session_->inputs()[0].shape, Shape({-1, -1}));
  EXPECT_EQ(session_->outputs()[0].type, DataType::kBytes);
  EXPECT_EQ(session_->outputs()[1].type, DataType::kInt64);
}

TEST_F(StringModelTest, StringsGoThroughTheRunBoundaryBinarySafe) {
  const std::vector<std::string> text = {"apple", "cherry", "", "banana", "pear", "with\0nul\xff"s};
  for (int round = 0; round < 3; ++round) {  // the second run of a shape would preallocate numeric outputs
    auto out = session_->Run(testing::One("text", Tensor::FromStrings({2, 3}, text)));
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ(out->size(), 2u);
    const Tensor& echo = (*out)[0].tensor;
    EXPECT_EQ(echo.type(), DataType::kBytes);
    EXPECT_EQ(echo.shape(), Shape({2, 3}));
    const std::vector<std::string_view> got = echo.strings();
    ASSERT_EQ(got.size(), text.size());
    for (size_t i = 0; i < text.size(); ++i) EXPECT_EQ(got[i], text[i]) << i;
    const Tensor& id = (*out)[1].tensor;
    EXPECT_EQ(std::vector<int64_t>(id.values<int64_t>().begin(), id.values<int64_t>().end()),
              (std::vector<int64_t>{0, 2, -1, 1, -1, -1}));
  }
}

TEST_F(StringModelTest, WrongTypesAndEmptyTensorsAreHandled) {
  auto wrong = session_->Run(testing::One("text", testing::RandomTensor({1, 2})));
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("must be BYTES, got FP32"), std::string::npos) << wrong.status().message();
  auto empty = session_->Run(testing::One("text", Tensor(DataType::kBytes, {0, 3})));
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ((*empty)[0].tensor.shape(), Shape({0, 3}));
  EXPECT_EQ((*empty)[0].tensor.byte_size(), 0u);
  // Only the numeric output: the string output need not be produced.
  RunFlags flags;
  flags.outputs = {"id"};
  auto id = session_->Run(testing::One("text", Tensor::FromStrings({1, 1}, std::vector<std::string>{"banana"})), flags);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ((*id)[0].tensor.values<int64_t>()[0], 1);
}

// Type names are compared as integers (ParseDataType): every name reads back as its type, and a name
// with anything more, less or else is refused, trailing NULs included (a NUL adds nothing to a key).
TEST(DataTypeNameTest, EveryNameReadsBackAndNearMissesAreRefused) {
  for (int i = 0; i <= static_cast<int>(DataType::kBytes); ++i) {
    const auto type = static_cast<DataType>(i);
    const std::string name = DataTypeName(type);
    EXPECT_EQ(ParseDataType(name), type) << name;
    EXPECT_FALSE(ParseDataType(name + '\0')) << name << " with a NUL";
    EXPECT_FALSE(ParseDataType(name + "\0\0"s)) << name << " with two NULs";
    EXPECT_FALSE(ParseDataType(name.substr(0, name.size() - 1))) << name << " cut short";
    EXPECT_FALSE(ParseDataType(name + "X")) << name << " longer";
  }
  for (const std::string& bad : {""s, "fp32"s, "FP3"s, "\0"s, "FLOAT32"s, "FP32FP32"s, "FP32FP32X"s}) {
    EXPECT_FALSE(ParseDataType(bad)) << bad;
  }
}

}  // namespace
}  // namespace ebb
