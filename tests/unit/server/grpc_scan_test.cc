// The gRPC front end's defences before parsing, in process: the wire walk
// (server/grpc/wire_scan.h), the ModelInfer limits (infer_scan.h), the
// arena parse, decode and piecewise reply (tensor_codec.h), and the request
// byte budget (server/core/byte_budget.h). Over real sockets against the real
// server: tests/process/grpc_test.py.
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/byte_budget.h"
#include "grpc/infer_scan.h"
#include "grpc/tensor_codec.h"
#include "grpc/wire_scan.h"
#include "grpc_service.pb.h"

namespace ebb::server {
namespace {

using google::protobuf::FieldDescriptor;

std::string Varint(uint64_t n) {
  std::string out;
  while (n >= 0x80) {
    out += static_cast<char>((n & 0x7F) | 0x80);
    n >>= 7;
  }
  return out + static_cast<char>(n);
}

// A length-delimited field.
std::string Field(int number, const std::string& payload = "") {
  return Varint(static_cast<uint64_t>(number) << 3 | 2) + Varint(payload.size()) + payload;
}

// Records what the walk reports.
class Recorder final : public WireVisitor {
 public:
  Status OnEntries(const FieldDescriptor& field, int64_t added, int64_t in_message) override {
    total[field.full_name()] += added;
    most[field.full_name()] = std::max(most[field.full_name()], in_message);
    return Status::Ok();
  }
  Status OnUnknownField(int) override {
    ++unknown;
    return Status::Ok();
  }
  std::map<std::string, int64_t> total, most;
  int64_t unknown = 0;
};

Status Walk(const std::string& wire, WireVisitor& visitor, int max_depth = 16) {
  google::protobuf::io::ArrayInputStream in(wire.data(), static_cast<int>(wire.size()));
  return WalkWire(*inference::ModelInferRequest::descriptor(), &in, wire.size(), visitor, max_depth);
}

Result<ScannedInferRequest> Scan(const std::string& wire, const GrpcInferLimits& limits = {}) {
  google::protobuf::io::ArrayInputStream in(wire.data(), static_cast<int>(wire.size()));
  return ScanModelInferRequest(&in, wire.size(), limits);
}

inference::ModelInferRequest FullRequest() {
  inference::ModelInferRequest r;
  r.set_model_name("m");
  r.set_model_version("2");
  (*r.mutable_parameters())["keep_alive"].set_int64_param(5);
  for (int i = 0; i < 3; ++i) {
    auto* in = r.add_inputs();
    in->set_name("in" + std::to_string(i));
    in->set_datatype("INT64");
    for (int d = 0; d <= i; ++d) in->add_shape(1);
    (*in->mutable_parameters())["p"].set_bool_param(true);
    for (int k = 0; k < 10; ++k) in->mutable_contents()->add_int64_contents(k * 1000);
  }
  r.add_outputs()->set_name("out");
  r.mutable_inputs(0)->mutable_contents()->add_bytes_contents("s");
  r.add_raw_input_contents("raw");
  return r;
}

TEST(WireScanTest, CountsEveryRepeatedFieldAndMapAsTheParsedMessageHoldsThem) {
  Recorder r;
  ASSERT_TRUE(Walk(FullRequest().SerializeAsString(), r).ok());
  EXPECT_EQ(r.total["inference.ModelInferRequest.inputs"], 3);
  EXPECT_EQ(r.total["inference.ModelInferRequest.outputs"], 1);
  EXPECT_EQ(r.total["inference.ModelInferRequest.raw_input_contents"], 1);
  EXPECT_EQ(r.total["inference.ModelInferRequest.parameters"], 1);
  EXPECT_EQ(r.total["inference.ModelInferRequest.InferInputTensor.parameters"], 3);
  EXPECT_EQ(r.total["inference.ModelInferRequest.InferInputTensor.shape"], 6);  // packed: each element
  EXPECT_EQ(r.most["inference.ModelInferRequest.InferInputTensor.shape"], 3);   // the longest one shape
  EXPECT_EQ(r.total["inference.InferTensorContents.int64_contents"], 30);
  EXPECT_EQ(r.total["inference.InferTensorContents.bytes_contents"], 1);
  EXPECT_EQ(r.unknown, 0);
}

TEST(WireScanTest, UnpackedEntriesCountAsPackedOnesAndAFieldOfAnotherWireTypeIsUnknown) {
  // shape (field 3 of an input) as three unpacked varints, then one packed run of two.
  const std::string input = "\x18\x01\x18\x02\x18\x03" + Field(3, "\x04\x05");
  // model_name (field 1, a string) sent as a varint: the parser keeps it as an unknown field.
  const std::string wire = Field(5, input) + std::string("\x08\x07", 2) + Field(1000, "x");
  Recorder r;
  ASSERT_TRUE(Walk(wire, r).ok());
  EXPECT_EQ(r.most["inference.ModelInferRequest.InferInputTensor.shape"], 5);
  EXPECT_EQ(r.unknown, 2);
  inference::ModelInferRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  EXPECT_EQ(parsed.inputs(0).shape_size(), 5);
}

TEST(WireScanTest, RefusesWhatTheParserRefusesAndGroups) {
  const std::map<std::string, std::string> cases = {
      {"a truncated varint", std::string("\x08\xff", 2)},
      {"a length past the end", "\x2a\x05\x01"},
      {"a length past the end of the enclosing message", Field(5, "\x0a\x09" + std::string(3, 'x'))},
      {"field number 0", std::string("\x02\x00", 2)},
      {"wire type 6", std::string("\x0e\x00", 2)},
      {"a group", std::string("\x2b\x2c", 2)},
      {"an unknown group", std::string("\xab\x06\xac\x06", 4)},
      {"packed fp32 of 5 bytes", Field(5, Field(5, Field(6, "12345")))},
      {"a bad varint in packed int64", Field(5, Field(5, Field(3, "\xff")))},
  };
  for (const auto& [what, wire] : cases) {
    SCOPED_TRACE(what);
    Recorder r;
    Status st = Walk(wire, r);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
    inference::ModelInferRequest parsed;
    if (what.find("group") == std::string::npos) {
      EXPECT_FALSE(parsed.ParseFromString(wire));  // the parser keeps unknown groups; the walk refuses them
    }
  }
}

TEST(WireScanTest, NestingIsBounded) {
  Recorder r;
  const std::string wire = Field(5, Field(4, Field(2, "\x08\x01")));  // inputs -> parameters -> value
  EXPECT_TRUE(Walk(wire, r, 3).ok());
  Status st = Walk(wire, r, 2);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("nested more than 2 levels"), std::string::npos) << st.message();
}

TEST(InferScanTest, ReadsTheRoutingFieldsAsTheParserDoes) {
  inference::ModelInferRequest r = FullRequest();
  // A second model_name later in the message: the last one wins, for the parser and for the scan.
  const std::string wire = r.SerializeAsString() + Field(1, "last");
  Result<ScannedInferRequest> scanned = Scan(wire);
  ASSERT_TRUE(scanned.ok()) << scanned.status().ToString();
  inference::ModelInferRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  EXPECT_EQ(scanned->model_name, parsed.model_name());
  EXPECT_EQ(scanned->model_name, "last");
  EXPECT_EQ(scanned->model_version, "2");
}

TEST(InferScanTest, EachLimitHoldsAtItsValueAndRefusesOneMore) {
  // FullRequest holds 3 inputs, 1 output, 1 raw contents entry, 4 parameters, shapes of 1 to 3 dims, 30 typed
  // elements and 1 bytes_contents element; each case adds at most one input.
  GrpcInferLimits limits{.max_tensors = 4, .max_parameters = 4, .max_dims = 3,
                         .max_typed_elements = 30, .max_bytes_elements = 1, .max_unknown_fields = 0};
  const std::string full = FullRequest().SerializeAsString();
  ASSERT_TRUE(Scan(full + Field(5), limits).ok()) << Scan(full, limits).status().ToString();  // at the limits
  const std::map<std::string, std::pair<std::string, std::string>> over = {
      {"inputs", {Field(5) + Field(5), "more than 4 inputs"}},
      {"outputs", {Field(6) + Field(6) + Field(6) + Field(6), "more than 4 requested outputs"}},
      {"raw contents", {Field(7) + Field(7) + Field(7) + Field(7), "more than 4 raw_input_contents entries"}},
      {"parameters", {Field(6, Field(2)), "more than 4 parameters"}},
      {"dims", {Field(5, Field(3, "\x01\x01\x01\x01")), "more than 3 dimensions"}},
      {"typed", {Field(5, Field(5, Field(6, "1234"))), "more than 30 elements in typed contents"}},
      {"bytes", {Field(5, Field(5, Field(8))), "more than 1 elements in bytes_contents"}},
      {"unknown", {Field(99), "more than 0 fields unknown"}},
  };
  for (const auto& [what, extra] : over) {
    SCOPED_TRACE(what);
    Result<ScannedInferRequest> scanned = Scan(full + extra.first, limits);
    ASSERT_FALSE(scanned.ok());
    EXPECT_EQ(scanned.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(scanned.status().message().find(extra.second), std::string::npos) << scanned.status().message();
  }
}

TEST(InferScanTest, AFloodOfEntriesStopsAtTheLimit) {
  // 8 Mi empty inputs: the walk stops at the 4097th.
  std::string wire;
  for (int i = 0; i < (1 << 23); ++i) wire += Field(5);
  Result<ScannedInferRequest> scanned = Scan(wire);
  ASSERT_FALSE(scanned.ok());
  EXPECT_NE(scanned.status().message().find("more than 4096 inputs"), std::string::npos);
}

Result<InferRequest> ParseAndDecode(const std::string& wire) {
  google::protobuf::Arena arena;
  google::protobuf::io::ArrayInputStream in(wire.data(), static_cast<int>(wire.size()));
  Result<const inference::ModelInferRequest*> parsed = ParseModelInferRequest(&in, &arena);
  if (!parsed.ok()) return parsed.status();
  return DecodeModelInferRequest(**parsed, 1 << 20);
}

inference::ModelInferRequest OneInput() {
  inference::ModelInferRequest r;
  auto* in = r.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(2);
  in->mutable_contents()->add_fp32_contents(1.5f);
  in->mutable_contents()->add_fp32_contents(-2);
  return r;
}

TEST(InferDecodeTest, DuplicateNamesAndKeepAliveAreCheckedAfterTheArenaParse) {
  inference::ModelInferRequest r = OneInput();
  for (int i = 0; i < 4096; ++i) r.add_outputs()->set_name("o" + std::to_string(i));
  Result<InferRequest> decoded = ParseAndDecode(r.SerializeAsString());
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->outputs.size(), 4096u);
  ASSERT_EQ(decoded->inputs.size(), 1u);
  EXPECT_EQ(decoded->inputs[0].tensor.values<float>()[1], -2.0f);

  r.add_outputs()->set_name("o4095");
  decoded = ParseAndDecode(r.SerializeAsString());
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().message(), "output 'o4095' is requested twice");

