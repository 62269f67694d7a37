/* Admission by memory through the C API (ebb_pool_options_set_memory_admission,
 * ebb_pool_run_admitted): the same pool as C++'s, so the same behaviour. The shared CPU arena is
 * capped at 320 MiB: a 1024x1024 convnet run needs 128 MiB of it, so two fit at once, not four.
 * Not in the sanitizer builds: a run's need is measured from RSS and the arena's peak, which a
 * sanitizer's allocator changes (the C++ pool and server admission tests skip there too). */
#include "c_test.h"

#include <pthread.h>

static ebb_runtime_t* g_rt = NULL;
static ebb_pool_t* g_pool = NULL;

struct sized_run {
  int64_t side;
  int body_calls;
  ebb_status_t* status; /* the call's, kept by the thread that made it */
};

static ebb_status_t* run_side(void* user_data, ebb_session_t* session) {
  struct sized_run* r = user_data;
  ++r->body_calls;
  ebb_tensor_t* x = image(r->side, r->side, 3);
  if (!x) return ebb_status_create(EBB_INTERNAL, "no input tensor");
  const char* names[] = {"x"};
  const ebb_tensor_t* inputs[] = {x};
  ebb_tensors_t* out = NULL;
  ebb_status_t* st = ebb_session_run(session, names, inputs, 1, NULL, 0, &out);
  ebb_tensors_destroy(out);
  ebb_tensor_destroy(x);
  return st;
}

static ebb_status_t* run_admitted(struct sized_run* r) {
  return ebb_pool_run_admitted(g_pool, "conv", NULL, 1, 3 * r->side * r->side, run_side, r);
}

static void* run_thread(void* arg) {
  struct sized_run* r = arg;
  r->status = run_admitted(r);
  return NULL;
}

/* Four at once, each fitting alone: all four succeed, and the arena never passes its cap. */
static void test_four_concurrent_runs_all_succeed_under_the_cap(void) {
  struct sized_run runs[4];
  pthread_t threads[4];
  for (int i = 0; i < 4; ++i) {
    runs[i] = (struct sized_run){1024, 0, NULL};
    CHECK(pthread_create(&threads[i], NULL, run_thread, &runs[i]) == 0);
  }
  for (int i = 0; i < 4; ++i) pthread_join(threads[i], NULL);
  int failed = 0;
  for (int i = 0; i < 4; ++i) {
    if (runs[i].status) {
      fprintf(stderr, "run %d: %s: %s\n", i, ebb_code_name(ebb_status_code(runs[i].status)),
              ebb_status_message(runs[i].status));
      ebb_status_destroy(runs[i].status);
      ++failed;
    }
  }
  CHECK(failed == 0);
  const int64_t peak = arena_stat(g_rt, "cpu:shared", EBB_ARENA_PEAK_IN_USE);
  CHECK(peak > 0 && peak <= (int64_t)320 << 20);
}

/* Predicted larger than the cap even alone: refused at once, with the numbers, body never called. */
static void test_a_run_that_cannot_fit_fails_at_once(void) {
  /* Two sizes measured alone, the smaller first (the arena's peak is a high-water mark: a run
   * teaches only what raises it): the line through them bounds a larger run's need from below. */
  struct sized_run small = {512, 0, NULL}, medium = {1024, 0, NULL};
  CHECK_OK(run_admitted(&small));
  CHECK_OK(run_admitted(&medium));
  struct sized_run big = {3072, 0, NULL};
  const double start = now_ms();
  CHECK_CODE(run_admitted(&big), EBB_RESOURCE_EXHAUSTED, "a run of 28311552 input elements needs at least");
  CHECK(big.body_calls == 0);
  CHECK(now_ms() - start < 1000);
  CHECK_CODE(ebb_pool_run_admitted(g_pool, "conv", NULL, 1, -1, run_side, &big), EBB_INVALID_ARGUMENT,
             "run_elements");
  struct sized_run again = {1024, 0, NULL};
  CHECK_OK(run_admitted(&again)); /* and the pool serves on */
}

int main(void) {
  const char* policy = "{\"cpu\": {\"arena_settings\": {\"max_bytes\": 335544320}}}"; /* 320 MiB */
  ebb_status_t* st = ebb_runtime_create(policy, strlen(policy), &g_rt);
  ebb_pool_options_t* options = ebb_pool_options_create();
  if (!st && options) {
    ebb_pool_options_set_memory_admission(options, 1, 0);
    st = ebb_pool_create(g_rt, options, NULL, NULL, &g_pool);
  }
  ebb_pool_options_destroy(options);
  if (!st) st = ebb_pool_add(g_pool, "conv", model_path("convnet"), NULL, 0, NULL);
  if (st) {
    fprintf(stderr, "setup: %s\n", ebb_status_message(st));
    ebb_status_destroy(st);
    return 1;
  }
  RUN_TEST(test_a_run_that_cannot_fit_fails_at_once);
  RUN_TEST(test_four_concurrent_runs_all_succeed_under_the_cap);
  ebb_pool_destroy(g_pool);
  ebb_runtime_destroy(g_rt);
  return report_failures();
}
