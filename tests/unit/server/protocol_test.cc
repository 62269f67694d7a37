// Tests for the KServe v2 / Open Inference Protocol codec (server/protocol.h).
#include "http/protocol.h"

#include <malloc.h>

#include <gtest/gtest.h>

#include <bit>
#include <charconv>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "ebb/memory_stats.h"
#include "http/http_framing.h"
#include "http/json_data.h"
#include "http/rest_api.h"
#include "test_util.h"

namespace ebb::server {
namespace {

using nlohmann::json;

template <typename T>
Tensor Make(DataType type, Shape shape, const std::vector<T>& values) {
  Tensor t(type, std::move(shape));
  EXPECT_EQ(values.size() * sizeof(T), t.byte_size());
  if (t.byte_size() > 0) std::memcpy(t.data(), values.data(), t.byte_size());
  return t;
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  auto span = t.values<T>();
  return {span.begin(), span.end()};
}

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

template <typename T>
std::vector<T> IntegerSamples() {
  using L = std::numeric_limits<T>;
  return {L::min(), L::max(), 0, 1, static_cast<T>(L::max() - 1), 42};
}

// Six or more interesting values of `type`, extremes included.
Tensor Sample(DataType type) {
  switch (type) {
    case DataType::kBool: return Make<uint8_t>(type, {2, 3}, {1, 0, 1, 1, 0, 0});
    case DataType::kUInt8: return Make(type, {2, 3}, IntegerSamples<uint8_t>());
    case DataType::kUInt16: return Make(type, {2, 3}, IntegerSamples<uint16_t>());
    case DataType::kUInt32: return Make(type, {2, 3}, IntegerSamples<uint32_t>());
    case DataType::kUInt64: return Make(type, {2, 3}, IntegerSamples<uint64_t>());
    case DataType::kInt8: return Make(type, {2, 3}, IntegerSamples<int8_t>());
    case DataType::kInt16: return Make(type, {2, 3}, IntegerSamples<int16_t>());
    case DataType::kInt32: return Make(type, {2, 3}, IntegerSamples<int32_t>());
    case DataType::kInt64: return Make(type, {2, 3}, IntegerSamples<int64_t>());
    case DataType::kFloat16:
      return Make<uint16_t>(type, {2, 3}, {0x3c00, 0x7bff, 0x0001, 0x8000, 0x3555, 0xfbff});
    case DataType::kBFloat16:
      return Make<uint16_t>(type, {2, 3}, {0x3f80, 0x7f7f, 0x0001, 0x8000, 0x3eab, 0xff7f});
    case DataType::kFloat32: {
      using L = std::numeric_limits<float>;
      const float tricky = std::bit_cast<float>(uint32_t{0x15ae43fd});  // double-rounding trap
      return Make<float>(type, {2, 4}, {0.1f, -0.0f, L::max(), L::lowest(), L::denorm_min(), tricky, 1 / 3.0f, 1e10f});
    }
    case DataType::kFloat64: {
      using L = std::numeric_limits<double>;
      return Make<double>(type, {2, 3}, {0.1, -0.0, L::max(), L::lowest(), L::denorm_min(), 1 / 3.0});
    }
    case DataType::kBytes: return Tensor::FromStrings({2}, std::vector<std::string>{"a", ""});
  }
  return Tensor();
}

// Encodes `outputs` as the response of model `model`, version `version`.
// The body comes back whole (JSON header and binary outputs, Joined), since the response goes here.
EncodedResponse Encode(const std::string& model, const std::string& version, std::vector<NamedTensor> outputs,
                       const BinaryOutputs& binary = {}, const std::string& id = "") {
  const InferResponse response{model, version, id, std::move(outputs)};
  EncodedResponse encoded = EncodeInferResponse(response, binary);
  encoded.body = encoded.Joined();
  encoded.binary.clear();
  return encoded;
}

// A response's "outputs" entries have the $request_input form, so a response becomes a request by
// renaming the key; numbers keep exactly the text the encoder wrote.
Result<RestInferRequest> ReparseResponse(const EncodedResponse& response) {
  std::string body = response.body;
  const size_t pos = body.find("\"outputs\":[");
  if (pos == std::string::npos) return Internal("no outputs in " + body);
  body.replace(pos, 10, "\"inputs\":");
  std::optional<size_t> header_length = response.header_length;
  if (header_length) *header_length -= 1;
  return ParseInferRequest(body, header_length);
}

// Encodes `tensor` as the only output (as JSON or binary), parses it back as an input.
Tensor RoundTrip(const Tensor& tensor, bool binary) {
  std::vector<NamedTensor> outputs;
  outputs.push_back({"t", tensor.Clone()});
  const EncodedResponse response = Encode("m", "1", std::move(outputs), BinaryOutputs{.all = binary});
  EXPECT_EQ(binary, response.header_length.has_value());
  Result<RestInferRequest> back = ReparseResponse(response);
  EXPECT_TRUE(back.ok()) << back.status().ToString() << "\n" << response.body.substr(0, 400);
  if (!back.ok() || back->request.inputs.size() != 1) return Tensor();
  return std::move(back->request.inputs[0].tensor);
}

Result<RestInferRequest> ParseJson(std::string_view body) { return ParseInferRequest(body, std::nullopt); }

// The JSON header of a response (the whole body when no binary data follows).
json ResponseHeader(const EncodedResponse& r) {
  return json::parse(r.body.substr(0, r.header_length.value_or(r.body.size())), nullptr, false);
}

// ---- Round trips for every datatype ------------------------------------------------------------

class EveryType : public ::testing::TestWithParam<DataType> {};

TEST_P(EveryType, JsonRoundTrip) {
  const Tensor original = Sample(GetParam());
  EXPECT_TRUE(RoundTrip(original, /*binary=*/false).BitwiseEquals(original));
}

TEST_P(EveryType, BinaryRoundTrip) {
  const Tensor original = Sample(GetParam());
  EXPECT_TRUE(RoundTrip(original, /*binary=*/true).BitwiseEquals(original));
}

TEST_P(EveryType, EmptyTensorRoundTrips) {
  const Tensor empty(GetParam(), {0, 3});
  EXPECT_TRUE(RoundTrip(empty, false).BitwiseEquals(empty));
  EXPECT_TRUE(RoundTrip(empty, true).BitwiseEquals(empty));
}

INSTANTIATE_TEST_SUITE_P(Protocol, EveryType,
                         ::testing::Values(DataType::kBool, DataType::kUInt8, DataType::kUInt16, DataType::kUInt32,
                                           DataType::kUInt64, DataType::kInt8, DataType::kInt16, DataType::kInt32,
                                           DataType::kInt64, DataType::kFloat16, DataType::kBFloat16,
                                           DataType::kFloat32, DataType::kFloat64),
                         [](const auto& info) { return std::string(DataTypeName(info.param)); });

TEST(JsonRoundTrip, EveryFinite16BitFloat) {
  for (const DataType type : {DataType::kFloat16, DataType::kBFloat16}) {
    const uint32_t exponent_mask = type == DataType::kFloat16 ? 0x7c00 : 0x7f80;
    std::vector<uint16_t> bits;
    for (uint32_t b = 0; b <= 0xffff; ++b) {
      if ((b & exponent_mask) != exponent_mask) bits.push_back(static_cast<uint16_t>(b));
    }
    const Tensor t = Make(type, {static_cast<int64_t>(bits.size())}, bits);
    EXPECT_TRUE(RoundTrip(t, false).BitwiseEquals(t)) << DataTypeName(type);
  }
}

TEST(JsonRoundTrip, RandomFloat32Values) {
  std::mt19937 rng(1234);
  std::vector<float> values;
  while (values.size() < 200000) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (std::isfinite(f)) values.push_back(f);
  }
  const Tensor t = Make(DataType::kFloat32, {static_cast<int64_t>(values.size())}, values);
  EXPECT_TRUE(RoundTrip(t, false).BitwiseEquals(t));
}

TEST(JsonRoundTrip, NanAndInfinityBecomeNullAndComeBackAsNan) {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor t = Make<float>(DataType::kFloat32, {4}, {std::nanf(""), inf, -inf, 1.0f});
  std::vector<NamedTensor> outputs;
  outputs.push_back({"t", t.Clone()});
  const EncodedResponse response = Encode("m", "", std::move(outputs));
  EXPECT_EQ(ResponseHeader(response)["outputs"][0]["data"].dump(), "[null,null,null,1]");
  const Tensor back = RoundTrip(t, false);
  ASSERT_EQ(back.element_count(), 4);
  EXPECT_TRUE(std::isnan(back.values<float>()[0]));
  EXPECT_TRUE(std::isnan(back.values<float>()[1]));
  EXPECT_TRUE(std::isnan(back.values<float>()[2]));
  EXPECT_EQ(back.values<float>()[3], 1.0f);
}

TEST(JsonEncoding, WritesShortestNumbersAndBooleans) {
  std::vector<NamedTensor> outputs;
  outputs.push_back({"f", Make<float>(DataType::kFloat32, {3}, {0.1f, -0.0f, 2.0f})});
  outputs.push_back({"h", Make<uint16_t>(DataType::kFloat16, {2}, {0x3c00, 0x3555})});
  outputs.push_back({"b", Make<uint8_t>(DataType::kBool, {2}, {1, 0})});
  outputs.push_back({"i", Make<int64_t>(DataType::kInt64, {1}, {std::numeric_limits<int64_t>::min()})});
  const std::string body = Encode("m", "", std::move(outputs)).body;
  EXPECT_NE(body.find("\"data\":[0.1,-0.0,2]"), std::string::npos) << body;
  EXPECT_NE(body.find("\"data\":[1,0.33325195]"), std::string::npos) << body;
  EXPECT_NE(body.find("\"data\":[true,false]"), std::string::npos) << body;
  EXPECT_NE(body.find("\"data\":[-9223372036854775808]"), std::string::npos) << body;
}

// ---- Parsing JSON requests ---------------------------------------------------------------------

TEST(ParseJson, SpecExample) {
  Result<RestInferRequest> r = ParseJson(R"({
    "id": "42",
    "inputs": [
      {"name": "input0", "shape": [2, 2], "datatype": "UINT32", "data": [1, 2, 3, 4]},
      {"name": "input1", "shape": [3], "datatype": "BOOL", "data": [true, false, true]}
    ],
    "outputs": [{"name": "output0"}]
  })");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->request.id, "42");
  ASSERT_EQ(r->request.inputs.size(), 2u);
  EXPECT_EQ(r->request.inputs[0].name, "input0");
  EXPECT_TRUE(r->request.inputs[0].tensor.BitwiseEquals(Make<uint32_t>(DataType::kUInt32, {2, 2}, {1, 2, 3, 4})));
  EXPECT_TRUE(r->request.inputs[1].tensor.BitwiseEquals(Make<uint8_t>(DataType::kBool, {3}, {1, 0, 1})));
  EXPECT_EQ(r->request.outputs, std::vector<std::string>{"output0"});
  EXPECT_TRUE(r->binary.binary.empty());
  EXPECT_FALSE(r->binary.all);
  EXPECT_FALSE(r->request.keep_alive_ms.has_value());
}

