// What the fuzz targets that read fixed-width fields share: taking a field from the input (zeros past
// its end), and a check that aborts (a finding libFuzzer reports with its input).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace ebb::fuzz {

// The next sizeof(T) bytes of the input as a T (little-endian; missing bytes are zero).
template <typename T>
T Take(const uint8_t*& data, size_t& size) {
  T v{};
  const size_t n = size < sizeof(T) ? size : sizeof(T);
  std::memcpy(&v, data, n);
  data += n;
  size -= n;
  return v;
}

inline void Expect(bool condition) {
  if (!condition) std::abort();
}

}  // namespace ebb::fuzz
