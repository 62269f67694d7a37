// Internal: a reader of protobuf fields that decodes only what it is asked
// for and seeks past the rest, so a model file's weights are never read.
// ReadModelSignature (model_signature.cc) and the external-data walk
// (external_data.cc) read ONNX's ModelProto with it.
//
// A Cursor reads between two offsets of a std::istream: the file itself, or
// a SpanStream over bytes in memory (a mapping of the file, whose pages are
// only touched where a field is decoded). Every length is checked against
// the enclosing message's end, so a truncated or hostile file gives an error,
// never a read past it.
//
// Thread safety: a Cursor and the stream under it belong to one thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <istream>
#include <streambuf>
#include <string>

#include "ebb/status.h"

namespace ebb::detail {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Reads protobuf fields from a stream between its position and `end`.
class Cursor {
 public:
  Cursor(std::istream& in, uint64_t pos, uint64_t end) : in_(in), pos_(pos), end_(end) {}

  bool done() const { return pos_ >= end_; }
  uint64_t pos() const { return pos_; }

  // The next field's number and wire type.
  Status Tag(uint32_t* field, uint32_t* wire) {
    uint64_t tag = 0;
    EBB_RETURN_IF_ERROR(Varint(&tag));
    *field = static_cast<uint32_t>(tag >> 3);
    *wire = static_cast<uint32_t>(tag & 7);
    return Status::Ok();
  }

  Status Varint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= end_) return Truncated();
      const int c = in_.get();
      if (c == EOF) return Truncated();
      ++pos_;
      *value |= static_cast<uint64_t>(c & 0x7f) << shift;
      if ((c & 0x80) == 0) return Status::Ok();
    }
    return InvalidArgument("malformed varint");
  }

  // The length of a length-delimited field, checked against the enclosing end.
  Status Length(uint64_t* length) {
    EBB_RETURN_IF_ERROR(Varint(length));
    if (*length > end_ - pos_) return Truncated();
    return Status::Ok();
  }

  // A cursor over the next `length` bytes; this one moves past them.
  Cursor Sub(uint64_t length) {
    Cursor sub(in_, pos_, pos_ + length);
    pos_ += length;
    return sub;
  }

  Status String(uint64_t length, std::string* out) {
    out->resize(length);
    Seek();
    if (length && !in_.read(out->data(), static_cast<std::streamsize>(length))) return Truncated();
    pos_ += length;
    return Status::Ok();
  }

  // Skips the value of a field of wire type `wire`.
  Status SkipValue(uint32_t wire) {
    uint64_t n = 0;
    switch (wire) {
      case kVarint: return Varint(&n);
      case kFixed64: n = 8; break;
      case kFixed32: n = 4; break;
      case kLengthDelimited: EBB_RETURN_IF_ERROR(Length(&n)); break;
      default: return InvalidArgument("unsupported protobuf wire type " + std::to_string(wire));
    }
    if (n > end_ - pos_) return Truncated();
    pos_ += n;
    return Status::Ok();
  }

  // Positions the stream at pos() (a sub-cursor may have been read after us).
  void Seek() { in_.seekg(static_cast<std::streamoff>(pos_)); }

 private:
  static Status Truncated() { return InvalidArgument("truncated"); }

  std::istream& in_;
  uint64_t pos_, end_;
};

// Calls on_field(field, wire) for every field whose number is in `wanted`
// (on_field must consume its value); skips the rest.
template <typename OnField>
Status ForEachField(Cursor& c, std::initializer_list<uint32_t> wanted, OnField on_field) {
  while (!c.done()) {
    c.Seek();
    uint32_t field = 0, wire = 0;
    EBB_RETURN_IF_ERROR(c.Tag(&field, &wire));
    if (std::find(wanted.begin(), wanted.end(), field) != wanted.end()) {
      EBB_RETURN_IF_ERROR(on_field(field, wire));
    } else {
      EBB_RETURN_IF_ERROR(c.SkipValue(wire));
    }
  }
  return Status::Ok();
}

inline Status ExpectDelimited(uint32_t wire, const char* what) {
  return wire == kLengthDelimited ? Status::Ok() : InvalidArgument(std::string(what) + " has the wrong wire type");
}

// A read-only std::istream over bytes in memory (not copied; they must
// outlive it). Seeking is pointer arithmetic, unlike a file stream's, which
// discards its buffer and asks the kernel on every seek.
class SpanStream : public std::istream {
 public:
  SpanStream(const void* data, size_t size) : std::istream(nullptr), buf_(static_cast<const char*>(data), size) {
    rdbuf(&buf_);
  }

 private:
  class Buf : public std::streambuf {
   public:
    Buf(const char* data, size_t size) {
      char* begin = const_cast<char*>(data);  // read only: no put area, no putback into it
      setg(begin, begin, begin + size);
    }

   protected:
    pos_type seekoff(off_type off, std::ios_base::seekdir dir, std::ios_base::openmode) override {
      const off_type base = dir == std::ios_base::beg ? 0 : dir == std::ios_base::cur ? gptr() - eback() : egptr() - eback();
      const off_type to = base + off;
      if (to < 0 || to > egptr() - eback()) return pos_type(off_type(-1));
      setg(eback(), eback() + to, egptr());
      return pos_type(to);
    }
    pos_type seekpos(pos_type pos, std::ios_base::openmode which) override {
      return seekoff(off_type(pos), std::ios_base::beg, which);
    }
  };
  Buf buf_;
};

}  // namespace ebb::detail
