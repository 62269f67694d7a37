// server/grpc/wire_scan.h — walks a serialized protobuf message without building it.
//
// Parsing a message allocates for every entry of a repeated field, every map
// entry and every unknown field — far more than the entry's bytes on the wire
// (an empty sub-message is 2 bytes there and a few hundred bytes parsed). A
// server that reads untrusted messages walks them first with WalkWire, counts
// what they hold, refuses what is over its limits, and parses only then.
//
// WalkWire reads the wire format with protobuf's own reader
// (google::protobuf::io::CodedInputStream), guided by the message's
// Descriptor, depth first and in wire order. It allocates nothing per entry:
// its memory is one small vector per level of nesting. It tells a WireVisitor
// about each entry of a repeated or map field (a packed run counts each
// element), each unknown field (a field the descriptor does not have, or one
// sent with another wire type: the parser would keep both as unknown fields),
// and, when asked, the value of a singular string field. Groups (wire types 3
// and 4, absent from proto3) are refused.
//
// Errors: the visitor's first error, which stops the walk; otherwise
// kInvalidArgument for input the parser would refuse too (a truncated field,
// a bad tag or wire type, a length past the end, a packed fixed-size run whose
// length is not a multiple of the element size), for groups, and for nesting
// deeper than `max_depth`. A walk that succeeds does not promise a parse
// that succeeds (UTF-8 in proto3 strings is the parser's to check).
//
// Thread safety: pure functions; a visitor is used by one walk at a time.
#pragma once

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/zero_copy_stream.h>

#include <cstdint>
#include <string>

#include "ebb/status.h"

namespace ebb::server {

class WireVisitor {
 public:
  virtual ~WireVisitor() = default;
  // `added` more entries of the repeated (or map) `field`; `in_message` counts
  // that field's entries so far in the message occurrence that holds them.
  virtual Status OnEntries(const google::protobuf::FieldDescriptor& field, int64_t added, int64_t in_message) = 0;
  // One unknown field, at `depth` (0: the top message).
  virtual Status OnUnknownField(int depth) = 0;
  // Whether to read the singular string or bytes `field` at `depth` and pass it to OnString.
  virtual bool WantsString(const google::protobuf::FieldDescriptor& field, int depth) {
    (void)field, (void)depth;
    return false;
  }
  virtual void OnString(const google::protobuf::FieldDescriptor& field, std::string value) { (void)field, (void)value; }
};

// Walks the first `size` bytes of `wire` as a serialized `type`. See the file comment.
Status WalkWire(const google::protobuf::Descriptor& type, google::protobuf::io::ZeroCopyInputStream* wire, size_t size,
                WireVisitor& visitor, int max_depth = 16);

}  // namespace ebb::server
