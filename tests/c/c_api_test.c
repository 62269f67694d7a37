/* The C API from C (C11) on the bundled models: the signature, runs whose outputs equal the C++
 * library's bit for bit, caller-owned outputs and buffers, the release at the end of a planned
 * operation (the shared arena back to its after-load value), the cache, the ready-made operations
 * with progress and cancellation, BYTES tensors, concurrent runs from threads and the model pool.
 * Error paths and a real out-of-memory are in c_errors_test.c. */
#include "c_test.h"

#include <pthread.h>

static ebb_runtime_t* g_rt = NULL;

static void sleep_ms(long ms) {
  const struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static void test_versions(void) {
  CHECK(ebb_abi_version() == EBB_ABI_VERSION);
  CHECK(strcmp(ebb_version(), EBB_PROJECT_VERSION) == 0);
  CHECK(strncmp(ebb_ort_version(), "1.29", 4) == 0);
  CHECK(strcmp(ebb_code_name(EBB_RESOURCE_EXHAUSTED), "resource_exhausted") == 0);
  CHECK(strcmp(ebb_dtype_name(EBB_FLOAT32), "FP32") == 0 && ebb_dtype_size(EBB_FLOAT64) == 8);
  CHECK(strstr(ebb_runtime_policy_json(g_rt), "\"release\"") != NULL);
}

static void test_signature(void) {
  ebb_session_t* s = NULL;
  CHECK_OK(ebb_runtime_load(g_rt, model_path("mixed"), NULL, &s));
  CHECK(strcmp(ebb_session_name(s), "mixed") == 0);
  CHECK(strcmp(ebb_session_device(s), "cpu") == 0);
  CHECK(strcmp(ebb_session_provider(s), "CPUExecutionProvider") == 0);
  CHECK(ebb_session_input_count(s) == 4 && ebb_session_output_count(s) == 4);
  const char* name = NULL;
  ebb_dtype_t dtype = EBB_FLOAT32;
  const int64_t* shape = NULL;
  size_t rank = 0;
  CHECK(ebb_session_input(s, 1, &name, &dtype, &shape, &rank) == 1);
  CHECK(strcmp(name, "b") == 0 && dtype == EBB_INT64 && rank == 2 && shape[0] == -1 && shape[1] == 4);
  CHECK(ebb_session_output(s, 3, &name, &dtype, NULL, NULL) == 1);
  CHECK(strcmp(name, "d") == 0 && dtype == EBB_FLOAT64);
  CHECK(ebb_session_input(s, 4, &name, NULL, NULL, NULL) == 0 && strcmp(name, "d") == 0);  /* untouched */
  char* doc = NULL;
  CHECK_OK(ebb_session_metadata(s, "no such key", &doc));
  CHECK(doc && doc[0] == '\0');
  ebb_free(doc);
  ebb_session_destroy(s);
}

/* convnet and mixed (four dtypes in, four out): outputs equal to the C++ library's run. */
static void test_outputs_equal_cxx(void) {
  ebb_session_t* conv = NULL;
  CHECK_OK(ebb_runtime_load(g_rt, model_path("convnet"), NULL, &conv));
  ebb_tensor_t* x = image(64, 48, 0);
  const char* names[] = {"x"};
  const ebb_tensor_t* inputs[] = {x};
  ebb_tensors_t* out = NULL;
  CHECK_OK(ebb_session_run(conv, names, inputs, 1, NULL, 0, &out));
  CHECK(ebb_tensors_count(out) == 1 && strcmp(ebb_tensors_name(out, 0), "y") == 0);
  const ebb_tensor_t* y = ebb_tensors_get(out, 0);
  CHECK(ebb_tensor_dtype(y) == EBB_FLOAT32 && ebb_tensor_rank(y) == 4 && ebb_tensor_shape(y)[2] == 64);
  CHECK(!ebb_tensor_borrowed(y));
  const char* spec[] = {"x:FP32:1x3x64x48:0"};
  CHECK(equals_cxx_run(model_path("convnet"), spec, 1, out));
  ebb_tensors_destroy(out);
  ebb_tensor_destroy(x);
  ebb_session_destroy(conv);

  ebb_session_t* mixed = NULL;
  CHECK_OK(ebb_runtime_load(g_rt, model_path("mixed"), NULL, &mixed));
  const int64_t shape[2] = {3, 4};
  ebb_tensor_t* a = filled(EBB_FLOAT32, shape, 2, 1);
  ebb_tensor_t* b = filled(EBB_INT64, shape, 2, 2);
  ebb_tensor_t* c = filled(EBB_UINT8, shape, 2, 3);
  ebb_tensor_t* flag = filled(EBB_BOOL, shape, 2, 4);
  const char* mnames[] = {"a", "b", "c", "flag"};
  const ebb_tensor_t* minputs[] = {a, b, c, flag};
  CHECK_OK(ebb_session_run(mixed, mnames, minputs, 4, NULL, 0, &out));
  const char* mspec[] = {"a:FP32:3x4:1", "b:INT64:3x4:2", "c:UINT8:3x4:3", "flag:BOOL:3x4:4"};
  CHECK(ebb_tensors_count(out) == 4);
  CHECK(equals_cxx_run(model_path("mixed"), mspec, 4, out));
  const ebb_tensor_t* b2 = ebb_tensors_find(out, "b2");
  CHECK(b2 && ((const int64_t*)ebb_tensor_data(b2))[5] == 2 * ((const int64_t*)ebb_tensor_data(b))[5]);
  /* One output asked for, by name; it is the caller's after the list is gone. */
  const char* want[] = {"d"};
  ebb_tensors_t* one = NULL;
  CHECK_OK(ebb_session_run(mixed, mnames, minputs, 4, want, 1, &one));
  CHECK(ebb_tensors_count(one) == 1 && strcmp(ebb_tensors_name(one, 0), "d") == 0);
  ebb_tensor_t* d = ebb_tensors_take(one, 0);
  CHECK(d && ebb_tensors_get(one, 0) == NULL && ebb_tensors_take(one, 0) == NULL);
  ebb_tensors_destroy(one);
  CHECK(ebb_tensor_bitwise_equal(d, ebb_tensors_find(out, "d")));
  ebb_tensor_destroy(d);
  ebb_tensors_destroy(out);
  ebb_tensor_destroy(a);
  ebb_tensor_destroy(b);
  ebb_tensor_destroy(c);
  ebb_tensor_destroy(flag);
  ebb_session_destroy(mixed);
}

/* Borrowed inputs and outputs: the caller's buffers, read and written in place. */
static void test_caller_buffers(void) {
  ebb_session_t* s = NULL;
  CHECK_OK(ebb_runtime_load(g_rt, model_path("convnet"), NULL, &s));
  enum { H = 32, W = 40, N = 3 * H * W };
  static float in[N], out_buf[N];
  ebb_test_fill(EBB_FLOAT32, in, N, 7);
  const int64_t shape[4] = {1, 3, H, W};
  ebb_tensor_t *x = NULL, *y = NULL, *wrong = NULL;
  CHECK_OK(ebb_tensor_borrow(EBB_FLOAT32, shape, 4, in, sizeof in, &x));
  CHECK(ebb_tensor_borrowed(x) && ebb_tensor_data(x) == in);
  CHECK_OK(ebb_tensor_borrow(EBB_FLOAT32, shape, 4, out_buf, sizeof out_buf, &y));
  const char* names[] = {"x"};
  const char* outs[] = {"y"};
  const ebb_tensor_t* inputs[] = {x};
  ebb_tensor_t* outputs[] = {y};
  CHECK_OK(ebb_session_run_into(s, names, inputs, 1, outs, outputs, 1));
  ebb_tensors_t* list = NULL;
  CHECK_OK(ebb_session_run(s, names, inputs, 1, NULL, 0, &list));
  CHECK(ebb_tensor_bitwise_equal(ebb_tensors_get(list, 0), y));
  CHECK(memcmp(ebb_tensor_data(ebb_tensors_get(list, 0)), out_buf, sizeof out_buf) == 0);
  ebb_tensors_destroy(list);
  /* A buffer of another shape: an error naming the output; nothing written. */
  const int64_t small[4] = {1, 3, H, W / 2};
  CHECK_OK(ebb_tensor_borrow(EBB_FLOAT32, small, 4, out_buf, sizeof out_buf / 2, &wrong));
  ebb_tensor_t* wrong_outputs[] = {wrong};
  CHECK_CODE(ebb_session_run_into(s, names, inputs, 1, outs, wrong_outputs, 1), EBB_INVALID_ARGUMENT,
             "output 'y'");
  ebb_tensor_destroy(wrong);
  ebb_tensor_destroy(x);
  ebb_tensor_destroy(y);
  ebb_session_destroy(s);
}

/* A planned operation of three runs keeps the arena between runs and gives it back after the last
 * one: the shared arena is back to its after-load value. Unplanned: back at ebb_operation_end. */
static void test_release_at_operation_end(void) {
  ebb_session_t* s = NULL;
  CHECK_OK(ebb_runtime_load(g_rt, model_path("convnet"), NULL, &s));
  CHECK_OK(ebb_runtime_trim(g_rt));
  const int64_t floor = shared_reserved(g_rt);
  CHECK(floor >= 0);
  ebb_tensor_t* x = image(256, 256, 3);
  const char* names[] = {"x"};
  const ebb_tensor_t* inputs[] = {x};
  for (int planned = 1; planned >= 0; --planned) {
    ebb_operation_t* op = NULL;
    CHECK_OK(ebb_operation_create(g_rt, planned ? 3 : 0, NULL, &op));
    for (int i = 0; i < 3; ++i) {
      ebb_tensors_t* out = NULL;
      CHECK_OK(ebb_operation_run(op, s, names, inputs, 1, NULL, 0, &out));
      ebb_tensors_destroy(out);
      if (i < 2 || !planned) CHECK(shared_reserved(g_rt) > floor + (4 << 20));  /* kept for the next run */
    }
    CHECK(ebb_operation_runs_done(op) == 3);
    CHECK(ebb_operation_released(op) == planned);
    if (planned) {
      CHECK(shared_reserved(g_rt) == floor);
      ebb_tensors_t* out = NULL;
      CHECK_CODE(ebb_operation_run(op, s, names, inputs, 1, NULL, 0, &out), EBB_FAILED_PRECONDITION, "planned 3");
      CHECK(out == NULL);
    }
    CHECK_OK(ebb_operation_end(op));
    CHECK(ebb_operation_ended(op) && ebb_operation_released(op));
    CHECK(shared_reserved(g_rt) == floor);
    CHECK_OK(ebb_operation_end(op));  /* twice: nothing more */
    ebb_operation_destroy(op);
  }
  /* A plain run is a whole operation: under the default policy (release "idle") its memory goes
   * back once no run has ended for idle_release_ms (waited for here, up to 10 s), not at once. Both
   * are waited for: an idle release armed by an earlier test's runs of this (cached) session may
   * come just before this run and count first. */
  ebb_tensors_t* out = NULL;
  const uint64_t releases = ebb_session_release_count(s);
  CHECK_OK(ebb_session_run(s, names, inputs, 1, NULL, 0, &out));
  for (int waited_ms = 0;
       waited_ms < 10000 && (ebb_session_release_count(s) == releases || shared_reserved(g_rt) != floor);
       waited_ms += 2) {
    sleep_ms(2);
  }
  CHECK(shared_reserved(g_rt) == floor && ebb_session_release_count(s) > releases);
  ebb_tensors_destroy(out);
  ebb_tensor_destroy(x);
  ebb_session_destroy(s);
}

/* The second load is the same loaded model; after an unload, a fresh one. */
static void test_cache(void) {
  ebb_session_t *a = NULL, *b = NULL, *c = NULL;
  CHECK_OK(ebb_runtime_load(g_rt, model_path("tiny"), NULL, &a));
  const uint64_t loads = ebb_runtime_load_count(g_rt);
  CHECK_OK(ebb_runtime_load(g_rt, model_path("tiny"), NULL, &b));
  CHECK(a != b && ebb_session_same(a, b) && ebb_runtime_load_count(g_rt) == loads);
  CHECK(ebb_runtime_unload_session(g_rt, b) == 1 && ebb_runtime_unload_session(g_rt, b) == 0);
  CHECK_OK(ebb_runtime_load(g_rt, model_path("tiny"), NULL, &c));
  CHECK(!ebb_session_same(a, c) && ebb_runtime_load_count(g_rt) == loads + 1);
  CHECK(ebb_runtime_unload_path(g_rt, model_path("tiny")) == 1);
  /* A handle whose session left the cache still runs. */
  const int64_t shape[2] = {1, 64};
  ebb_tensor_t* x = filled(EBB_FLOAT32, shape, 2, 5);
  const char* names[] = {"x"};
  const ebb_tensor_t* inputs[] = {x};
  ebb_tensors_t* out = NULL;
  CHECK_OK(ebb_session_run(a, names, inputs, 1, NULL, 0, &out));
  CHECK(ebb_tensor_element_count(ebb_tensors_get(out, 0)) == 64);
  ebb_tensors_destroy(out);
  ebb_tensor_destroy(x);
  /* Loaded from bytes: the same content, the same loaded model as long as it is cached. */
  ebb_session_t* d = NULL;
  FILE* f = fopen(model_path("tiny"), "rb");
  CHECK(f != NULL);
  static char bytes[1 << 16];
  const size_t length = fread(bytes, 1, sizeof bytes, f);
  fclose(f);
  ebb_load_options_t* options = ebb_load_options_create();
  CHECK_OK(ebb_load_options_set_name(options, "tiny"));
  CHECK_OK(ebb_load_options_set_device(options, "cpu"));
  CHECK_OK(ebb_runtime_load_bytes(g_rt, bytes, length, options, &d));
  CHECK(strcmp(ebb_session_source_path(d), "") == 0 && strcmp(ebb_session_name(d), "tiny") == 0);
  ebb_load_options_destroy(options);
  ebb_session_destroy(a);
  ebb_session_destroy(b);
  ebb_session_destroy(c);
  ebb_session_destroy(d);
  ebb_runtime_clear(g_rt);
  CHECK(ebb_runtime_cached_count(g_rt) == 0);
}

static int g_progress_calls = 0;
static int count_progress(void* user_data, int done, int total) {
  (void)user_data;
  ++g_progress_calls;
  return done < 0 || done > total;  /* never cancels */
}
static int cancel_after_two(void* user_data, int done, int total) {
  (void)total;
  ++*(int*)user_data;
  return done >= 2;
}

/* Per-frame, joint, tiled and pipeline operations: results as separate runs give, progress,
 * cancellation, and the arena back to its floor after each. */
static void test_ready_made_operations(void) {
  ebb_session_t *conv = NULL, *up = NULL;
  CHECK_OK(ebb_runtime_load(g_rt, model_path("convnet"), NULL, &conv));
  CHECK_OK(ebb_runtime_load(g_rt, model_path("waifu2x_scale2x"), NULL, &up));
  CHECK_OK(ebb_runtime_trim(g_rt));
  const int64_t floor = shared_reserved(g_rt);
  ebb_tensor_t* frames[3] = {image(64, 64, 1), image(64, 64, 2), image(64, 64, 3)};
  const ebb_tensor_t* const* f = (const ebb_tensor_t* const*)frames;
  ebb_control_t* control = ebb_control_create();
  ebb_control_set_progress(control, count_progress, NULL);
  ebb_tensors_t *per_frame = NULL, *joint = NULL, *piped = NULL, *tiled = NULL;
  CHECK_OK(ebb_run_per_frame(g_rt, conv, f, 3, control, &per_frame));
  CHECK(g_progress_calls == 3 && ebb_tensors_count(per_frame) == 3 && shared_reserved(g_rt) == floor);
  CHECK_OK(ebb_run_joint(g_rt, conv, f, 3, NULL, &joint));
  ebb_session_t* stages[2] = {conv, conv};
  CHECK_OK(ebb_run_pipeline(g_rt, stages, 2, f, 3, NULL, &piped));
  const char* names[] = {"x"};
  for (size_t i = 0; i < 3; ++i) {
    const ebb_tensor_t* inputs[] = {frames[i]};
    ebb_tensors_t* single = NULL;
    CHECK_OK(ebb_session_run(conv, names, inputs, 1, NULL, 0, &single));
    CHECK(ebb_tensor_bitwise_equal(ebb_tensors_get(single, 0), ebb_tensors_get(per_frame, i)));
    const ebb_tensor_t* again[] = {ebb_tensors_get(single, 0)};
    ebb_tensors_t* twice = NULL;
    CHECK_OK(ebb_session_run(conv, names, again, 1, NULL, 0, &twice));
    CHECK(ebb_tensor_bitwise_equal(ebb_tensors_get(twice, 0), ebb_tensors_get(piped, i)));
    CHECK(ebb_tensor_element_count(ebb_tensors_get(joint, i)) == 3 * 64 * 64);
    ebb_tensors_destroy(single);
    ebb_tensors_destroy(twice);
  }
  /* Tiled: 2x output; 48-pixel tiles with 8 of overlap over 64x64 are 4 runs per frame. */
  int calls = 0;
  ebb_control_t* stopper = ebb_control_create();
  ebb_control_set_progress(stopper, cancel_after_two, &calls);
  CHECK_CODE(ebb_run_tiled(g_rt, up, f, 3, 48, 8, 0, 1, stopper, &tiled), EBB_CANCELLED, NULL);
  CHECK(tiled == NULL && calls == 2 && ebb_control_cancelled(stopper));
  CHECK(shared_reserved(g_rt) == floor);
  CHECK_OK(ebb_run_tiled(g_rt, up, f, 1, 48, 8, 0, 1, NULL, &tiled));
  const ebb_tensor_t* t = ebb_tensors_get(tiled, 0);
  CHECK(ebb_tensor_rank(t) == 4 && ebb_tensor_shape(t)[2] == 128 && ebb_tensor_shape(t)[3] == 128);
  CHECK(shared_reserved(g_rt) == floor);
  /* A control cancelled before the operation starts stops it before its first run. */
  ebb_operation_t* op = NULL;
  CHECK_OK(ebb_operation_create(g_rt, 0, stopper, &op));
  const ebb_tensor_t* inputs[] = {frames[0]};
  ebb_tensors_t* out = NULL;
  CHECK_CODE(ebb_operation_run(op, conv, names, inputs, 1, NULL, 0, &out), EBB_CANCELLED, "cancelled");
  CHECK(ebb_operation_ended(op));
  CHECK_CODE(ebb_operation_run(op, conv, names, inputs, 1, NULL, 0, &out), EBB_FAILED_PRECONDITION, "ended");
  ebb_operation_destroy(op);
  ebb_control_destroy(stopper);
  ebb_control_destroy(control);
  ebb_tensors_destroy(per_frame);
  ebb_tensors_destroy(joint);
  ebb_tensors_destroy(piped);
  ebb_tensors_destroy(tiled);
  for (int i = 0; i < 3; ++i) ebb_tensor_destroy(frames[i]);
  ebb_session_destroy(conv);
  ebb_session_destroy(up);
}

/* BYTES in and out (the strings model: echo, and the index of each string in its table). */
static void test_strings(void) {
  ebb_session_t* s = NULL;
  CHECK_OK(ebb_runtime_load(g_rt, model_path("strings"), NULL, &s));
  const char* values[] = {"banana", "kiwi", "apple", "cherry"};
  const size_t lengths[] = {6, 4, 5, 6};
  const int64_t shape[2] = {2, 2};
  ebb_tensor_t* text = NULL;
  CHECK_OK(ebb_tensor_create_strings(shape, 2, values, lengths, 4, &text));
  const char* names[] = {"text"};
  const ebb_tensor_t* inputs[] = {text};
  ebb_tensors_t* out = NULL;
  CHECK_OK(ebb_session_run(s, names, inputs, 1, NULL, 0, &out));
  const ebb_tensor_t* echo = ebb_tensors_find(out, "echo");
  const ebb_tensor_t* id = ebb_tensors_find(out, "id");
  CHECK(echo && id && ebb_tensor_dtype(echo) == EBB_BYTES);
  const char* data = NULL;
  size_t length = 0;
  CHECK_OK(ebb_tensor_string(echo, 1, &data, &length));
  CHECK(length == 4 && memcmp(data, "kiwi", 4) == 0);
  const int64_t* ids = ebb_tensor_data(id);
  CHECK(ids[0] == 1 && ids[1] == -1 && ids[2] == 0 && ids[3] == 2);
  CHECK_CODE(ebb_tensor_string(echo, 4, &data, &length), EBB_INVALID_ARGUMENT, "out of range");
  ebb_tensors_destroy(out);
  ebb_tensor_destroy(text);
  ebb_session_destroy(s);
}

struct worker {
  ebb_session_t* session;
  const ebb_tensor_t* x;
  const ebb_tensor_t* expected;
  int runs_ok;
};

static void* run_worker(void* arg) {
  struct worker* w = arg;
  const char* names[] = {"x"};
  const ebb_tensor_t* inputs[] = {w->x};
  for (int i = 0; i < 20; ++i) {
    ebb_tensors_t* out = NULL;
    ebb_status_t* st = ebb_session_run(w->session, names, inputs, 1, NULL, 0, &out);
    if (!st && ebb_tensor_bitwise_equal(ebb_tensors_get(out, 0), w->expected)) ++w->runs_ok;
    ebb_status_destroy(st);
    ebb_tensors_destroy(out);
  }
  return NULL;
}

/* Four threads run one session at once; every output equals the single-threaded one. */
static void test_threads(void) {
  ebb_session_t* s = NULL;
  CHECK_OK(ebb_runtime_load(g_rt, model_path("convnet"), NULL, &s));
  ebb_tensor_t* x = image(48, 48, 9);
  const char* names[] = {"x"};
  const ebb_tensor_t* inputs[] = {x};
  ebb_tensors_t* expected = NULL;
  CHECK_OK(ebb_session_run(s, names, inputs, 1, NULL, 0, &expected));
  struct worker workers[4];
  pthread_t threads[4];
  for (int i = 0; i < 4; ++i) {
    workers[i] = (struct worker){s, x, ebb_tensors_get(expected, 0), 0};
    CHECK(pthread_create(&threads[i], NULL, run_worker, &workers[i]) == 0);
  }
  int ok = 0;
  for (int i = 0; i < 4; ++i) {
    pthread_join(threads[i], NULL);
    ok += workers[i].runs_ok;
  }
  CHECK(ok == 80);
  CHECK(ebb_session_in_flight(s) == 0);
  ebb_tensors_destroy(expected);
  ebb_tensor_destroy(x);
  ebb_session_destroy(s);
}

struct events {
  int loads, evictions;
  char last_reason[32];
};

static void on_event(void* user_data, const ebb_pool_event_t* event) {
  struct events* e = user_data;
  if (ebb_pool_event_kind(event) == EBB_POOL_EVENT_LOAD) {
    ++e->loads;
  } else {
    ++e->evictions;
    snprintf(e->last_reason, sizeof e->last_reason, "%s", ebb_pool_event_reason(event));
  }
}

static ebb_status_t* run_tiny(void* user_data, ebb_session_t* session) {
  const ebb_tensor_t* inputs[] = {user_data};
  const char* names[] = {"x"};
  ebb_tensors_t* out = NULL;
  ebb_status_t* st = ebb_session_run(session, names, inputs, 1, NULL, 0, &out);
  ebb_tensors_destroy(out);
  return st;
}

static ebb_status_t* refuse(void* user_data, ebb_session_t* session) {
  (void)user_data;
  (void)session;
  return ebb_status_create(EBB_CANCELLED, "the body said no");
}

/* The pool: add, acquire (on demand), a lease's session, status, events, run with recovery,
 * unload, remove; a lease outliving its pool handle. */
static void test_pool(void) {
  struct events events = {0, 0, ""};
  ebb_pool_options_t* options = ebb_pool_options_create();
  ebb_pool_options_set_cpu_budget(options, 256 << 20, 0);
  ebb_pool_t* pool = NULL;
  CHECK_OK(ebb_pool_create(g_rt, options, on_event, &events, &pool));
  ebb_pool_options_destroy(options);
  CHECK(ebb_pool_budget(pool, "cpu") == 256 << 20);
  CHECK_OK(ebb_pool_add(pool, "tiny", model_path("tiny"), NULL, 0, NULL));
  const int64_t keep = -1;
  CHECK_OK(ebb_pool_add(pool, "conv", model_path("convnet"), NULL, 1, &keep));
  CHECK(ebb_pool_contains(pool, "tiny") && !ebb_pool_contains(pool, "nope"));
  ebb_pool_snapshot_t* snap = NULL;
  CHECK_OK(ebb_pool_status(pool, "tiny", &snap));
  CHECK(ebb_pool_snapshot_count(snap) == 1 && ebb_pool_snapshot_state(snap, 0) == EBB_POOL_UNLOADED);
  ebb_pool_snapshot_destroy(snap);
  ebb_lease_t* lease = NULL;
  CHECK_CODE(ebb_pool_acquire(pool, "tiny", NULL, 0, &lease), EBB_UNAVAILABLE, "tiny");
  CHECK_OK(ebb_pool_acquire(pool, "tiny", NULL, 1, &lease));
  CHECK(strcmp(ebb_lease_name(lease), "tiny") == 0 && events.loads == 1);
  const int64_t shape[2] = {1, 64};
  ebb_tensor_t* x = filled(EBB_FLOAT32, shape, 2, 11);
  CHECK_OK(run_tiny(x, ebb_lease_session(lease)));
  CHECK_OK(ebb_pool_status(pool, "tiny", &snap));
  CHECK(ebb_pool_snapshot_state(snap, 0) == EBB_POOL_READY && ebb_pool_snapshot_in_flight(snap, 0) == 1);
  CHECK(strcmp(ebb_pool_state_name(ebb_pool_snapshot_state(snap, 0)), "READY") == 0);
  CHECK(ebb_pool_snapshot_charge_bytes(snap, 0) > 0 && ebb_pool_snapshot_loads(snap, 0) == 1);
  CHECK(strcmp(ebb_pool_snapshot_device(snap, 0), "cpu") == 0);
  ebb_pool_snapshot_destroy(snap);
  ebb_lease_destroy(lease);
  CHECK(ebb_pool_used(pool, "cpu") > 0);
  /* The body's error is the call's: convnet takes no [1,64] input. */
  CHECK_CODE(ebb_pool_run_with_recovery(pool, "conv", NULL, 1, run_tiny, x), EBB_INVALID_ARGUMENT, "'x'");
  CHECK_OK(ebb_pool_run_with_recovery(pool, "tiny", NULL, 1, run_tiny, x));
  CHECK_CODE(ebb_pool_run_with_recovery(pool, "tiny", NULL, 1, refuse, NULL), EBB_CANCELLED, "the body said no");
  CHECK_OK(ebb_pool_snapshot(pool, &snap));
  CHECK(ebb_pool_snapshot_count(snap) == 2 && ebb_pool_snapshot_pinned(snap, 0) + ebb_pool_snapshot_pinned(snap, 1) == 1);
  ebb_pool_snapshot_destroy(snap);
  CHECK_OK(ebb_pool_unload(pool, "tiny"));
  CHECK(events.evictions == 1 && strcmp(events.last_reason, "unload") == 0);
  /* A lease keeps its pool alive after the pool's handle is gone. */
  CHECK_OK(ebb_pool_acquire(pool, "tiny", NULL, 1, &lease));
  CHECK_OK(ebb_pool_remove(pool, "conv"));
  CHECK_CODE(ebb_pool_load(pool, "conv"), EBB_NOT_FOUND, "conv");
  ebb_pool_destroy(pool);
  CHECK_OK(run_tiny(x, ebb_lease_session(lease)));
  ebb_lease_destroy(lease);
  ebb_tensor_destroy(x);
}

int main(void) {
  ebb_status_t* st = ebb_runtime_create("{}", 2, &g_rt);
  if (st) {
    fprintf(stderr, "ebb_runtime_create: %s\n", ebb_status_message(st));
    ebb_status_destroy(st);
    return 1;
  }
  RUN_TEST(test_versions);
  RUN_TEST(test_signature);
  RUN_TEST(test_outputs_equal_cxx);
  RUN_TEST(test_caller_buffers);
  RUN_TEST(test_release_at_operation_end);
  RUN_TEST(test_cache);
  RUN_TEST(test_ready_made_operations);
  RUN_TEST(test_strings);
  RUN_TEST(test_threads);
  RUN_TEST(test_pool);
  ebb_runtime_destroy(g_rt);
  /* Every handle is gone: a new runtime may own the shared arena again. */
  ebb_runtime_t* again = NULL;
  st = ebb_runtime_create(NULL, 0, &again);
  if (st) {
    fprintf(stderr, "a second runtime after the first was destroyed: %s\n", ebb_status_message(st));
    ebb_status_destroy(st);
    ++g_failures;
  }
  ebb_runtime_destroy(again);
  return report_failures();
}
