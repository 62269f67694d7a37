#include "wire_scan.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <climits>
#include <utility>
#include <vector>

namespace ebb::server {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormat;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// A packed run of varints is reported to the visitor in steps of this many
// elements, so that a visitor's limit stops a long run early.
constexpr int64_t kPackedStep = 1 << 16;

Status Malformed(const std::string& what) { return InvalidArgument("malformed message: " + what); }

std::string FieldLabel(const Descriptor& type, int number) {
  return "field " + std::to_string(number) + " of " + type.name();
}

class Walker {
 public:
  Walker(CodedInputStream* in, WireVisitor& visitor, int max_depth)
      : in_(in), visitor_(visitor), max_depth_(max_depth) {}

  // Reads fields of `type` until the current limit.
  Status Message(const Descriptor& type, int depth) {
    Counts counts;
    for (;;) {
      const uint32_t tag = in_->ReadTag();
      if (tag == 0) {
        if (in_->BytesUntilLimit() == 0) return Status::Ok();
        return Malformed("a bad tag or a truncated field in " + type.name());
      }
      EBB_RETURN_IF_ERROR(Field(type, tag, depth, &counts));
    }
  }

 private:
  // A repeated field's entries so far in one message occurrence; few fields per message.
  using Counts = std::vector<std::pair<const FieldDescriptor*, int64_t>>;

  Status Field(const Descriptor& type, uint32_t tag, int depth, Counts* counts) {
    const int number = WireFormatLite::GetTagFieldNumber(tag);
    const WireFormatLite::WireType wire_type = WireFormatLite::GetTagWireType(tag);
    if (number == 0) return Malformed("field number 0 in " + type.name());
    if (wire_type == WireFormatLite::WIRETYPE_START_GROUP || wire_type == WireFormatLite::WIRETYPE_END_GROUP) {
      return InvalidArgument(FieldLabel(type, number) + " is a group; groups are not part of this protocol");
    }
    const FieldDescriptor* field = type.FindFieldByNumber(number);
    const bool packed =
        field != nullptr && field->is_packable() && wire_type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    if (field == nullptr || (!packed && wire_type != WireFormat::WireTypeForFieldType(field->type()))) {
      EBB_RETURN_IF_ERROR(visitor_.OnUnknownField(depth));
      return SkipValue(type, number, wire_type);
    }
    if (packed) return Packed(*field, counts);
    if (field->is_repeated()) EBB_RETURN_IF_ERROR(Count(*field, 1, counts));
    switch (field->type()) {
      case FieldDescriptor::TYPE_MESSAGE: return SubMessage(*field, depth);
      case FieldDescriptor::TYPE_STRING:
      case FieldDescriptor::TYPE_BYTES: return StringValue(*field, depth);
      default: return SkipValue(type, number, wire_type);
    }
  }

  // The length of a length-delimited field, checked against what is left of the message.
  Status Length(const FieldDescriptor& field, int* length) {
    if (!in_->ReadVarintSizeAsInt(length)) return Malformed("a bad length of " + field.full_name());
    if (*length > in_->BytesUntilLimit()) return Malformed(field.full_name() + " runs past the end of its message");
    return Status::Ok();
  }

  Status SubMessage(const FieldDescriptor& field, int depth) {
    if (depth + 1 > max_depth_) {
      return InvalidArgument("the message is nested more than " + std::to_string(max_depth_) + " levels deep");
    }
    int length = 0;
    EBB_RETURN_IF_ERROR(Length(field, &length));
    const CodedInputStream::Limit limit = in_->PushLimit(length);
    EBB_RETURN_IF_ERROR(Message(*field.message_type(), depth + 1));
    in_->PopLimit(limit);
    return Status::Ok();
  }

  Status StringValue(const FieldDescriptor& field, int depth) {
    int length = 0;
    EBB_RETURN_IF_ERROR(Length(field, &length));
    if (field.is_repeated() || !visitor_.WantsString(field, depth)) {
      return in_->Skip(length) ? Status::Ok() : Malformed(field.full_name() + " is truncated");
    }
    std::string value;
    if (!in_->ReadString(&value, length)) return Malformed(field.full_name() + " is truncated");
    visitor_.OnString(field, std::move(value));
    return Status::Ok();
  }

  Status Packed(const FieldDescriptor& field, Counts* counts) {
    int length = 0;
    EBB_RETURN_IF_ERROR(Length(field, &length));
    switch (WireFormat::WireTypeForFieldType(field.type())) {
      case WireFormatLite::WIRETYPE_FIXED32:
      case WireFormatLite::WIRETYPE_FIXED64: {
        const int size = WireFormat::WireTypeForFieldType(field.type()) == WireFormatLite::WIRETYPE_FIXED32 ? 4 : 8;
        if (length % size != 0) return Malformed("packed " + field.full_name() + " has a partial element");
        if (length > 0) EBB_RETURN_IF_ERROR(Count(field, length / size, counts));
        return in_->Skip(length) ? Status::Ok() : Malformed(field.full_name() + " is truncated");
      }
      case WireFormatLite::WIRETYPE_VARINT: {
        const CodedInputStream::Limit limit = in_->PushLimit(length);
        int64_t step = 0;
        while (in_->BytesUntilLimit() > 0) {
          uint64_t ignored = 0;
          if (!in_->ReadVarint64(&ignored)) return Malformed("a bad varint in packed " + field.full_name());
          if (++step == kPackedStep) {
            EBB_RETURN_IF_ERROR(Count(field, step, counts));
            step = 0;
          }
        }
        if (step > 0) EBB_RETURN_IF_ERROR(Count(field, step, counts));
        in_->PopLimit(limit);
        return Status::Ok();
      }
      default: return Malformed(field.full_name() + " cannot be packed");
    }
  }

  Status SkipValue(const Descriptor& type, int number, WireFormatLite::WireType wire_type) {
    bool ok = false;
    switch (wire_type) {
      case WireFormatLite::WIRETYPE_VARINT: {
        uint64_t ignored = 0;
        ok = in_->ReadVarint64(&ignored);
        break;
      }
      case WireFormatLite::WIRETYPE_FIXED64: ok = in_->Skip(8); break;
      case WireFormatLite::WIRETYPE_FIXED32: ok = in_->Skip(4); break;
      case WireFormatLite::WIRETYPE_LENGTH_DELIMITED: {
        int length = 0;
        ok = in_->ReadVarintSizeAsInt(&length) && in_->Skip(length);
        break;
      }
      default: return Malformed(FieldLabel(type, number) + " has the unknown wire type " + std::to_string(wire_type));
    }
    return ok ? Status::Ok() : Malformed(FieldLabel(type, number) + " is truncated");
  }

  Status Count(const FieldDescriptor& field, int64_t added, Counts* counts) {
    auto it = std::find_if(counts->begin(), counts->end(), [&](const auto& c) { return c.first == &field; });
    if (it == counts->end()) it = counts->insert(counts->end(), {&field, 0});
    it->second += added;
    return visitor_.OnEntries(field, added, it->second);
  }

  CodedInputStream* const in_;
  WireVisitor& visitor_;
  const int max_depth_;
};

}  // namespace

Status WalkWire(const Descriptor& type, google::protobuf::io::ZeroCopyInputStream* wire, size_t size,
                WireVisitor& visitor, int max_depth) {
  if (size > static_cast<size_t>(INT_MAX)) return InvalidArgument("the message is larger than 2 GiB");
  CodedInputStream in(wire);
  in.PushLimit(static_cast<int>(size));
  return Walker(&in, visitor, max_depth).Message(type, 0);
}

}  // namespace ebb::server