// Names, datatypes and shapes in their plain form are read without a JSON tree; escapes, spaces
// and an empty shape take the general way, and both must read the same.
TEST(ParseJson, FieldsWithEscapesAndSpacesReadAsThePlainOnes) {
  Result<RestInferRequest> r = ParseJson(R"({"inputs": [
    {"name": "in\u0070ut0", "shape" : [ 2 ,1 ], "datatype": "F\u005032", "data": [1, 2]},
    {"name":"input1","shape":[],"datatype":"INT64","data":[7]},
    {"name": "", "shape": [0, 3], "datatype": "UINT8", "data": []}
  ]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->request.inputs.size(), 3u);
  EXPECT_EQ(r->request.inputs[0].name, "input0");
  EXPECT_TRUE(r->request.inputs[0].tensor.BitwiseEquals(Make<float>(DataType::kFloat32, {2, 1}, {1, 2})));
  EXPECT_EQ(r->request.inputs[1].name, "input1");
  EXPECT_TRUE(r->request.inputs[1].tensor.BitwiseEquals(Make<int64_t>(DataType::kInt64, {}, {7})));
  EXPECT_EQ(r->request.inputs[2].name, "");
  EXPECT_TRUE(r->request.inputs[2].tensor.BitwiseEquals(Make<uint8_t>(DataType::kUInt8, {0, 3}, {})));
}

TEST(ParseJson, ManyInputsWithDistinctNamesAreAllRead) {
  std::string body = R"({"inputs": [)";
  for (int i = 0; i < 40; ++i) {
    body += std::string(i ? "," : "") + R"({"name": "in)" + std::to_string(i) +
            R"(", "shape": [1], "datatype": "FP32", "data": [)" + std::to_string(i) + "]}";
  }
  body += "]}";
  auto r = ParseJson(body);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->request.inputs.size(), 40u);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(r->request.inputs[i].name, "in" + std::to_string(i));
    EXPECT_EQ(r->request.inputs[i].tensor.values<float>()[0], static_cast<float>(i));
  }
}

TEST(ParseJson, NestedDataIsFlattenedRowMajor) {
  Result<RestInferRequest> r = ParseJson(R"({"inputs": [
    {"name": "a", "shape": [2, 2], "datatype": "INT32", "data": [[1, 2], [3, 4]]},
    {"name": "b", "shape": [2, 2, 1], "datatype": "FP64", "data": [[[1], [2]], [[3], [4]]]},
    {"name": "c", "shape": [], "datatype": "INT8", "data": [-5]},
    {"name": "d", "shape": [2, 0], "datatype": "FP32", "data": [[], []]}
  ]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Values<int32_t>(r->request.inputs[0].tensor), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(Values<double>(r->request.inputs[1].tensor), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(r->request.inputs[1].tensor.shape(), (Shape{2, 2, 1}));
  EXPECT_EQ(Values<int8_t>(r->request.inputs[2].tensor), std::vector<int8_t>{-5});
  EXPECT_TRUE(r->request.inputs[2].tensor.shape().empty());
  EXPECT_EQ(r->request.inputs[3].tensor.byte_size(), 0u);
}

TEST(ParseJson, NumberCoercions) {
  Result<RestInferRequest> r = ParseJson(R"({"inputs": [
    {"name": "i32", "shape": [4], "datatype": "INT32", "data": [2.0, -3.0, 2147483647, -2147483648]},
    {"name": "i64", "shape": [3], "datatype": "INT64",
     "data": [9007199254740992.0, -9223372036854775808, 9223372036854775807]},
    {"name": "u64", "shape": [1], "datatype": "UINT64", "data": [18446744073709551615]},
    {"name": "f32", "shape": [3], "datatype": "FP32", "data": [3, 3.4028235e38, null]},
    {"name": "f64", "shape": [2], "datatype": "FP64", "data": [18446744073709551615, -7]}
  ]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Values<int32_t>(r->request.inputs[0].tensor), (std::vector<int32_t>{2, -3, 2147483647, -2147483647 - 1}));
  EXPECT_EQ(Values<int64_t>(r->request.inputs[1].tensor),
            (std::vector<int64_t>{int64_t{1} << 53, std::numeric_limits<int64_t>::min(),
                                  std::numeric_limits<int64_t>::max()}));
  EXPECT_EQ(Values<uint64_t>(r->request.inputs[2].tensor), std::vector<uint64_t>{std::numeric_limits<uint64_t>::max()});
  const std::vector<float> f32 = Values<float>(r->request.inputs[3].tensor);
  EXPECT_EQ(f32[0], 3.0f);
  EXPECT_EQ(f32[1], std::numeric_limits<float>::max());
  EXPECT_TRUE(std::isnan(f32[2]));
  EXPECT_EQ(Values<double>(r->request.inputs[4].tensor), (std::vector<double>{18446744073709551615.0, -7.0}));
}

// FromCharsDouble (fast_float, answering out-of-range as std::from_chars does) must give
// std::from_chars' value bits, end and error for every text: short decimals, long ones, exponents
// beyond double's range either way, subnormals, and the odd forms.
TEST(ParseJson, FastNumbersReadExactlyAsFromChars) {
  auto same = [](const std::string& s) {
    double a = 1.25, b = 1.25;
    const auto ra = std::from_chars(s.data(), s.data() + s.size(), a);
    const auto rb = ebb::server::FromCharsDouble(s.data(), s.data() + s.size(), b);
    EXPECT_EQ(ra.ptr - s.data(), rb.ptr - s.data()) << s;
    EXPECT_EQ(ra.ec, rb.ec) << s;
    EXPECT_EQ(std::bit_cast<uint64_t>(a), std::bit_cast<uint64_t>(b)) << s;
  };
  for (const char* s : {"0", "-0", "-0.0", "1", "1.", "1.5e", "1.5e+", "1e5x", "1E-5", "0e400", "1e400", "1e-400",
                        "9007199254740992", "9007199254740993", "1234567890123456789", "12345678901234567890",
                        "123456789012345678901234", "0.1", "0.30000000000000004", "1e22", "1e23", "1e-22", "12e-24",
                        "0.5000000000000000000000", "0.00000000000000000000001", "4.9e-324",
                        "1.7976931348623157e308", "-", "-a", "inf", "nan", ".5", "00012", "", "-1e400", "1.8e308",
                        "2.4e-324", "2.5e-324", "1e-320", "-1e-400", "-0e5", "0.000e-999", "000.000", "nan(123)",
                        "infinity", "-inf", "-nan", "+1", "1e+400", "0.0000000000000000000000000001e-300"}) {
    same(s);
  }
  std::mt19937_64 rng(38);
  char buffer[64];
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = static_cast<uint32_t>(rng());
    same(std::string(buffer, std::to_chars(buffer, buffer + sizeof buffer, std::bit_cast<float>(bits)).ptr));
    const double d = std::uniform_real_distribution<double>(-1000, 1000)(rng);
    const int digits = static_cast<int>(rng() % 20);
    same(std::string(buffer, static_cast<size_t>(std::snprintf(buffer, sizeof buffer, "%.*f", digits, d))));
    same(std::string(buffer, static_cast<size_t>(std::snprintf(buffer, sizeof buffer, "%.*e", digits, d * 1e-5))));
    same(std::to_string(rng() % 100000) + "e" + std::to_string(static_cast<int>(rng() % 60) - 30));
  }
}