  inference::ModelInferRequest k = OneInput();
  (*k.mutable_parameters())["keep_alive"].set_int64_param(int64_t{365} * 24 * 3600 * 1000 + 1);
  decoded = ParseAndDecode(k.SerializeAsString());
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("at most 31536000000 (365 days"), std::string::npos);
  (*k.mutable_parameters())["keep_alive"].set_int64_param(-1);
  decoded = ParseAndDecode(k.SerializeAsString());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->keep_alive_ms, -1);

  decoded = ParseAndDecode(Field(1, "\xff\xfe"));  // a proto3 string that is not UTF-8
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
}

// A request with one FP32 input of 65536 values (256 KiB) in raw_input_contents: its serialized
// form, and the raw bytes through `raw`.
std::string LargeRawRequest(std::string* raw) {
  inference::ModelInferRequest r;
  auto* in = r.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(65536);
  raw->assign(65536 * sizeof(float), '\0');
  for (size_t i = 0; i < raw->size(); ++i) (*raw)[i] = static_cast<char>(i * 7);
  r.add_raw_input_contents(*raw);
  return r.SerializeAsString();
}

// raw_input_contents of 128 KiB and more are decoded into a buffer the request before gave back
// (ebb/tensor.h, OutputBuffers), and nothing is kept past a release.
TEST(InferDecodeTest, LargeRawInputsReuseTheBufferTheRequestBeforeGaveBack) {
  detail::OutputBuffers::Drop();
  std::string raw;
  const std::string wire = LargeRawRequest(&raw);
  const std::byte* first = nullptr;
  {
    Result<InferRequest> decoded = ParseAndDecode(wire);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    const Tensor& t = decoded->inputs[0].tensor;
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.data()), t.byte_size()), raw);
    first = t.data();
  }
  EXPECT_EQ(detail::OutputBuffers::kept_bytes(), raw.size());
  {
    Result<InferRequest> decoded = ParseAndDecode(wire);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    const Tensor& t = decoded->inputs[0].tensor;
    EXPECT_EQ(t.data(), first);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.data()), t.byte_size()), raw);
  }
  detail::OutputBuffers::Drop();
  EXPECT_EQ(detail::OutputBuffers::kept_bytes(), 0u);
}

