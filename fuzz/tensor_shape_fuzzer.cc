// libFuzzer target: the C API's tensor constructors (include/ebb/c.h) on any dtype, shape and byte
// count: ebb_tensor_create, ebb_tensor_create_copy, ebb_tensor_borrow, ebb_tensor_create_strings.
// Beyond the sanitizers, it checks each answer against a reference computed here in 128-bit
// arithmetic: a shape is refused (EBB_INVALID_ARGUMENT) exactly when a dim is negative or its byte
// size passes INT64_MAX (the product of the non-zero dims), a dense copy or borrow is made exactly
// when the byte count equals that size, and a tensor made reports that size and element count.
// Input: dtype (1 byte), rank (1 byte, at most 8), byte count (8 bytes), then the dims (8 bytes each).
#include <cstdint>
#include <vector>

#include "ebb/c.h"
#include "fuzz_input.h"

namespace {

using ebb::fuzz::Expect;
using ebb::fuzz::Take;

constexpr __int128 kInt64Max = INT64_MAX;

// The byte size of `shape` of `unit`-byte elements, saturated just past INT64_MAX; -1 for a negative dim.
__int128 Reference(const std::vector<int64_t>& shape, __int128 unit, bool* empty) {
  __int128 product = unit;
  *empty = false;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d == 0) {
      *empty = true;
    } else if (product <= kInt64Max) {
      product *= d;  // at most 2^63 * 2^63: fits
    }
  }
  return product;
}

// A status must be NULL or EBB_INVALID_ARGUMENT with a message; returns whether it was NULL.
bool Ok(ebb_status_t* status) {
  if (!status) return true;
  Expect(ebb_status_code(status) == EBB_INVALID_ARGUMENT && ebb_status_message(status)[0] != '\0');
  ebb_status_destroy(status);
  return false;
}

void CheckMade(ebb_tensor_t* t, const std::vector<int64_t>& shape, size_t bytes, bool empty) {
  Expect(t != nullptr && ebb_tensor_byte_size(t) == bytes && ebb_tensor_rank(t) == shape.size());
  if (empty) Expect(ebb_tensor_element_count(t) == 0);
  ebb_tensor_destroy(t);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dtype = static_cast<ebb_dtype_t>(Take<uint8_t>(data, size) % 16);
  const size_t rank = Take<uint8_t>(data, size) % 9;
  const uint64_t given = Take<uint64_t>(data, size);
  std::vector<int64_t> shape(rank);
  for (int64_t& d : shape) d = Take<int64_t>(data, size);

  const size_t unit = ebb_dtype_size(dtype);  // 0 for BYTES and unknown dtypes
  const bool dense = unit > 0;
  bool empty = false;
  const __int128 reference = Reference(shape, dense ? unit : 4, &empty);
  const bool refused = reference < 0 || reference > kInt64Max;
  const __int128 bytes = empty ? 0 : reference;
  // At most this much is ever allocated for one input.
  constexpr __int128 kMaxAllocated = 1 << 20;

  ebb_tensor_t* t = nullptr;
  if (refused || bytes <= kMaxAllocated) {
    const bool made = Ok(ebb_tensor_create(dtype, shape.data(), rank, &t));
    Expect(made == (dense && !refused));
    if (made) CheckMade(t, shape, static_cast<size_t>(bytes), empty);
  }
  // A copy and a borrow from a buffer of `given` bytes (only a small one is ever real).
  const size_t buffer_bytes = given <= kMaxAllocated ? static_cast<size_t>(given) : 0;
  std::vector<uint64_t> buffer((buffer_bytes + 7) / 8 + 1);
  const bool exact = dense && !refused && bytes == static_cast<__int128>(given);
  if (given == buffer_bytes || !exact) {  // never claim more bytes than the buffer has when it could succeed
    t = nullptr;
    const bool copied = Ok(ebb_tensor_create_copy(dtype, shape.data(), rank, buffer.data(), static_cast<size_t>(given), &t));
    Expect(copied == exact);
    if (copied) CheckMade(t, shape, static_cast<size_t>(given), empty);
    t = nullptr;
    const bool borrowed = Ok(ebb_tensor_borrow(dtype, shape.data(), rank, buffer.data(), static_cast<size_t>(given), &t));
    Expect(borrowed == exact);
    if (borrowed) {
      Expect(ebb_tensor_borrowed(t) == 1);
      CheckMade(t, shape, static_cast<size_t>(given), empty);
    }
  }
  // BYTES: `count` empty strings for the shape.
  const size_t count = given % 64;
  std::vector<const char*> values(count, "");
  std::vector<size_t> lengths(count, 0);
  bool strings_empty = false;
  const __int128 strings_reference = Reference(shape, 4, &strings_empty);
  const bool strings_refused = strings_reference < 0 || strings_reference > kInt64Max;
  const __int128 strings_bytes = strings_empty ? 0 : strings_reference;
  t = nullptr;
  const bool strings = Ok(ebb_tensor_create_strings(shape.data(), rank, values.data(), lengths.data(), count, &t));
  Expect(strings == (!strings_refused && strings_bytes == static_cast<__int128>(count) * 4));
  if (strings) CheckMade(t, shape, count * 4, strings_empty);
  return 0;
}