// The data array's own number reader (a fast path for plain decimals, FromCharsDouble for the rest)
// must give std::from_chars' value bits for every JSON number: plain decimals either side of the
// fast path's limits (19 digits, 2^53), doubles' 17-digit forms, exponents, negative zeros.
TEST(ParseJson, DataArrayNumbersReadExactlyAsFromChars) {
  std::vector<std::string> texts = {"0", "-0", "-0.0", "0.0", "1", "-1", "0.1", "0.30000000000000004",
                                    "9007199254740992", "9007199254740993", "-9007199254740993",
                                    "900719925474099.3", "0.9007199254740993", "1234567890123456789",
                                    "12345678901234567890", "0.0000000000000000000001", "0.00000000000000000000001",
                                    "1.0000000000000000000001", "4.9e-324", "1e22", "1e23", "1.5E+3", "2e-5",
                                    "1.7976931348623157e308", "123456789012345678901234", "0.5000000000000000000000"};
  std::mt19937_64 rng(3838);
  char buffer[64];
  for (int i = 0; i < 100000; ++i) {
    const uint32_t bits = static_cast<uint32_t>(rng()) & 0x7f7fffffu;  // finite floats, either sign
    const auto f = std::bit_cast<float>(bits ^ (static_cast<uint32_t>(rng() & 1) << 31));
    texts.emplace_back(buffer, std::to_chars(buffer, buffer + sizeof buffer, f).ptr);
    const double d = std::uniform_real_distribution<double>(-1000, 1000)(rng) * std::pow(10.0, rng() % 12 - 6.0);
    const int digits = static_cast<int>(rng() % 24);
    texts.emplace_back(buffer, static_cast<size_t>(std::snprintf(buffer, sizeof buffer, "%.*f", digits, d)));
    texts.push_back(std::to_string(rng() >> (rng() % 64)));
    // Doubles' shortest forms (up to 17 digits: beyond 2^53, fast_float's Eisel-Lemire step).
    texts.emplace_back(buffer, std::to_chars(buffer, buffer + sizeof buffer,
                                             std::uniform_real_distribution<double>(-1, 1)(rng)).ptr);
    texts.emplace_back(buffer, std::to_chars(buffer, buffer + sizeof buffer,
                                             std::bit_cast<double>(rng() & 0x7fefffffffffffffu)).ptr);
  }
  std::string array = "[";
  for (const std::string& t : texts) array += (array.size() > 1 ? "," : "") + t;
  array += "]";
  const ebb::server::DataSpec spec{"input \"x\"", DataType::kFloat64, Shape{static_cast<int64_t>(texts.size())},
                                   static_cast<int64_t>(texts.size()), 0};
  size_t end = 0;
  Result<Tensor> decoded = ebb::server::DecodeJsonData(array, spec, &end);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(end, array.size() - 1);
  const auto* values = reinterpret_cast<const double*>(decoded->data());
  for (size_t i = 0; i < texts.size(); ++i) {
    double expected = 0;
    std::from_chars(texts[i].data(), texts[i].data() + texts[i].size(), expected);
    ASSERT_EQ(std::bit_cast<uint64_t>(values[i]), std::bit_cast<uint64_t>(expected)) << texts[i];
  }
}

TEST(ParseJson, SixteenBitFloatsRoundToNearestEven) {
  Result<RestInferRequest> r = ParseJson(R"({"inputs": [
    {"name": "h", "shape": [9], "datatype": "FP16",
     "data": [0.1, 65504, 65519, 2.9802322387695312e-8, 3e-8, 6.103515625e-5, 6.0975551605224609375e-5, -2, -0.0]},
    {"name": "b", "shape": [4], "datatype": "BF16", "data": [1.00390625, 1.01171875, 3.3895313892515355e38, -0.0]}
  ]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Values<uint16_t>(r->request.inputs[0].tensor),
            (std::vector<uint16_t>{0x2e66, 0x7bff, 0x7bff, 0x0000, 0x0001, 0x0400, 0x03ff, 0xc000, 0x8000}));
  EXPECT_EQ(Values<uint16_t>(r->request.inputs[1].tensor), (std::vector<uint16_t>{0x3f80, 0x3f82, 0x7f7f, 0x8000}));
}

TEST(ParseJson, RequestParametersAndOutputs) {
  Result<RestInferRequest> r = ParseJson(R"({
    "model_name": "ignored", "parameters": {"keep_alive": -1500, "binary_data_output": true, "custom": "x"},
    "inputs": [],
    "outputs": [{"name": "a", "parameters": {"binary_data": false}}, {"name": "b"},
                {"name": "c", "parameters": {"binary_data": true, "classification": 3}}]
  })");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->request.keep_alive_ms, -1500);
  EXPECT_TRUE(r->binary.all);
  EXPECT_EQ(r->request.outputs, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(r->binary.binary, std::set<std::string>{"c"});
  EXPECT_EQ(r->binary.json, std::set<std::string>{"a"});
  EXPECT_FALSE(r->binary.Wants("a"));  // binary_data: false overrides binary_data_output
  EXPECT_TRUE(r->binary.Wants("b"));
  EXPECT_TRUE(r->binary.Wants("c"));
  EXPECT_TRUE(r->binary.Wants("unlisted"));
}

TEST(ParseJson, MaxInputElementsIsEnforced) {
  const std::string body = R"({"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "data": [1,2,3,4,5,6]}]})";
  EXPECT_TRUE(ParseInferRequest(body, std::nullopt, ParseOptions{.max_input_elements = 6}).ok());
  Result<RestInferRequest> r = ParseInferRequest(body, std::nullopt, ParseOptions{.max_input_elements = 5});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("more than the limit of 5"), std::string::npos) << r.status().message();
}

TEST(ParseJson, ZeroDimensionWithHugeOtherDimensionIsAnEmptyTensor) {
  Result<RestInferRequest> r =
      ParseJson(R"({"inputs": [{"name": "x", "shape": [0, 1000000000000000000], "datatype": "FP32", "data": []}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->request.inputs[0].tensor.byte_size(), 0u);
}

TEST(ParseJson, BytesAreStringsWithTheirEscapesResolved) {
  Result<RestInferRequest> r = ParseJson(R"({"inputs": [{"name": "t", "shape": [2, 2], "datatype": "BYTES",
      "data": [["apple", ""], ["a\"b\\c\n\u00e9\ud83d\ude00", "nul\u0000in"]]}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Tensor& t = r->request.inputs[0].tensor;
  EXPECT_EQ(t.type(), DataType::kBytes);
  EXPECT_EQ(t.shape(), (Shape{2, 2}));
  const std::vector<std::string_view> got = t.strings();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0], "apple");
  EXPECT_EQ(got[1], "");
  EXPECT_EQ(got[2], "a\"b\\c\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(got[3], std::string_view("nul\0in", 6));
}

TEST(BinaryRequest, BytesAreLengthPrefixed) {
  const std::string elements = Bytes<uint32_t>({3}) + "abc" + Bytes<uint32_t>({0}) + Bytes<uint32_t>({2}) + std::string("\xff\x00", 2);
  const std::string header = R"({"inputs": [{"name": "t", "shape": [3], "datatype": "BYTES",
      "parameters": {"binary_data_size": )" + std::to_string(elements.size()) + "}}]}";
  Result<RestInferRequest> r = ParseInferRequest(header + elements, header.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::vector<std::string_view> got = r->request.inputs[0].tensor.strings();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], "abc");
  EXPECT_EQ(got[1], "");
  EXPECT_EQ(got[2], std::string_view("\xff\x00", 2));
  // One element short of the shape, and a length running past the end: refused, naming the input.
  const std::string short_header = R"({"inputs": [{"name": "t", "shape": [4], "datatype": "BYTES",
      "parameters": {"binary_data_size": )" + std::to_string(elements.size()) + "}}]}";
  Result<RestInferRequest> bad = ParseInferRequest(short_header + elements, short_header.size());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("input \"t\": BYTES data ends before element 3"), std::string::npos)
      << bad.status().message();
  const std::string overrun = Bytes<uint32_t>({9}) + "abc";
  const std::string one_header = R"({"inputs": [{"name": "t", "shape": [1], "datatype": "BYTES",
      "parameters": {"binary_data_size": 7}}]})";
  bad = ParseInferRequest(one_header + overrun, one_header.size());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("claims 9 bytes"), std::string::npos) << bad.status().message();
}

TEST(JsonRoundTrip, BytesComeBackAsTheyWent) {
  std::vector<std::string> values = {"apple", "", "caf\xc3\xa9", "a\"b"};
  std::vector<NamedTensor> outputs;
  outputs.push_back({"t", Tensor::FromStrings({4}, values)});
  for (bool binary : {false, true}) {
    std::vector<NamedTensor> copy;
    copy.push_back({"t", outputs[0].tensor.Clone()});
    Result<RestInferRequest> back = ReparseResponse(Encode("m", "", std::move(copy), BinaryOutputs{.all = binary}));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_TRUE(back->request.inputs[0].tensor.BitwiseEquals(outputs[0].tensor)) << "binary " << binary;
  }
}

// ---- Binary tensor data extension --------------------------------------------------------------

