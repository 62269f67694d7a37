#include "unary_call.h"

#include <grpcpp/support/proto_buffer_reader.h>

#include "wire_scan.h"

namespace ebb::server {
namespace {

// Counts entries and unknown fields against UnaryLimits.
class EntryCounter final : public WireVisitor {
 public:
  explicit EntryCounter(const UnaryLimits& limits) : limits_(limits) {}
  Status OnEntries(const google::protobuf::FieldDescriptor&, int64_t added, int64_t) override {
    entries_ += added;
    if (entries_ <= limits_.max_entries) return Status::Ok();
    return InvalidArgument("the request has more than " + std::to_string(limits_.max_entries) +
                           " entries in its repeated fields and maps (the limit)");
  }
  Status OnUnknownField(int) override {
    if (++unknown_ <= limits_.max_unknown_fields) return Status::Ok();
    return InvalidArgument("the request has more than " + std::to_string(limits_.max_unknown_fields) +
                           " fields unknown to ebb's schema (the limit)");
  }

 private:
  const UnaryLimits& limits_;
  int64_t entries_ = 0, unknown_ = 0;
};

}  // namespace

Status ParseBounded(const grpc::ByteBuffer& bytes, google::protobuf::Message* message, const UnaryLimits& limits) {
  const size_t size = bytes.Length();
  const std::string type = message->GetDescriptor()->name();
  if (size > limits.max_bytes) {
    return ResourceExhausted("a " + type + " of " + std::to_string(size) + " bytes is larger than the limit of " +
                             std::to_string(limits.max_bytes) + " bytes for this RPC");
  }
  // The readers only read: the buffer is gRPC's, and stays as it is.
  auto* buffer = const_cast<grpc::ByteBuffer*>(&bytes);
  {
    grpc::ProtoBufferReader reader(buffer);
    EntryCounter counter(limits);
    EBB_RETURN_IF_ERROR(WalkWire(*message->GetDescriptor(), &reader, size, counter));
  }
  grpc::ProtoBufferReader reader(buffer);
  if (!message->ParseFromZeroCopyStream(&reader)) {
    return InvalidArgument("the " + type + " is not a valid protobuf message (or a string field is not UTF-8)");
  }
  return Status::Ok();
}

grpc::ByteBuffer SerializeReply(const google::protobuf::Message& message) {
  grpc::Slice slice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace ebb::server