// The server's path (borrow_raw, the parsed message kept until the reply is made): raw inputs are
// used where they lie in the message, not copied.
TEST(InferDecodeTest, BorrowedRawInputsAreViewsOfTheParsedMessage) {
  std::string raw;
  const std::string wire = LargeRawRequest(&raw);
  google::protobuf::Arena arena;
  google::protobuf::io::ArrayInputStream stream(wire.data(), static_cast<int>(wire.size()));
  Result<const inference::ModelInferRequest*> parsed = ParseModelInferRequest(&stream, &arena);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  Result<InferRequest> decoded = DecodeModelInferRequest(**parsed, 1 << 20, /*borrow_raw=*/true);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const Tensor& t = decoded->inputs[0].tensor;
  EXPECT_TRUE(t.borrowed());
  EXPECT_EQ(reinterpret_cast<const char*>(t.data()), (*parsed)->raw_input_contents(0).data());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.data()), t.byte_size()), raw);
}

TEST(InferEncodeTest, ThePiecesConcatenatedAreTheSerializedResponse) {
  InferResponse response{"m", "3", "id-1", {}};
  response.outputs.push_back({"a", Tensor::FromFloats({2}, std::vector<float>{1, 2})});
  response.outputs.push_back({"empty", Tensor(DataType::kInt64, {0})});
  response.outputs.push_back({"s", Tensor::FromStrings({2}, std::vector<std::string>{"x", ""})});
  const EncodedInferResponse encoded = EncodeModelInferResponse(response);
  std::string wire = encoded.head;
  for (const auto& raw : encoded.raw) wire += raw.prefix + std::string(raw.data);
  EXPECT_EQ(wire.size(), encoded.size());
  inference::ModelInferResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  EXPECT_EQ(parsed.model_name(), "m");
  EXPECT_EQ(parsed.model_version(), "3");
  EXPECT_EQ(parsed.id(), "id-1");
  ASSERT_EQ(parsed.outputs_size(), 3);
  ASSERT_EQ(parsed.raw_output_contents_size(), 3);
  EXPECT_EQ(parsed.outputs(0).datatype(), "FP32");
  EXPECT_EQ(parsed.raw_output_contents(0),
            std::string(reinterpret_cast<const char*>(response.outputs[0].tensor.data()), 8));
  EXPECT_EQ(parsed.raw_output_contents(1), "");
  EXPECT_EQ(parsed.outputs(2).datatype(), "BYTES");
  EXPECT_EQ(parsed.raw_output_contents(2), std::string("\x01\x00\x00\x00x\x00\x00\x00\x00", 9));
}

TEST(ByteBudgetTest, ChargesUpToItsCapacityAndNeverOverflows) {
  ByteBudget budget(100);
  EXPECT_FALSE(budget.TryCharge(101));
  EXPECT_FALSE(budget.TryCharge(SIZE_MAX));
  ByteBudget::Reservation a = budget.Reserve(60);
  ASSERT_TRUE(a.held());
  EXPECT_FALSE(budget.Reserve(41).held());
  {
    ByteBudget::Reservation b = budget.Reserve(40);
    EXPECT_TRUE(b.held());
    EXPECT_EQ(budget.held(), 100u);
    EXPECT_FALSE(budget.TryCharge(1));
  }
  EXPECT_EQ(budget.held(), 60u);
  ByteBudget::Reservation moved = std::move(a);
  EXPECT_FALSE(a.held());
  EXPECT_EQ(moved.bytes(), 60u);
  moved.Reset();
  EXPECT_EQ(budget.held(), 0u);
}

}  // namespace
}  // namespace ebb::server