TEST(BinaryRequest, SpecExample) {
  const std::string header = R"({"model_name": "mymodel", "inputs": [
      {"name": "input0", "shape": [2, 2], "datatype": "UINT32", "parameters": {"binary_data_size": 16}},
      {"name": "input1", "shape": [3], "datatype": "BOOL", "parameters": {"binary_data_size": 3}}],
    "outputs": [{"name": "output0", "parameters": {"binary_data": true}}]})";
  const std::string body = header + Bytes<uint32_t>({1, 2, 3, 4}) + Bytes<uint8_t>({1, 0, 1});
  Result<RestInferRequest> r = ParseInferRequest(body, header.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Values<uint32_t>(r->request.inputs[0].tensor), (std::vector<uint32_t>{1, 2, 3, 4}));
  EXPECT_EQ(Values<uint8_t>(r->request.inputs[1].tensor), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(r->binary.binary, std::set<std::string>{"output0"});

  std::vector<NamedTensor> outputs;
  outputs.push_back({"output0", Make<float>(DataType::kFloat32, {3, 2}, {1, 1.1f, 2, 2.1f, 3, 3.1f})});
  const EncodedResponse response = Encode("mymodel", "", std::move(outputs), r->binary);
  ASSERT_TRUE(response.header_length.has_value());
  EXPECT_EQ(response.body.size(), *response.header_length + 24);
  const json j = ResponseHeader(response);
  ASSERT_FALSE(j.is_discarded()) << response.body;
  EXPECT_EQ(j["outputs"][0]["parameters"]["binary_data_size"], 24);
  EXPECT_FALSE(j["outputs"][0].contains("data"));
  EXPECT_EQ(j["outputs"][0]["shape"], json::parse("[3,2]"));
  EXPECT_EQ(response.body.substr(*response.header_length), Bytes<float>({1, 1.1f, 2, 2.1f, 3, 3.1f}));
}

TEST(BinaryRequest, MixedJsonAndBinaryInputs) {
  const std::string header = R"({"inputs": [
      {"name": "a", "shape": [2], "datatype": "INT32", "parameters": {"binary_data_size": 8}},
      {"name": "b", "shape": [2], "datatype": "FP32", "data": [1.5, 2.5]},
      {"name": "c", "shape": [1, 3], "datatype": "FP16", "parameters": {"binary_data_size": 6}},
      {"name": "d", "shape": [0], "datatype": "INT64", "parameters": {"binary_data_size": 0}}]})";
  const std::string body = header + Bytes<int32_t>({7, -8}) + Bytes<uint16_t>({0x3c00, 0xbc00, 0x7c00});
  Result<RestInferRequest> r = ParseInferRequest(body, header.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->request.inputs.size(), 4u);
  EXPECT_EQ(Values<int32_t>(r->request.inputs[0].tensor), (std::vector<int32_t>{7, -8}));
  EXPECT_EQ(Values<float>(r->request.inputs[1].tensor), (std::vector<float>{1.5f, 2.5f}));
  EXPECT_EQ(Values<uint16_t>(r->request.inputs[2].tensor), (std::vector<uint16_t>{0x3c00, 0xbc00, 0x7c00}));
  EXPECT_EQ(r->request.inputs[3].tensor.byte_size(), 0u);
}

// A large input (128 KiB and more) is decoded into a buffer an earlier request's input or output gave
// back, warm, not a fresh mmap that faults in every page on the copy (ebb/tensor.h, OutputBuffers);
// a release frees what is kept, and a buffer taken before a release is not kept after it.
TEST(BinaryRequest, LargeInputsReuseTheBufferTheRequestBeforeGaveBack) {
  detail::OutputBuffers::Drop();
  constexpr int64_t kCount = 64 * 1024;  // 256 KiB of FP32
  const std::string header = R"({"inputs": [{"name": "x", "shape": [1, 65536], "datatype": "FP32",
      "parameters": {"binary_data_size": 262144}}]})";
  std::vector<float> values(kCount);
  for (int64_t i = 0; i < kCount; ++i) values[static_cast<size_t>(i)] = static_cast<float>(i) * 0.25f;
  const std::string body = header + Bytes<float>(values);
  const std::byte* first = nullptr;
  {
    Result<RestInferRequest> r = ParseInferRequest(body, header.size());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(Values<float>(r->request.inputs[0].tensor), values);
    first = r->request.inputs[0].tensor.data();
  }
  EXPECT_EQ(detail::OutputBuffers::kept_bytes(), size_t{kCount} * sizeof(float));
  {
    Result<RestInferRequest> r = ParseInferRequest(body, header.size());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->request.inputs[0].tensor.data(), first);
    EXPECT_EQ(Values<float>(r->request.inputs[0].tensor), values);
    EXPECT_EQ(detail::OutputBuffers::kept_bytes(), 0u);
    detail::OutputBuffers::Drop();  // a release while the request holds its input
  }
  EXPECT_EQ(detail::OutputBuffers::kept_bytes(), 0u);  // freed, not kept past the release

  // The same for a JSON input's decoded numbers.
  json j = {{"inputs", {{{"name", "x"}, {"shape", {1, kCount}}, {"datatype", "FP32"}, {"data", values}}}}};
  const std::string text = j.dump();
  {
    Result<RestInferRequest> r = ParseInferRequest(text, std::nullopt);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(Values<float>(r->request.inputs[0].tensor), values);
    first = r->request.inputs[0].tensor.data();
  }
  {
    Result<RestInferRequest> r = ParseInferRequest(text, std::nullopt);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->request.inputs[0].tensor.data(), first);
  }
  detail::OutputBuffers::Drop();
  EXPECT_EQ(detail::OutputBuffers::kept_bytes(), 0u);
}

// The HTTP front end's path for a large binary input, on its way to the run: its bytes are not
// copied by the decoder (borrow_binary: a view of the body, which the transport read them into) and
// the reply's binary outputs are not copied by the encoder (views of the output tensors, which the
// transport sends from there). Without borrow_binary, and where the bytes are not aligned for their
// type, the input is copied (the only way for a body that does not outlive the request).
TEST(BinaryRequest, BinaryInputsAndOutputsAreViewedNotCopiedOnTheServersPath) {
  constexpr int64_t kCount = 150528;  // [1,3,224,224] FP32, 588 KiB
  const std::string header = R"({"inputs": [{"name": "x", "shape": [1, 3, 224, 224], "datatype": "FP32",
      "parameters": {"binary_data_size": 602112}}], "outputs": [{"name": "x", "parameters": {"binary_data": true}}]})";
  std::vector<float> values(kCount);
  for (int64_t i = 0; i < kCount; ++i) values[static_cast<size_t>(i)] = static_cast<float>(i) * 0.5f;
  // The body with its binary section at `misalign` bytes past a 64-byte boundary (the transport
  // lays it out aligned: misalign 0).
  std::vector<std::byte> storage(header.size() + kCount * sizeof(float) + 128);
  auto place = [&](size_t misalign) {
    const auto base = reinterpret_cast<uintptr_t>(storage.data()) + header.size();
    char* const at = reinterpret_cast<char*>(storage.data()) + (64 - base % 64) % 64 + misalign;
    std::memcpy(at, header.data(), header.size());
    std::memcpy(at + header.size(), values.data(), kCount * sizeof(float));
    return std::string_view(at, header.size() + kCount * sizeof(float));
  };
  const std::string_view body = place(0);

  Result<RestInferRequest> r = ParseInferRequest(body, header.size(), {.borrow_binary = true});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Tensor& input = r->request.inputs[0].tensor;
  EXPECT_TRUE(input.borrowed());
  EXPECT_EQ(reinterpret_cast<const char*>(input.data()), body.data() + header.size());  // no copy
  EXPECT_EQ(Values<float>(input), values);

  InferResponse response{"m", "1", "", {}};
  response.outputs.push_back({"x", input.Clone()});  // a run's output
  const EncodedResponse encoded = EncodeInferResponse(response, r->binary);
  ASSERT_EQ(encoded.binary.size(), 1u);
  EXPECT_EQ(encoded.binary[0].data(), reinterpret_cast<const char*>(response.outputs[0].tensor.data()));  // no copy
  EXPECT_EQ(encoded.binary[0].size(), kCount * sizeof(float));
  EXPECT_EQ(encoded.header_length, encoded.body.size());
  EXPECT_EQ(encoded.Joined(), encoded.body + std::string(body.substr(header.size())));

  // Copied: without borrow_binary, and when the bytes are not aligned for FP32.
  Result<RestInferRequest> copied = ParseInferRequest(body, header.size());
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  EXPECT_FALSE(copied->request.inputs[0].tensor.borrowed());
  Result<RestInferRequest> unaligned = ParseInferRequest(place(1), header.size(), {.borrow_binary = true});
  ASSERT_TRUE(unaligned.ok()) << unaligned.status().ToString();
  EXPECT_FALSE(unaligned->request.inputs[0].tensor.borrowed());
  EXPECT_EQ(Values<float>(unaligned->request.inputs[0].tensor), values);
}

