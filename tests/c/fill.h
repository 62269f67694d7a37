/* Deterministic test inputs, the same in C, C++ (tests/c/cxx_reference.cc) and Java
 * (java/src/test/java/dev/ebb/TestModels.java): element i of a tensor filled with seed s is
 * k = ((i + s) * 37) % 101, as k / 101 - 0.5 for floats, k % 13 - 6 for signed integers,
 * k for unsigned ones, k % 3 == 0 for bools. Plain C, included by both languages. */
#ifndef EBB_TESTS_C_FILL_H_
#define EBB_TESTS_C_FILL_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ebb/c.h"

static inline uint32_t ebb_test_k(size_t i, uint32_t seed) { return (uint32_t)((((uint64_t)i + seed) * 37u) % 101u); }

/* Fills `count` elements of `dtype` at `data`. Returns 0 for a type it does not fill (BYTES, 16-bit floats). */
static inline int ebb_test_fill(ebb_dtype_t dtype, void* data, size_t count, uint32_t seed) {
  for (size_t i = 0; i < count; ++i) {
    const uint32_t k = ebb_test_k(i, seed);
    switch (dtype) {
      case EBB_FLOAT32: ((float*)data)[i] = (float)k / 101.0f - 0.5f; break;
      case EBB_FLOAT64: ((double*)data)[i] = (double)k / 101.0 - 0.5; break;
      case EBB_INT64: ((int64_t*)data)[i] = (int64_t)(k % 13u) - 6; break;
      case EBB_INT32: ((int32_t*)data)[i] = (int32_t)(k % 13u) - 6; break;
      case EBB_INT16: ((int16_t*)data)[i] = (int16_t)((int)(k % 13u) - 6); break;
      case EBB_INT8: ((int8_t*)data)[i] = (int8_t)((int)(k % 13u) - 6); break;
      case EBB_UINT8: ((uint8_t*)data)[i] = (uint8_t)k; break;
      case EBB_UINT16: ((uint16_t*)data)[i] = (uint16_t)k; break;
      case EBB_UINT32: ((uint32_t*)data)[i] = k; break;
      case EBB_UINT64: ((uint64_t*)data)[i] = k; break;
      case EBB_BOOL: ((uint8_t*)data)[i] = (uint8_t)(k % 3u == 0); break;
      default: return 0;
    }
  }
  return 1;
}

#endif /* EBB_TESTS_C_FILL_H_ */
