/* What the C tests of the C API share: a small harness (CHECK, CHECK_OK, CHECK_CODE, RUN_TEST),
 * model paths, inputs from fill.h, arena readings and the C++ reference runs (cxx_reference).
 * Plain C11. A failed check reports and returns from the test; main returns non-zero when any
 * check failed. */
#ifndef EBB_TESTS_C_C_TEST_H_
#define EBB_TESTS_C_C_TEST_H_

/* Standard C11 plus POSIX (clock_gettime, mkstemp, unlink): include this header first. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ebb/c.h"
#include "fill.h"

static int g_failures = 0;

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                          \
      return;                                                                \
    }                                                                        \
  } while (0)

/* `expr` must succeed (return NULL). */
#define CHECK_OK(expr)                                                                             \
  do {                                                                                             \
    ebb_status_t* st_ = (expr);                                                                    \
    if (st_) {                                                                                     \
      fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #expr,                     \
              ebb_code_name(ebb_status_code(st_)), ebb_status_message(st_));                       \
      ebb_status_destroy(st_);                                                                     \
      ++g_failures;                                                                                \
      return;                                                                                      \
    }                                                                                              \
  } while (0)

/* `expr` must fail with `code` and a message containing `text` (NULL: any non-empty message). */
#define CHECK_CODE(expr, code, text)                                                               \
  do {                                                                                             \
    ebb_status_t* st_ = (expr);                                                                    \
    const int bad_ = check_status(st_, (code), (text), #expr, __FILE__, __LINE__);                 \
    ebb_status_destroy(st_);                                                                       \
    if (bad_) {                                                                                    \
      ++g_failures;                                                                                \
      return;                                                                                      \
    }                                                                                              \
  } while (0)

static inline int check_status(const ebb_status_t* st, ebb_code_t code, const char* text, const char* expr,
                               const char* file, int line) {
  if (!st) {
    fprintf(stderr, "%s:%d: %s succeeded, expected %s\n", file, line, expr, ebb_code_name(code));
    return 1;
  }
  const char* message = ebb_status_message(st);
  if (ebb_status_code(st) != code || message[0] == '\0' || (text && !strstr(message, text))) {
    fprintf(stderr, "%s:%d: %s gave %s: '%s', expected %s with '%s'\n", file, line, expr,
            ebb_code_name(ebb_status_code(st)), message, ebb_code_name(code), text ? text : "(a message)");
    return 1;
  }
  return 0;
}

static inline double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

#define RUN_TEST(test)                                                                          \
  do {                                                                                          \
    const int before_ = g_failures;                                                             \
    const double start_ = now_ms();                                                             \
    test();                                                                                     \
    printf("[%s] %s (%.0f ms)\n", g_failures == before_ ? " OK " : "FAIL", #test, now_ms() - start_); \
    fflush(stdout);                                                                             \
  } while (0)

/* models/<name>/model.onnx */
static inline const char* model_path(const char* name) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/%s/model.onnx", EBB_MODELS_DIR, name);
  return path;
}

/* A new tensor of `dtype` and `shape` filled from fill.h with `seed`; NULL when that fails. */
/* A file of tests/fixtures/ (EBB_FIXTURES_DIR, set for every C test by tests/c/CMakeLists.txt). */
static inline const char* fixture(const char* name) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/%s", EBB_FIXTURES_DIR, name);
  return path;
}

static inline ebb_tensor_t* filled(ebb_dtype_t dtype, const int64_t* shape, size_t rank, uint32_t seed) {
  ebb_tensor_t* t = NULL;
  ebb_status_t* st = ebb_tensor_create(dtype, shape, rank, &t);
  if (st) {
    ebb_status_destroy(st);
    return NULL;
  }
  ebb_test_fill(dtype, ebb_tensor_mutable_data(t), (size_t)ebb_tensor_element_count(t), seed);
  return t;
}

/* A float32 image [1,3,h,w]. */
static inline ebb_tensor_t* image(int64_t h, int64_t w, uint32_t seed) {
  const int64_t shape[4] = {1, 3, h, w};
  return filled(EBB_FLOAT32, shape, 4, seed);
}

/* The statistic of the arena `name` ("cpu:shared"), or -1 when there is none. */
static inline int64_t arena_stat(const ebb_runtime_t* rt, const char* name, ebb_arena_stat_t stat) {
  ebb_memory_t* m = NULL;
  ebb_status_t* st = ebb_runtime_memory(rt, &m);
  if (st) {
    ebb_status_destroy(st);
    return -1;
  }
  const int64_t i = ebb_memory_find_arena(m, name);
  const int64_t v = i < 0 ? -1 : ebb_memory_arena_stat(m, (size_t)i, stat);
  ebb_memory_destroy(m);
  return v;
}

static inline int64_t shared_reserved(const ebb_runtime_t* rt) {
  return arena_stat(rt, "cpu:shared", EBB_ARENA_RESERVED);
}

/* Runs `model` through the C++ library in a child process (cxx_reference) on `inputs`, each
 * "name:TYPE:DIMS[:SEED]", and compares its outputs' bytes with `outputs`' (in order). 1 when equal. */
static inline int equals_cxx_run(const char* model, const char* const* inputs, size_t input_count,
                                 const ebb_tensors_t* outputs) {
  char file[] = "/tmp/ebb_c_reference_XXXXXX";
  const int fd = mkstemp(file);
  if (fd < 0) return 0;
  close(fd);
  char command[8192];
  int n = snprintf(command, sizeof command, "'%s' '%s' '%s'", EBB_CXX_REFERENCE, model, file);
  for (size_t i = 0; i < input_count; ++i) n += snprintf(command + n, sizeof command - (size_t)n, " '%s'", inputs[i]);
  int equal = 0;
  if (system(command) == 0) {
    FILE* f = fopen(file, "rb");
    size_t offset = 0;
    equal = f != NULL;
    for (size_t i = 0; f && equal && i < ebb_tensors_count(outputs); ++i) {
      const ebb_tensor_t* t = ebb_tensors_get(outputs, i);
      const size_t size = ebb_tensor_byte_size(t);
      unsigned char* want = malloc(size + 1);
      equal = want && fread(want, 1, size, f) == size && memcmp(want, ebb_tensor_data(t), size) == 0;
      if (!equal) fprintf(stderr, "output %zu ('%s') differs from the C++ run at byte offset %zu\n", i,
                          ebb_tensors_name(outputs, i), offset);
      offset += size;
      free(want);
    }
    if (f) {
      equal = equal && fgetc(f) == EOF;  /* and the C++ run gave nothing more */
      fclose(f);
    }
  }
  unlink(file);
  return equal;
}

/* main()'s start in a file whose tests share one runtime: a runtime with the default policy in *rt;
 * 0 (the reason printed) when it cannot be made. */
static inline int create_shared_runtime(ebb_runtime_t** rt) {
  ebb_status_t* st = ebb_runtime_create(NULL, 0, rt);
  if (!st) return 1;
  fprintf(stderr, "ebb_runtime_create: %s\n", ebb_status_message(st));
  ebb_status_destroy(st);
  return 0;
}

/* main()'s end: the count of failed checks printed; the exit status. */
static inline int report_failures(void) {
  printf("%d check(s) failed\n", g_failures);
  return g_failures == 0 ? 0 : 1;
}

#endif /* EBB_TESTS_C_C_TEST_H_ */