// A connection's framers pass their strings' room on (FramerRoom): each request shows its own target
// and header fields only, never one the request before left there; a room grown large is not kept.
TEST(FramerRoom, EachRequestShowsOnlyItsOwnTargetAndFields) {
  FramerRoom room;
  auto frame = [&](const std::string& request) {
    auto framer = std::make_unique<RequestFramer>(FramingLimits{}, [](size_t) { return true; }, &room);
    size_t used = 0;  // Feed stops at the end of the header, then takes the body
    for (int feeds = 0; feeds < 4 && used < request.size(); ++feeds) {
      used += framer->Feed(std::string_view(request).substr(used));
    }
    EXPECT_EQ(used, request.size());
    EXPECT_EQ(framer->state(), RequestFramer::State::kComplete) << framer->error().message;
    return framer;
  };
  {
    auto first = frame("GET /v2/models/a_long_model_name_here/ready HTTP/1.1\r\nHost: x\r\n"
                       "User-Agent: a-client-with-a-long-name/1.0\r\nAccept: application/json\r\nX-One: 1\r\n\r\n");
    EXPECT_EQ(first->target(), "/v2/models/a_long_model_name_here/ready");
    EXPECT_EQ(first->headers().size(), 4u);
  }
  EXPECT_EQ(room.fields.size(), 4u) << "the strings are left for the next request";
  {
    auto second = frame("GET /v2 HTTP/1.1\r\nHost: y\r\n\r\n");
    EXPECT_EQ(second->target(), "/v2");
    ASSERT_EQ(second->headers().size(), 1u) << "the fields the first request left are not shown";
    EXPECT_EQ(second->headers()[0].first, "Host");
    EXPECT_EQ(second->headers()[0].second, "y");
  }
  {
    const std::string big(FramerRoom::kMaxKeptBytes, 'v');
    auto third = frame("GET /v2 HTTP/1.1\r\nHost: z\r\nX-Big: " + big + "\r\n\r\n");
    ASSERT_EQ(third->headers().size(), 2u);
    EXPECT_EQ(third->headers()[1].second, big);
  }
  EXPECT_TRUE(room.fields.empty()) << "a room grown past kMaxKeptBytes goes with its framer";
  auto fourth = frame("GET /v2/health/live HTTP/1.1\r\nHost: w\r\n\r\n");
  EXPECT_EQ(fourth->target(), "/v2/health/live");
  EXPECT_EQ(fourth->headers().size(), 1u);
  fourth.reset();

  // A small body's buffer goes on to the next request of a size it holds; each shows its own bytes.
  auto post = [](const std::string& body) {
    return "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n\r\n" + body;
  };
  const char* first_body_at = nullptr;
  {
    auto with_body = frame(post(std::string(700, 'a')));
    EXPECT_EQ(with_body->body(), std::string(700, 'a'));
    first_body_at = with_body->body().data();
  }
  EXPECT_GT(room.body.byte_size(), 0u);
  {
    auto shorter = frame(post("{\"b\": 1}"));
    EXPECT_EQ(shorter->body(), "{\"b\": 1}") << "only this request's bytes, none the one before left";
    EXPECT_GE(shorter->body().data(), first_body_at - 64) << "the same buffer";
    EXPECT_LE(shorter->body().data(), first_body_at + 64);
  }
  {
    auto larger = frame(post(std::string(3 * FramerRoom::kMaxKeptBytes, 'c')));
    EXPECT_EQ(larger->body(), std::string(3 * FramerRoom::kMaxKeptBytes, 'c'));
  }
  EXPECT_LE(room.body.byte_size(), FramerRoom::kMaxKeptBytes) << "a large body's buffer is not kept";
}

// The transport's half of that path (RequestFramer, http_framing.h): a body of known length has one
// buffer from its header on, with the byte at Inference-Header-Content-Length 64-byte aligned; what
// came with the header is copied into it once, what is read into body_tail() is not copied at all,
// and the budget is asked for every byte either way.
TEST(BinaryRequest, TheFramerTakesABodyReadIntoItsTailWithoutCopying) {
  const std::string json_part = R"({"inputs":[{"name":"x","shape":[1,65536],"datatype":"FP32","parameters":{"binary_data_size":262144}}]})";
  std::string binary(262144, '\0');
  for (size_t i = 0; i < binary.size(); ++i) binary[i] = static_cast<char>(i * 7);
  const std::string body = json_part + binary;
  const std::string head = "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
                           "\r\nInference-Header-Content-Length: " + std::to_string(json_part.size()) + "\r\n\r\n";
  size_t reserved = 0;
  RequestFramer framer(FramingLimits{}, [&](size_t n) { reserved += n; return true; });
  constexpr size_t kWithHeader = 1000;  // body bytes that arrive with the header, in the read buffer
  const std::string first = head + body.substr(0, kWithHeader);
  const size_t header_used = framer.Feed(first);  // stops at the header's end, as documented
  ASSERT_EQ(header_used, head.size());
  EXPECT_EQ(framer.body_tail().size(), body.size());  // ready before any body byte came
  ASSERT_EQ(framer.Feed(std::string_view(first).substr(header_used)), kWithHeader);
  ASSERT_EQ(framer.state(), RequestFramer::State::kBody);
  EXPECT_EQ(framer.copied_bytes(), kWithHeader);
  size_t at = kWithHeader;
  while (framer.state() == RequestFramer::State::kBody) {  // reads of 4 KiB straight into the tail
    const std::span<char> tail = framer.body_tail();
    ASSERT_EQ(tail.size(), body.size() - at);
    const size_t n = std::min<size_t>(tail.size(), 4096);
    std::memcpy(tail.data(), body.data() + at, n);  // what the socket's read does
    ASSERT_EQ(framer.Feed({tail.data(), n}), n);
    at += n;
  }
  ASSERT_EQ(framer.state(), RequestFramer::State::kComplete);
  EXPECT_EQ(framer.copied_bytes(), kWithHeader);  // nothing more was copied
  EXPECT_EQ(reserved, body.size());
  EXPECT_EQ(framer.reserved_bytes(), body.size());
  ASSERT_EQ(framer.body(), body);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(framer.body().data() + json_part.size()) % 64, 0u);
  // And the decoder uses the input where it lies: no copy on the way to the run.
  Result<RestInferRequest> r = ParseInferRequest(framer.body(), json_part.size(), {.borrow_binary = true});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(reinterpret_cast<const char*>(r->request.inputs[0].tensor.data()), framer.body().data() + json_part.size());

  // A chunked body has no tail: it grows as it comes, copied.
  RequestFramer chunked(FramingLimits{});
  std::string_view rest = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
  rest.remove_prefix(chunked.Feed(rest));
  ASSERT_EQ(chunked.state(), RequestFramer::State::kBody);
  EXPECT_TRUE(chunked.body_tail().empty());
  while (chunked.state() == RequestFramer::State::kBody && !rest.empty()) rest.remove_prefix(chunked.Feed(rest));
  ASSERT_EQ(chunked.state(), RequestFramer::State::kComplete);
  EXPECT_EQ(chunked.body(), "hello");
  EXPECT_EQ(chunked.copied_bytes(), 5u);
}

TEST(BinaryRequest, HeaderLengthEqualToBodyMeansNoBinaryData) {
  const std::string body = R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}]})";
  EXPECT_TRUE(ParseInferRequest(body, body.size()).ok());
}

TEST(BinaryResponse, PerOutputChoiceAndLayout) {
  BinaryOutputs binary;
  binary.binary = {"a", "c"};
  std::vector<NamedTensor> outputs;
  outputs.push_back({"a", Make<int64_t>(DataType::kInt64, {2}, {5, -6})});
  outputs.push_back({"b", Make<float>(DataType::kFloat32, {1}, {0.5f})});
  outputs.push_back({"c", Make<uint8_t>(DataType::kBool, {3}, {0, 1, 1})});
  const EncodedResponse response = Encode("m", "3", std::move(outputs), binary, "req-7");
  ASSERT_TRUE(response.header_length.has_value());
  const json j = ResponseHeader(response);
  ASSERT_FALSE(j.is_discarded()) << response.body;
  EXPECT_EQ(j["model_name"], "m");
  EXPECT_EQ(j["model_version"], "3");
  EXPECT_EQ(j["id"], "req-7");
  ASSERT_EQ(j["outputs"].size(), 3u);
  EXPECT_EQ(j["outputs"][0]["parameters"]["binary_data_size"], 16);
  EXPECT_EQ(j["outputs"][1]["data"], json::parse("[0.5]"));
  EXPECT_FALSE(j["outputs"][1].contains("parameters"));
  EXPECT_EQ(j["outputs"][2]["parameters"]["binary_data_size"], 3);
  EXPECT_EQ(j["outputs"][2]["datatype"], "BOOL");
  EXPECT_EQ(response.body.substr(*response.header_length), Bytes<int64_t>({5, -6}) + Bytes<uint8_t>({0, 1, 1}));
}

TEST(BinaryResponse, AllBinaryWithJsonOverride) {
  BinaryOutputs binary;
  binary.all = true;
  binary.json = {"b"};
  std::vector<NamedTensor> outputs;
  outputs.push_back({"a", Make<int32_t>(DataType::kInt32, {1}, {9})});
  outputs.push_back({"b", Make<int32_t>(DataType::kInt32, {1}, {10})});
  const EncodedResponse response = Encode("m", "", std::move(outputs), binary);
  ASSERT_TRUE(response.header_length.has_value());
  const json j = ResponseHeader(response);
  EXPECT_EQ(j["outputs"][0]["parameters"]["binary_data_size"], 4);
  EXPECT_EQ(j["outputs"][1]["data"], json::parse("[10]"));
  EXPECT_EQ(response.body.substr(*response.header_length), Bytes<int32_t>({9}));
}

TEST(JsonResponse, NoBinaryMeansNoHeaderLengthAndOptionalFieldsOmitted) {
  std::vector<NamedTensor> outputs;
  outputs.push_back({"y", Make<double>(DataType::kFloat64, {1, 1}, {2.5})});
  const EncodedResponse response = Encode("m\"x", "", std::move(outputs));
  EXPECT_FALSE(response.header_length.has_value());
  const json j = json::parse(response.body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << response.body;
  EXPECT_EQ(j["model_name"], "m\"x");
  EXPECT_FALSE(j.contains("model_version"));
  EXPECT_FALSE(j.contains("id"));
  EXPECT_EQ(j["outputs"][0], json::parse(R"({"name":"y","shape":[1,1],"datatype":"FP64","data":[2.5]})"));
}

// FP32 outputs are written as std::to_chars writes the float (shortest digits, the shorter of fixed
// and scientific), or as the double when a double reader would not get the float back: the same
// characters as before the writer was our own (Dragonbox's digits), for every kind of float.
TEST(JsonResponse, Float32ElementsAreWhatToCharsWrites) {
  std::vector<float> values = {1e-45f, 1.17549435e-38f, 3.4028235e38f, 7.038531e-26f, 123456792.f, 16777216.f,
                               1e-5f, 1e-4f, 0.001f, 1e5f, 1e6f, 1e14f, 1e15f, 1e16f, 0.1f, 1.5f, 10.f, 100.f,
                               9999999.f, 12345678.f, -0.3f, 1e38f, 2.5e-7f, 0.5f};
  std::mt19937 rng(3801);
  for (int i = 0; i < 200000; ++i) values.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  for (int i = -45; i <= 38; ++i) values.push_back(std::pow(10.0f, static_cast<float>(i)));
  for (uint32_t i = 1; i < 100000; i += 7) values.push_back(static_cast<float>(i) * 1024.f);
  // Fixed forms (0.000ddd, ddd.ddd): every bit pattern from 1e-6 to 1e8 in steps, and i/64 (tiny's outputs).
  const uint32_t small = std::bit_cast<uint32_t>(1e-6f), large = std::bit_cast<uint32_t>(1e8f);
  for (uint32_t bits = small; bits < large; bits += 9973) values.push_back(std::bit_cast<float>(bits));
  for (int i = -256; i <= 256; ++i) values.push_back(static_cast<float>(i) / 64);
  std::vector<NamedTensor> outputs;
  outputs.push_back({"y", Make<float>(DataType::kFloat32, {static_cast<int64_t>(values.size())}, values)});
  const EncodedResponse response = Encode("m", "", std::move(outputs));
  const size_t open = response.body.find("\"data\":[");
  ASSERT_NE(open, std::string::npos);
  std::string_view data(response.body);
  data = data.substr(open + 8, data.find(']', open) - open - 8);
  char buffer[64];
  for (const float v : values) {
    std::string expected;
    if (!std::isfinite(v)) {
      expected = "null";
    } else if (v == 0) {
      expected = std::signbit(v) ? "-0.0" : "0";
    } else {
      expected.assign(buffer, std::to_chars(buffer, buffer + sizeof buffer, v).ptr);
      double read = 0;
      std::from_chars(expected.data(), expected.data() + expected.size(), read);
      if (static_cast<float>(read) != v) {
        expected.assign(buffer, std::to_chars(buffer, buffer + sizeof buffer, static_cast<double>(v)).ptr);
      }
    }
    const size_t comma = data.find(',');
    ASSERT_EQ(data.substr(0, comma), expected) << std::bit_cast<uint32_t>(v);
    data = comma == std::string_view::npos ? std::string_view() : data.substr(comma + 1);
  }
  EXPECT_TRUE(data.empty());
}

TEST(EncodeError, EscapesAndReplacesInvalidUtf8) {
  EXPECT_EQ(EncodeError("bad \"input\"\n"), R"({"error":"bad \"input\"\n"})");
  const json j = json::parse(EncodeError("x\xff"), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["error"], "x\xEF\xBF\xBD");
}

TEST(HeaderContentLength, ParsesDigitsOnly) {
  EXPECT_EQ(ParseHeaderContentLength("123").value(), 123u);
  EXPECT_EQ(ParseHeaderContentLength(" 0\t").value(), 0u);
  for (const char* bad : {"", " ", "-1", "+1", "12a", "1 2", "0x10", "99999999999999999999999"}) {
    EXPECT_FALSE(ParseHeaderContentLength(bad).ok()) << bad;
  }
}

// ---- Bad requests ------------------------------------------------------------------------------

struct BadRequest {
  std::string name;
  std::string body;
  std::optional<size_t> header_length;
  std::string fragment;  // expected in the error message
};

std::ostream& operator<<(std::ostream& os, const BadRequest& b) { return os << b.name; }

BadRequest Json(std::string name, std::string body, std::string fragment) {
  return {std::move(name), std::move(body), std::nullopt, std::move(fragment)};
}

// A body of `header` followed by `binary`, with the header length set.
BadRequest Binary(std::string name, std::string header, const std::string& binary, std::string fragment) {
  const size_t length = header.size();
  return {std::move(name), header + binary, length, std::move(fragment)};
}

// One input "x" with the given members (a JSON fragment).
std::string OneInput(const std::string& members) { return R"({"inputs": [{"name": "x", )" + members + "}]}"; }

// `count` FP32 inputs "in0", "in1", ..., the last one named as input `same_as` is.
std::string InputsWithOneNameTwice(int count, int same_as) {
  std::string body = R"({"inputs": [)";
  for (int i = 0; i < count; ++i) {
    const int n = i == count - 1 ? same_as : i;
    body += std::string(i ? "," : "") + R"({"name": "in)" + std::to_string(n) +
            R"(", "shape": [1], "datatype": "FP32", "data": [1]})";
  }
  return body + "]}";
}

std::vector<BadRequest> BadRequests() {
  const std::string fp32x2 = R"("shape": [2], "datatype": "FP32", )";
  std::string long_shape = "[0";  // 70,001 bytes of dimensions
  for (int i = 0; i < 35000; ++i) long_shape += ",0";
  long_shape += "]";
  return {
      Json("Empty", "", "not valid JSON"),
      Json("Truncated", "{\"inputs\": [", "not valid JSON"),
      Json("InvalidUtf8", "{\"id\": \"\xff\", \"inputs\": []}", "not valid JSON"),
      Json("OverflowingLiteral", OneInput(fp32x2 + R"("data": [1e400, 1])"),
           "element 0 is 1e400, but FP32 needs a number within FP32 range"),
      Json("NumberSyntaxInData", OneInput(fp32x2 + R"("data": [1, 01])"), "'data' is not valid JSON"),
      Json("TrailingCommaInData", OneInput(fp32x2 + R"("data": [1, 2,])"), "'data' is not valid JSON"),
      Json("UnclosedData", OneInput(fp32x2 + R"("data": [1, 2)"), "not valid JSON"),
      Json("DuplicateRequestKey", R"({"inputs": [], "inputs": []})", "'inputs' is given twice"),
      Json("DuplicateInputKey", OneInput(fp32x2 + R"("data": [1, 2], "shape": [2])"), "'shape' is given twice"),
      // Fuzzer finding: a UTF-8 lead byte at the very end made the in-situ copy write past the text.
      Json("Utf8LeadByteAtTheEnd", "{\"inputs\": [], \"a\xf0", "not valid JSON"),
      Json("NulAfterTheObject", std::string(R"({"inputs": []})") + std::string(1, '\0') + "x", "a NUL byte"),
      Json("ObjectInDataWhenDataComesFirst",
           R"({"inputs": [{"data": [1, {"a": [1, 2]}], "name": "x", "shape": [2], "datatype": "INT8"}]})",
           "input \"x\": element 1 is {\"a\":[1,2]}, but INT8 needs"),
      Json("DataNotArrayWhenFirst", R"({"inputs": [{"data": 3, "name": "x", "shape": [1], "datatype": "INT8"}]})",
           "input \"x\": 'data' must be an array"),
      Json("LongStringElementIsCut", OneInput(fp32x2 + R"("data": [1, ")" + std::string(100, 'z') + R"("])"),
           "element 1 is \"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz..., but FP32"),
      Json("ShapeLongerThanFieldLimit", OneInput(R"("datatype": "FP32", "data": [], "shape": )" + long_shape),
           "input \"x\": 'shape' is longer than the limit of 65536 bytes"),
      Json("KeepAliveBeyondAYear", R"({"parameters": {"keep_alive": 9223372036854775807}, "inputs": []})",
           "keep_alive must be an integer (milliseconds) of at most 31536000000"),
      Json("KeepAliveHugeFloat", R"({"parameters": {"keep_alive": 1e13}, "inputs": []})",
           "keep_alive must be an integer (milliseconds) of at most"),
      Json("NotAnObject", "[1]", "must be a JSON object"),
      Json("NoInputs", "{}", "no 'inputs'"),
      Json("InputsNotArray", R"({"inputs": {}})", "'inputs' must be an array"),
      Json("InputNotObject", R"({"inputs": [1]})", "inputs[0] must be an object"),
      Json("MissingName", R"({"inputs": [{"shape": [1]}]})", "inputs[0]: missing 'name'"),
      Json("NameNotString", R"({"inputs": [{"name": 5}]})", "inputs[0]: 'name' must be a string"),
      Json("MissingDatatype", OneInput(R"("shape": [1], "data": [1])"), "input \"x\": missing 'datatype'"),
      Json("DatatypeNotString", OneInput(R"("shape": [1], "datatype": 1, "data": [1])"), "'datatype' must be a string"),
      Json("UnknownDatatype", OneInput(R"("shape": [1], "datatype": "FLOAT32", "data": [1])"),
           "input \"x\": unknown datatype \"FLOAT32\""),
      Json("BytesNotAString", OneInput(R"("shape": [2], "datatype": "BYTES", "data": ["a", 7])"),
           "input \"x\": element 1 is 7, but BYTES needs a string"),
      Json("BytesBadEscape", OneInput(R"("shape": [1], "datatype": "BYTES", "data": ["a\q"])"), "element 0 is"),
      Json("BytesLoneSurrogate", OneInput(R"("shape": [1], "datatype": "BYTES", "data": ["\ud800x"])"),
           "with valid escapes"),
      Json("BytesCount", OneInput(R"("shape": [3], "datatype": "BYTES", "data": ["a", "b"])"),
           "'data' has 2 elements but shape [3] needs 3"),
      Json("MissingShape", OneInput(R"("datatype": "FP32", "data": [1])"), "input \"x\": missing 'shape'"),
      Json("ShapeNotArray", OneInput(R"("shape": 3, "datatype": "FP32", "data": [1])"), "'shape' must be an array"),
      Json("ShapeString", OneInput(R"("shape": ["2"], "datatype": "FP32", "data": [1])"), "non-negative integers"),
      Json("ShapeFraction", OneInput(R"("shape": [2.5], "datatype": "FP32", "data": [1])"), "non-negative integers"),
      Json("NegativeDim", OneInput(R"("shape": [2, -1], "datatype": "FP32", "data": [1])"), "negative dimension -1"),
      Json("DimAboveInt64", OneInput(R"("shape": [18446744073709551615], "datatype": "FP32", "data": [])"),
           "dimension 18446744073709551615 is too large"),
      Json("ShapeOverflow", OneInput(R"("shape": [1000000000000, 1000000000000], "datatype": "FP32", "data": [])"),
           "shape [1000000000000,1000000000000] is too large"),
      Json("ShapeOverflowBeforeZero",
           OneInput(R"("shape": [1000000000000, 1000000000000, 0], "datatype": "INT8", "data": [])"), "too large"),
      Json("ByteSizeOverflow", OneInput(R"("shape": [4611686018427387904], "datatype": "FP64", "data": [])"),
           "too large"),
      Json("DataAndBinary", OneInput(fp32x2 + R"("data": [1, 2], "parameters": {"binary_data_size": 8})"),
           "input \"x\": has both 'data' and parameters.binary_data_size"),
      Json("NeitherDataNorBinary", OneInput(R"("shape": [2], "datatype": "FP32")"), "has neither 'data' nor"),
      Json("DataNotArray", OneInput(fp32x2 + R"("data": 5)"), "'data' must be an array"),
      Json("TooFewElements", OneInput(R"("shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3])"),
           "input \"x\": 'data' has 3 elements but shape [2,2] needs 4"),
      Json("TooManyElements", OneInput(fp32x2 + R"("data": [1, 2, 3])"), "'data' has 3 elements but shape [2] needs 2"),
      Json("RaggedNested", OneInput(R"("shape": [2, 2], "datatype": "FP32", "data": [[1, 2], [3]])"),
           "'data' has 3 elements"),
      Json("TooDeep", OneInput(R"("shape": [1], "datatype": "FP32", "data": )" + std::string(100, '[') + "1" +
                               std::string(100, ']')),
           "nested more than 64 levels"),
      Json("Uint8Overflow", OneInput(R"("shape": [2], "datatype": "UINT8", "data": [1, 300])"),
           "input \"x\": element 1 is 300, but UINT8 needs an integer in [0, 255]"),
      Json("Int8Underflow", OneInput(R"("shape": [1], "datatype": "INT8", "data": [-129])"), "[-128, 127]"),
      Json("Int32Fraction", OneInput(R"("shape": [2], "datatype": "INT32", "data": [1, 1.5])"), "element 1 is 1.5"),
      Json("Int64TooBig", OneInput(R"("shape": [1], "datatype": "INT64", "data": [9223372036854775808])"),
           "INT64 needs an integer"),
      Json("Int64InexactFloat", OneInput(R"("shape": [1], "datatype": "INT64", "data": [9007199254740994.0])"),
           "INT64 needs an integer"),
      Json("Uint64Negative", OneInput(R"("shape": [1], "datatype": "UINT64", "data": [-1])"), "element 0 is -1"),
      Json("IntFromString", OneInput(R"("shape": [1], "datatype": "INT32", "data": ["7"])"), "element 0 is \"7\""),
      Json("IntFromBool", OneInput(R"("shape": [1], "datatype": "INT16", "data": [true])"), "INT16 needs"),
      Json("FloatFromString", OneInput(fp32x2 + R"("data": [1, "abc"])"),
           "element 1 is \"abc\", but FP32 needs a number"),
      Json("Fp32OutOfRange", OneInput(fp32x2 + R"("data": [1, 3.40282357e38])"), "within FP32 range"),
      Json("Fp16OutOfRange", OneInput(R"("shape": [1], "datatype": "FP16", "data": [65520])"), "within FP16 range"),
      Json("Bf16OutOfRange", OneInput(R"("shape": [1], "datatype": "BF16", "data": [3.4e38])"), "within BF16 range"),
      Json("Fp64FromBool", OneInput(R"("shape": [1], "datatype": "FP64", "data": [false])"), "FP64 needs a number"),
      Json("Fp64FromObject", OneInput(R"("shape": [2], "datatype": "FP64", "data": [[1], {"a": 1}])"),
           "element 1 is {\"a\":1}"),
      Json("BoolFromNumber", OneInput(R"("shape": [1], "datatype": "BOOL", "data": [1])"),
           "BOOL needs true or false"),
      Json("DuplicateInput",
           R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]},
                          {"name": "x", "shape": [1], "datatype": "FP32", "data": [2]}]})",
           "duplicate input name \"x\""),
      // Among a few inputs the names read so far are looked through; from the eighth on, a set holds them.
      Json("DuplicateInputAmongFew", InputsWithOneNameTwice(4, 1), "duplicate input name \"in1\""),
      Json("DuplicateInputAtTheEighth", InputsWithOneNameTwice(8, 0), "duplicate input name \"in0\""),
      Json("DuplicateInputAtTheNinth", InputsWithOneNameTwice(9, 7), "duplicate input name \"in7\""),
      Json("DuplicateInputAmongMany", InputsWithOneNameTwice(40, 20), "duplicate input name \"in20\""),
      Json("InputParametersNotObject", OneInput(fp32x2 + R"("data": [1, 2], "parameters": 3)"),
           "input \"x\": 'parameters' must be an object"),
      Json("BinarySizeNotInteger", OneInput(fp32x2 + R"("parameters": {"binary_data_size": "8"})"),
           "binary_data_size must be a non-negative integer"),
      Json("BinarySizeNegative", OneInput(fp32x2 + R"("parameters": {"binary_data_size": -8})"),
           "binary_data_size must be a non-negative integer"),
      Json("BinaryWithoutHeaderLength", OneInput(fp32x2 + R"("parameters": {"binary_data_size": 8})"),
           "no Inference-Header-Content-Length was given"),
      Binary("BinarySizeMismatch", OneInput(fp32x2 + R"("parameters": {"binary_data_size": 4})"), "abcd",
             "input \"x\": parameters.binary_data_size is 4 but shape [2] of FP32 needs 8 bytes"),
      Binary("BinaryTooShort", OneInput(fp32x2 + R"("parameters": {"binary_data_size": 8})"), "abcd",
             "input \"x\": binary data needs 8 bytes but only 4 remain"),
      Binary("BinaryTrailing", OneInput(fp32x2 + R"("parameters": {"binary_data_size": 8})"), "abcdefghijk",
             "3 trailing bytes"),
      Binary("TrailingWithoutBinaryInputs", OneInput(fp32x2 + R"("data": [1, 2])"), "zz", "2 trailing bytes"),
      Binary("BinaryBoolNotZeroOrOne",
             OneInput(R"("shape": [2], "datatype": "BOOL", "parameters": {"binary_data_size": 2})"),
             std::string("\x01\x02", 2), "BOOL element 1 is byte 2"),
      {"HeaderLengthBeyondBody", R"({"inputs": []})", 100, "is 100 but the body has only 14 bytes"},
      {"HeaderLengthCutsJson", R"({"inputs": []})", 5, "(the first 5 bytes of the body) is not valid JSON"},
      Json("IdNotString", R"({"id": 42, "inputs": []})", "'id' must be a string"),
      Json("RequestParametersNotObject", R"({"parameters": [], "inputs": []})", "'parameters' must be an object"),
      Json("BinaryDataOutputNotBool", R"({"parameters": {"binary_data_output": 1}, "inputs": []})",
           "binary_data_output must be true or false"),
      Json("KeepAliveNotInteger", R"({"parameters": {"keep_alive": "10"}, "inputs": []})",
           "keep_alive must be an integer"),
      Json("KeepAliveFraction", R"({"parameters": {"keep_alive": 1.5}, "inputs": []})",
           "keep_alive must be an integer"),
      Json("OutputsNotArray", R"({"inputs": [], "outputs": {}})", "'outputs' must be an array"),
      Json("OutputNotObject", R"({"inputs": [], "outputs": ["y"]})", "outputs[0] must be an object"),
      Json("OutputWithoutName", R"({"inputs": [], "outputs": [{}]})", "outputs[0]: missing 'name'"),
      Json("OutputBinaryNotBool",
           R"({"inputs": [], "outputs": [{"name": "y", "parameters": {"binary_data": "true"}}]})",
           "output \"y\": parameters.binary_data must be true or false"),
      Json("OutputTwice", R"({"inputs": [], "outputs": [{"name": "y"}, {"name": "y"}]})",
           "output \"y\" is requested twice"),
  };
}

class BadRequestTest : public ::testing::TestWithParam<BadRequest> {};

TEST_P(BadRequestTest, IsRefusedWithAClearMessage) {
  const BadRequest& bad = GetParam();
  Result<RestInferRequest> r = ParseInferRequest(bad.body, bad.header_length);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(bad.fragment), std::string::npos)
      << "message: " << r.status().message() << "\nexpected: " << bad.fragment;
}

INSTANTIATE_TEST_SUITE_P(Protocol, BadRequestTest, ::testing::ValuesIn(BadRequests()),
                         [](const auto& info) { return info.param.name; });

// ---- Hostile input (issue 9) ------------------------------------------------------------------


// Growth of this process's RSS high-water mark while `f` runs.
template <typename F>
int64_t PeakRssGrowth(F f) {
  malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";
  const int64_t before = ReadRssBytes();
  f();
  return ReadPeakRssBytes() - before;
}

TEST(HostileInput, DeepNestingAnywhereIsRefusedWithoutRecursion) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"id":)" + deep + R"(,"inputs":[]})", "nested more than 32 levels deep"},
      {R"({"model_name":)" + deep + R"(,"inputs":[]})", "nested more than 32 levels deep"},
      {R"({"parameters":{"a":)" + deep + R"(},"inputs":[]})", "nested more than 32 levels deep"},
      {R"({"inputs":[],"outputs":)" + deep + "}", "nested more than 32 levels deep"},
      {R"({"inputs":[{"name":"x","parameters":)" + deep + "}]}", "nested more than 32 levels deep"},
      {R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":)" + deep + "}]}",
       "input \"x\": 'data' is nested more than 64 levels deep"},
      {R"({"inputs":[{"data":)" + deep + R"(,"name":"x","shape":[1],"datatype":"FP32"}]})",
       "inputs[0]: 'data' is nested more than 64 levels deep"},
      {R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1, {"a":)" + deep + "}]}]}",
       "input \"x\": element 1 is {\"a\":" + std::string(35, '[') + "..."},
  };
  for (const auto& [body, fragment] : cases) {
    Result<RestInferRequest> r = ParseJson(body);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
  }
}

TEST(HostileInput, DataMayComeBeforeItsShapeAndDatatype) {
  Result<RestInferRequest> r = ParseJson(R"({"inputs": [
    {"data": [[1, 2], [3, 4]], "shape": [2, 2], "name": "a", "datatype": "INT32"},
    {"name": "b", "data": [1.5, null], "datatype": "FP16", "shape": [2]}
  ]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Values<int32_t>(r->request.inputs[0].tensor), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(Values<uint16_t>(r->request.inputs[1].tensor)[0], 0x3e00);
}

TEST(HostileInput, MemoryIsBoundedByTheBody) {
  if (!testing::kRssBoundsHold) GTEST_SKIP() << testing::kNoRssBounds;
  const std::string brackets = R"({"id":)" + std::string(20'000'000, '[');
  std::string unused = R"({"unused":[0)";
  while (unused.size() < 20'000'000) unused += ",0";
  unused += R"(],"inputs":[]})";
  const std::string huge_shape = R"({"inputs":[{"name":"x","shape":[1000000000],"datatype":"FP64","data":[1]}]})";
  // Before: ~90 bytes of tree per body byte (1.8 GB for the 20 MB array), 8 GB for the shape. Now:
  // one copy of the JSON text (RapidJSON reads it in situ) and small buffers.
  const auto bound = [](const std::string& body) { return static_cast<int64_t>(body.size()) + 8 * testing::kMiB; };
  EXPECT_LT(PeakRssGrowth([&] { EXPECT_FALSE(ParseJson(brackets).ok()); }), bound(brackets));
  EXPECT_LT(PeakRssGrowth([&] { EXPECT_TRUE(ParseJson(unused).ok()); }), bound(unused));
  EXPECT_LT(PeakRssGrowth([&] { EXPECT_FALSE(ParseJson(huge_shape).ok()); }), 8 * testing::kMiB);
}

TEST(HostileInput, ExcerptsAreShortAndFlat) {
  EXPECT_EQ(JsonExcerpt("300, 4]"), "300");
  EXPECT_EQ(JsonExcerpt(R"("7"])"), R"("7")");
  EXPECT_EQ(JsonExcerpt(R"({"a": [1, 2]}, 3])"), R"({"a":[1,2]})");
  EXPECT_EQ(JsonExcerpt(R"("a\"b", 1)"), R"("a\"b")");
  EXPECT_EQ(JsonExcerpt(std::string(1000, '{')), std::string(40, '{') + "...");
}

// ---- Never crash -------------------------------------------------------------------------------

void ExpectParsesOrRefuses(std::string_view body, std::optional<size_t> header_length) {
  Result<RestInferRequest> r = ParseInferRequest(body, header_length);
  if (!r.ok()) {
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_FALSE(r.status().message().empty());
  }
}

TEST(Fuzz, TruncationsAndByteMutationsNeverCrash) {
  const std::string header = R"({"id":"q","parameters":{"keep_alive":5},"inputs":[
      {"name":"a","shape":[2,2],"datatype":"INT16","parameters":{"binary_data_size":8}},
      {"name":"b","shape":[1,3],"datatype":"FP16","data":[[1,-2.5,null]]},
      {"name":"c","shape":[2],"datatype":"BOOL","parameters":{"binary_data_size":2}}],
      "outputs":[{"name":"y","parameters":{"binary_data":true}}]})";
  const std::string valid = header + Bytes<int16_t>({1, 2, 3, 4}) + Bytes<uint8_t>({1, 0});
  ASSERT_TRUE(ParseInferRequest(valid, header.size()).ok());
  for (size_t n = 0; n <= valid.size(); ++n) {
    ExpectParsesOrRefuses(std::string_view(valid).substr(0, n), header.size());
    ExpectParsesOrRefuses(std::string_view(valid).substr(0, n), std::nullopt);
    ExpectParsesOrRefuses(valid, n);
  }
  const std::string replacements = std::string("\"[]{}-9e,: \xff", 13) + std::string(1, '\0');
  for (size_t i = 0; i < valid.size(); ++i) {
    for (const char c : replacements) {
      std::string mutated = valid;
      mutated[i] = c;
      ExpectParsesOrRefuses(mutated, header.size());
    }
  }
  std::mt19937 rng(99);
  for (int round = 0; round < 2000; ++round) {
    std::string mutated = valid;
    for (int k = 0; k < 4; ++k) mutated[rng() % mutated.size()] = static_cast<char>(rng());
    ExpectParsesOrRefuses(mutated, rng() % 2 ? std::optional<size_t>(header.size()) : std::nullopt);
  }
}

}  // namespace
}  // namespace ebb::server


namespace ebb::server {
namespace {
// Routes are found from the target's segments as views, each percent-decoded only where it has a
// '%'; a decoded '/' stays inside its segment, and a path with more segments than any endpoint
// matches none.
TEST(RestRouteTest, SegmentsArePercentDecodedOneByOne) {
  auto find = [](std::string_view method, std::string_view target) {
    return RestApi::Find(HttpRequest{method, target, {}, {}});
  };
  RestApi::Route r = find("POST", "/v2/models/tiny/infer");
  EXPECT_EQ(r.endpoint, RestApi::Endpoint::kInfer);
  EXPECT_EQ(r.model, "tiny");
  EXPECT_EQ(r.version, "");
  r = find("POST", "/v2/models/t%69ny/versions/%31/infer?x=1");
  EXPECT_EQ(r.endpoint, RestApi::Endpoint::kInfer);
  EXPECT_EQ(r.model, "tiny");
  EXPECT_EQ(r.version, "1");
  r = find("GET", "/v2/models/a%2Fb/ready/");
  EXPECT_EQ(r.endpoint, RestApi::Endpoint::kModelReady);
  EXPECT_EQ(r.model, "a/b");
  r = find("POST", "/v2/repository/models/m%20x/load");
  EXPECT_EQ(r.endpoint, RestApi::Endpoint::kLoad);
  EXPECT_EQ(r.model, "m x");
  EXPECT_EQ(find("GET", "/v2/").endpoint, RestApi::Endpoint::kServerMetadata);
  EXPECT_EQ(find("GET", "/metrics").endpoint, RestApi::Endpoint::kMetrics);
  EXPECT_EQ(find("POST", "/v2/models/tiny/versions/1/infer/x/y/z").endpoint, RestApi::Endpoint::kNone);
  EXPECT_EQ(find("POST", "/v2/models/tiny/a/b/c/d/e/f/g/h/i/infer").endpoint, RestApi::Endpoint::kNone);
  EXPECT_EQ(find("POST", "/v2/models//infer").model, "") << "an empty segment is a segment";
  for (const char* bad : {"/v2/models/ti%zzny/infer", "/v2/models/tiny%4/infer", "/v2/models/tiny%", "v2/models",
                          "/v2/models/m/versions/1/infer/x/%zz"}) {
    const RestApi::Route route = find("POST", bad);
    EXPECT_FALSE(route.error.ok()) << bad;
    EXPECT_EQ(route.error.code(), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace ebb::server
