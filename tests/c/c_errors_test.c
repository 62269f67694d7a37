/* The error paths of the C API from C (C11): NULL handles and arguments, wrong dtypes, shapes and
 * names, bad policies, files and devices, misuse of operations, accessors on NULL; each gives a
 * code and a message and never crashes. Then a real out-of-memory: the shared arena capped at
 * 16 MiB, a run that needs more gives EBB_RESOURCE_EXHAUSTED with a readable message, the session
 * leaves the cache, and the next load works. Run under ASan too (make asan): no leaks. */
#include "c_test.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>

static ebb_runtime_t* g_rt = NULL;

static void test_status_and_names(void) {
  CHECK(ebb_status_code(NULL) == EBB_OK && strcmp(ebb_status_message(NULL), "") == 0);
  CHECK(ebb_status_create(EBB_OK, "fine") == NULL);
  ebb_status_t* st = ebb_status_create((ebb_code_t)42, NULL);
  CHECK(ebb_status_code(st) == EBB_INTERNAL && strcmp(ebb_status_message(st), "") == 0);
  ebb_status_destroy(st);
  ebb_status_destroy(NULL);
  CHECK(strcmp(ebb_code_name((ebb_code_t)99), "unknown") == 0);
  CHECK(strcmp(ebb_dtype_name((ebb_dtype_t)99), "") == 0 && ebb_dtype_size((ebb_dtype_t)99) == 0);
  CHECK(strcmp(ebb_pool_state_name((ebb_pool_state_t)7), "") == 0);
}

/* Every handle-taking call with NULL: an EBB_INVALID_ARGUMENT naming the argument, or a neutral value. */
static void test_null_handles(void) {
  ebb_session_t* s = (ebb_session_t*)1;  /* must be reset to NULL on error */
  ebb_tensors_t* out = (ebb_tensors_t*)1;
  ebb_memory_t* memory = NULL;
  ebb_operation_t* op = NULL;
  ebb_pool_t* pool = NULL;
  ebb_lease_t* lease = NULL;
  ebb_pool_snapshot_t* snap = NULL;
  CHECK_CODE(ebb_runtime_create(NULL, 0, NULL), EBB_INVALID_ARGUMENT, "out is NULL");
  CHECK_CODE(ebb_runtime_create_from_file(NULL, NULL), EBB_INVALID_ARGUMENT, "out");
  CHECK_CODE(ebb_runtime_load(NULL, model_path("tiny"), NULL, &s), EBB_INVALID_ARGUMENT, "runtime is NULL");
  CHECK(s == NULL);
  CHECK_CODE(ebb_runtime_load(g_rt, NULL, NULL, &s), EBB_INVALID_ARGUMENT, "model_path is NULL");
  CHECK_CODE(ebb_runtime_load(g_rt, model_path("tiny"), NULL, NULL), EBB_INVALID_ARGUMENT, "out is NULL");
  CHECK_CODE(ebb_runtime_load_bytes(g_rt, NULL, 10, NULL, &s), EBB_INVALID_ARGUMENT, "bytes is NULL");
  CHECK_CODE(ebb_runtime_trim(NULL), EBB_INVALID_ARGUMENT, "runtime");
  CHECK_CODE(ebb_runtime_memory(NULL, &memory), EBB_INVALID_ARGUMENT, "runtime");
  CHECK_CODE(ebb_session_run(NULL, NULL, NULL, 0, NULL, 0, &out), EBB_INVALID_ARGUMENT, "session is NULL");
  CHECK(out == NULL);
  CHECK_CODE(ebb_session_run_into(NULL, NULL, NULL, 0, NULL, NULL, 0), EBB_INVALID_ARGUMENT, "session");
  char* value = NULL;
  CHECK_CODE(ebb_session_metadata(NULL, "k", &value), EBB_INVALID_ARGUMENT, "session");
  CHECK_CODE(ebb_operation_create(NULL, 0, NULL, &op), EBB_INVALID_ARGUMENT, "runtime");
  CHECK_CODE(ebb_operation_run(NULL, NULL, NULL, NULL, 0, NULL, 0, &out), EBB_INVALID_ARGUMENT, "operation");
  CHECK_CODE(ebb_operation_end(NULL), EBB_INVALID_ARGUMENT, "operation");
  CHECK_CODE(ebb_run_per_frame(NULL, NULL, NULL, 0, NULL, &out), EBB_INVALID_ARGUMENT, "runtime");
  CHECK_CODE(ebb_run_joint(g_rt, NULL, NULL, 0, NULL, &out), EBB_INVALID_ARGUMENT, "session");
  CHECK_CODE(ebb_run_tiled(g_rt, NULL, NULL, 0, 64, 8, 0, 1, NULL, &out), EBB_INVALID_ARGUMENT, "session");
  CHECK_CODE(ebb_run_pipeline(g_rt, NULL, 2, NULL, 0, NULL, &out), EBB_INVALID_ARGUMENT, "stages");
  CHECK_CODE(ebb_pool_create(NULL, NULL, NULL, NULL, &pool), EBB_INVALID_ARGUMENT, "runtime");
  CHECK_CODE(ebb_pool_add(NULL, "a", "b", NULL, 0, NULL), EBB_INVALID_ARGUMENT, "pool");
  CHECK_CODE(ebb_pool_acquire(NULL, "a", NULL, 1, &lease), EBB_INVALID_ARGUMENT, "pool");
  CHECK_CODE(ebb_pool_run_with_recovery(NULL, "a", NULL, 1, NULL, NULL), EBB_INVALID_ARGUMENT, "pool");
  CHECK_CODE(ebb_pool_load(NULL, "a"), EBB_INVALID_ARGUMENT, "pool");
  CHECK_CODE(ebb_pool_unload(NULL, "a"), EBB_INVALID_ARGUMENT, "pool");
  CHECK_CODE(ebb_pool_remove(NULL, "a"), EBB_INVALID_ARGUMENT, "pool");
  CHECK_CODE(ebb_pool_status(NULL, "a", &snap), EBB_INVALID_ARGUMENT, "pool");
  CHECK_CODE(ebb_pool_snapshot(NULL, &snap), EBB_INVALID_ARGUMENT, "pool");
  CHECK_CODE(ebb_load_options_set_device(NULL, "cpu"), EBB_INVALID_ARGUMENT, "options");
  CHECK_CODE(ebb_tensor_string(NULL, 0, NULL, NULL), EBB_INVALID_ARGUMENT, "tensor");
  /* Accessors and destroyers take NULL. */
  CHECK(ebb_session_input_count(NULL) == 0 && ebb_session_input(NULL, 0, NULL, NULL, NULL, NULL) == 0);
  CHECK(strcmp(ebb_session_name(NULL), "") == 0 && strcmp(ebb_session_device(NULL), "") == 0);
  CHECK(ebb_session_run_count(NULL) == 0 && ebb_session_same(NULL, NULL) == 0);
  CHECK(ebb_tensor_rank(NULL) == 0 && ebb_tensor_shape(NULL) == NULL && ebb_tensor_data(NULL) == NULL);
  CHECK(ebb_tensors_count(NULL) == 0 && ebb_tensors_get(NULL, 0) == NULL && ebb_tensors_take(NULL, 0) == NULL);
  CHECK(ebb_memory_arena_count(NULL) == 0 && ebb_memory_arena_stat(NULL, 0, EBB_ARENA_RESERVED) == -1);
  CHECK(ebb_memory_find_arena(NULL, "cpu:shared") == -1 && strcmp(ebb_memory_json(NULL), "") == 0);
  CHECK(ebb_pool_contains(NULL, "a") == 0 && ebb_pool_budget(NULL, "cpu") == 0);
  CHECK(ebb_lease_session(NULL) == NULL && ebb_operation_ended(NULL) == 1);
  CHECK(ebb_runtime_unload_path(NULL, "x") == 0 && ebb_runtime_load_count(NULL) == 0);
  ebb_runtime_clear(NULL);
  ebb_pool_reap_now(NULL);
  ebb_control_cancel(NULL);
  ebb_load_options_set_strict(NULL, 1);
  ebb_session_destroy(NULL);
  ebb_tensor_destroy(NULL);
  ebb_tensors_destroy(NULL);
  ebb_memory_destroy(NULL);
  ebb_operation_destroy(NULL);
  ebb_pool_destroy(NULL);
  ebb_lease_destroy(NULL);
  ebb_pool_snapshot_destroy(NULL);
  ebb_runtime_destroy(NULL);
  ebb_free(NULL);
}

static void test_bad_tensors(void) {
  ebb_tensor_t* t = NULL;
  const int64_t shape[2] = {2, 3};
  const int64_t negative[2] = {2, -3};
  CHECK_CODE(ebb_tensor_create(EBB_FLOAT32, negative, 2, &t), EBB_INVALID_ARGUMENT, "negative");
  CHECK_CODE(ebb_tensor_create(EBB_FLOAT32, NULL, 2, &t), EBB_INVALID_ARGUMENT, "shape is NULL");
  CHECK_CODE(ebb_tensor_create((ebb_dtype_t)77, shape, 2, &t), EBB_INVALID_ARGUMENT, "unknown dtype 77");
  CHECK_CODE(ebb_tensor_create(EBB_BYTES, shape, 2, &t), EBB_INVALID_ARGUMENT, "ebb_tensor_create_strings");
  CHECK(t == NULL);
  float data[7] = {0};
  CHECK_CODE(ebb_tensor_create_copy(EBB_FLOAT32, shape, 2, data, 5 * sizeof(float), &t), EBB_INVALID_ARGUMENT,
             "20 bytes given");
  CHECK_CODE(ebb_tensor_create_copy(EBB_FLOAT32, shape, 2, NULL, 6 * sizeof(float), &t), EBB_INVALID_ARGUMENT,
             "data is NULL");
  CHECK_CODE(ebb_tensor_borrow(EBB_FLOAT32, shape, 2, (char*)data + 1, 6 * sizeof(float), &t), EBB_INVALID_ARGUMENT,
             "not aligned");
  CHECK_CODE(ebb_tensor_borrow(EBB_FLOAT32, shape, 2, data, 7 * sizeof(float), &t), EBB_INVALID_ARGUMENT,
             "takes 24");
  const char* values[] = {"a", "b"};
  const size_t lengths[] = {1, 1};
  CHECK_CODE(ebb_tensor_create_strings(shape, 2, values, lengths, 2, &t), EBB_INVALID_ARGUMENT, "2 values");
  CHECK_OK(ebb_tensor_create_copy(EBB_FLOAT32, shape, 2, data, 6 * sizeof(float), &t));
  const char* s = NULL;
  size_t n = 0;
  CHECK_CODE(ebb_tensor_string(t, 0, &s, &n), EBB_INVALID_ARGUMENT, "not BYTES");
  ebb_tensor_destroy(t);
  /* A scalar and an empty tensor are fine. */
  CHECK_OK(ebb_tensor_create(EBB_INT64, NULL, 0, &t));
  CHECK(ebb_tensor_element_count(t) == 1 && ebb_tensor_byte_size(t) == 8 && ebb_tensor_shape(t) == NULL);
  ebb_tensor_destroy(t);
  const int64_t empty[1] = {0};
  CHECK_OK(ebb_tensor_borrow(EBB_FLOAT32, empty, 1, NULL, 0, &t));
  ebb_tensor_destroy(t);
}

/* Issue 32, finding 2: shapes whose element count or byte size overflows were accepted ([2^62] FP32
 * had 0 bytes, [2^62+1,4] was made from 16 bytes) and a run then failed `internal` with ORT's text.
 * Every constructor refuses them, as EBB_INVALID_ARGUMENT, before allocating. A zero dim makes an
 * empty tensor of large other dims, as long as their product fits. */
static void test_overflowing_shapes(void) {
  ebb_tensor_t* t = NULL;
  const int64_t huge[1] = {(int64_t)1 << 62};
  const int64_t wraps[2] = {((int64_t)1 << 62) + 1, 4};
  const int64_t max[2] = {INT64_MAX, INT64_MAX};
  float data[4] = {0};
  CHECK_CODE(ebb_tensor_create(EBB_FLOAT32, huge, 1, &t), EBB_INVALID_ARGUMENT, "overflows");
  CHECK_CODE(ebb_tensor_create(EBB_UINT8, max, 2, &t), EBB_INVALID_ARGUMENT, "overflows");
  CHECK_CODE(ebb_tensor_create_copy(EBB_FLOAT32, huge, 1, data, 0, &t), EBB_INVALID_ARGUMENT, "overflows");
  CHECK_CODE(ebb_tensor_create_copy(EBB_FLOAT32, wraps, 2, data, 16, &t), EBB_INVALID_ARGUMENT, "overflows");
  CHECK_CODE(ebb_tensor_borrow(EBB_FLOAT32, wraps, 2, data, 16, &t), EBB_INVALID_ARGUMENT, "overflows");
  CHECK_CODE(ebb_tensor_create_strings(wraps, 2, NULL, NULL, 0, &t), EBB_INVALID_ARGUMENT, "overflows");
  CHECK(t == NULL);
  /* The non-zero dims' product is checked even beside a zero dim (no stride over them can wrap). */
  const int64_t zero_between_huge[3] = {(int64_t)1 << 62, 0, (int64_t)1 << 62};
  CHECK_CODE(ebb_tensor_create(EBB_FLOAT32, zero_between_huge, 3, &t), EBB_INVALID_ARGUMENT, "overflows");
  const int64_t zero[3] = {(int64_t)1 << 40, 0, (int64_t)1 << 20};
  CHECK_OK(ebb_tensor_create(EBB_FLOAT32, zero, 3, &t));
  CHECK(ebb_tensor_element_count(t) == 0 && ebb_tensor_byte_size(t) == 0);
  ebb_tensor_destroy(t);
}

static void test_bad_runtime_and_loads(void) {
  ebb_runtime_t* rt = NULL;
  const char* typo = "{\"cpu\": {\"arena_setings\": {}}}";
  CHECK_CODE(ebb_runtime_create(typo, strlen(typo), &rt), EBB_INVALID_ARGUMENT, "arena_setings");
  CHECK_CODE(ebb_runtime_create("{nope", 5, &rt), EBB_INVALID_ARGUMENT, "not valid JSON");
  CHECK_CODE(ebb_runtime_create_from_file("/nonexistent/policy.json", &rt), EBB_NOT_FOUND, "policy.json");
  /* Round four: the policy file is a regular file of at most 1 MiB (a device was read until memory
   * ran out; a FIFO blocked the call), the text is read to its length (what followed a NUL was
   * ignored), and the thread count is bounded (thousands never answered). */
  CHECK_CODE(ebb_runtime_create_from_file("/dev/zero", &rt), EBB_INVALID_ARGUMENT, "not a regular file");
  const char with_nul[] = "{\"release\": \"never\"}\0{\"relese\": 1}";
  CHECK_CODE(ebb_runtime_create(with_nul, sizeof with_nul - 1, &rt), EBB_INVALID_ARGUMENT, "NUL byte");
  const char* threads = "{\"intra_op_threads\": 3000}";
  CHECK_CODE(ebb_runtime_create(threads, strlen(threads), &rt), EBB_INVALID_ARGUMENT, "intra_op_threads");
  /* The shared arena has an owner already (g_rt). */
  CHECK_CODE(ebb_runtime_create(NULL, 0, &rt), EBB_FAILED_PRECONDITION, "one Runtime per process");
  CHECK(rt == NULL);
  ebb_session_t* s = NULL;
  CHECK_CODE(ebb_runtime_load(g_rt, "/nonexistent/model.onnx", NULL, &s), EBB_NOT_FOUND, "/nonexistent/model.onnx");
  CHECK_CODE(ebb_runtime_load_bytes(g_rt, "not a model", 11, NULL, &s), EBB_INVALID_ARGUMENT, NULL);
  ebb_load_options_t* options = ebb_load_options_create();
  CHECK_CODE(ebb_load_options_set_device(options, "tpu:3"), EBB_INVALID_ARGUMENT, "tpu:3");
  CHECK_CODE(ebb_load_options_set_device(options, NULL), EBB_INVALID_ARGUMENT, "device is NULL");
  ebb_load_options_destroy(options);
  CHECK(s == NULL);
}

/* Wrong input names, dtypes and shapes, unknown outputs: each error names the tensor. */
static void test_bad_runs(void) {
  ebb_session_t* s = NULL;
  CHECK_OK(ebb_runtime_load(g_rt, model_path("convnet"), NULL, &s));
  ebb_tensor_t* x = image(16, 16, 1);
  const int64_t ishape[4] = {1, 3, 16, 16};
  ebb_tensor_t* wrong_type = filled(EBB_INT64, ishape, 4, 1);
  const int64_t flat[2] = {3, 256};
  ebb_tensor_t* wrong_rank = filled(EBB_FLOAT32, flat, 2, 1);
  ebb_tensors_t* out = NULL;
  const char* x_name[] = {"x"};
  const char* other[] = {"image"};
  const ebb_tensor_t* good[] = {x};
  const ebb_tensor_t* typed[] = {wrong_type};
  const ebb_tensor_t* ranked[] = {wrong_rank};
  const ebb_tensor_t* nulls[] = {NULL};
  CHECK_CODE(ebb_session_run(s, x_name, typed, 1, NULL, 0, &out), EBB_INVALID_ARGUMENT, "'x'");
  CHECK_CODE(ebb_session_run(s, x_name, ranked, 1, NULL, 0, &out), EBB_INVALID_ARGUMENT, "'x'");
  CHECK_CODE(ebb_session_run(s, other, good, 1, NULL, 0, &out), EBB_INVALID_ARGUMENT, "image");
  CHECK_CODE(ebb_session_run(s, NULL, NULL, 0, NULL, 0, &out), EBB_INVALID_ARGUMENT, "x");
  CHECK_CODE(ebb_session_run(s, x_name, nulls, 1, NULL, 0, &out), EBB_INVALID_ARGUMENT, "inputs[0] (input 'x')");
  CHECK_CODE(ebb_session_run(s, NULL, good, 1, NULL, 0, &out), EBB_INVALID_ARGUMENT, "input_names is NULL");
  const char* unknown[] = {"z"};
  CHECK_CODE(ebb_session_run(s, x_name, good, 1, unknown, 1, &out), EBB_INVALID_ARGUMENT, "'z'");
  const char* null_name[] = {NULL};
  CHECK_CODE(ebb_session_run(s, x_name, good, 1, null_name, 1, &out), EBB_INVALID_ARGUMENT, "output_names[0]");
  /* Issue 32: an output asked for twice is refused, as the server refuses it. */
  const char* twice[] = {"y", "y"};
  CHECK_CODE(ebb_session_run(s, x_name, good, 1, twice, 2, &out), EBB_INVALID_ARGUMENT, "'y'");
  CHECK_CODE(ebb_session_run_into(s, x_name, good, 1, x_name, NULL, 0), EBB_INVALID_ARGUMENT, "no outputs");
  CHECK(out == NULL);
  /* Ready-made operations: an empty pipeline, tiles without a core, a frame of the wrong kind. */
  CHECK_CODE(ebb_run_pipeline(g_rt, NULL, 0, good, 1, NULL, &out), EBB_INVALID_ARGUMENT, "at least one model");
  CHECK_CODE(ebb_run_tiled(g_rt, s, good, 1, 16, 8, 0, 1, NULL, &out), EBB_INVALID_ARGUMENT, NULL);
  CHECK_CODE(ebb_run_tiled(g_rt, s, good, 1, INT64_MAX, INT64_MAX, 0, 1, NULL, &out), EBB_INVALID_ARGUMENT, NULL);
  CHECK_CODE(ebb_run_tiled(g_rt, s, good, 1, -5, 0, 0, 1, NULL, &out), EBB_INVALID_ARGUMENT, NULL);
  /* Issue 32, finding 1: a tile of 2^31 over an 8x8 frame wrapped the tile's byte size to 0 (a heap
   * overflow in ExtractTile). The tile is clamped to the frame: one run, the frame's result. */
  ebb_tensor_t* small = image(8, 8, 3);
  const ebb_tensor_t* smalls[] = {small};
  CHECK_OK(ebb_run_tiled(g_rt, s, smalls, 1, (int64_t)1 << 31, 2, 0, 1, NULL, &out));
  CHECK(ebb_tensors_count(out) == 1 && ebb_tensor_element_count(ebb_tensors_get(out, 0)) == 3 * 8 * 8);
  ebb_tensors_destroy(out);
  out = NULL;
  ebb_tensor_destroy(small);
  CHECK_CODE(ebb_run_per_frame(g_rt, s, typed, 1, NULL, &out), EBB_INVALID_ARGUMENT, NULL);
  CHECK_CODE(ebb_run_per_frame(g_rt, s, nulls, 1, NULL, &out), EBB_INVALID_ARGUMENT, "frames[0] is NULL");
  /* Operations: negative plan, a failed run ends it, later runs are refused. */
  ebb_operation_t* op = NULL;
  CHECK_CODE(ebb_operation_create(g_rt, -1, NULL, &op), EBB_INVALID_ARGUMENT, "planned_runs");
  CHECK_OK(ebb_operation_create(g_rt, 0, NULL, &op));
  CHECK_CODE(ebb_operation_run(op, s, x_name, typed, 1, NULL, 0, &out), EBB_INVALID_ARGUMENT, "'x'");
  CHECK(ebb_operation_ended(op) && ebb_operation_released(op));
  CHECK_CODE(ebb_operation_run(op, s, x_name, good, 1, NULL, 0, &out), EBB_FAILED_PRECONDITION, "already ended");
  ebb_operation_destroy(op);
  /* Abandoned by its caller: ended and released at once, later runs refused; NULL is nothing. */
  CHECK_OK(ebb_operation_create(g_rt, 0, NULL, &op));
  CHECK_OK(ebb_operation_run(op, s, x_name, good, 1, NULL, 0, &out));
  ebb_tensors_destroy(out);
  out = NULL;
  CHECK(!ebb_operation_ended(op) && !ebb_operation_released(op));
  ebb_operation_abandon(op);
  ebb_operation_abandon(NULL);
  CHECK(ebb_operation_ended(op) && ebb_operation_released(op) && ebb_operation_runs_done(op) == 1);
  CHECK_CODE(ebb_operation_run(op, s, x_name, good, 1, NULL, 0, &out), EBB_FAILED_PRECONDITION, "abandoned");
  CHECK_OK(ebb_operation_end(op));
  ebb_operation_destroy(op);
  /* The session still works after all that. */
  CHECK_OK(ebb_session_run(s, x_name, good, 1, NULL, 0, &out));
  ebb_tensors_destroy(out);
  ebb_tensor_destroy(x);
  ebb_tensor_destroy(wrong_type);
  ebb_tensor_destroy(wrong_rank);
  ebb_session_destroy(s);
}

static void test_bad_pool_calls(void) {
  ebb_pool_t* pool = NULL;
  CHECK_OK(ebb_pool_create(g_rt, NULL, NULL, NULL, &pool));
  ebb_lease_t* lease = NULL;
  CHECK_CODE(ebb_pool_acquire(pool, "ghost", NULL, 1, &lease), EBB_NOT_FOUND, "ghost");
  CHECK_CODE(ebb_pool_add(pool, NULL, "x", NULL, 0, NULL), EBB_INVALID_ARGUMENT, "name is NULL");
  CHECK_OK(ebb_pool_add(pool, "missing", "/nonexistent/model.onnx", NULL, 0, NULL));
  CHECK_CODE(ebb_pool_acquire(pool, "missing", NULL, 1, &lease), EBB_NOT_FOUND, "/nonexistent/model.onnx");
  CHECK_CODE(ebb_pool_run_with_recovery(pool, "missing", NULL, 1, NULL, NULL), EBB_INVALID_ARGUMENT, "body");
  ebb_pool_snapshot_t* snap = NULL;
  CHECK_CODE(ebb_pool_status(pool, "ghost", &snap), EBB_NOT_FOUND, "ghost");
  CHECK_CODE(ebb_pool_remove(pool, "ghost"), EBB_NOT_FOUND, "ghost");
  CHECK(lease == NULL && snap == NULL);
  CHECK(ebb_pool_snapshot_count(NULL) == 0 && strcmp(ebb_pool_snapshot_name(NULL, 3), "") == 0);
  ebb_pool_destroy(pool);
  /* Issue 32: a budget fraction of NaN converted to INT64_MIN, and a negative one was taken. */
  ebb_pool_options_t* options = ebb_pool_options_create();
  CHECK(options != NULL);
  const double bad_fractions[] = {NAN, -5, 1.5, INFINITY};
  for (size_t i = 0; i < sizeof bad_fractions / sizeof bad_fractions[0]; ++i) {
    ebb_pool_options_set_cpu_budget(options, 0, bad_fractions[i]);
    CHECK_CODE(ebb_pool_create(g_rt, options, NULL, NULL, &pool), EBB_INVALID_ARGUMENT, "fraction");
    CHECK(pool == NULL);
  }
  ebb_pool_options_set_cpu_budget(options, -5, 0.5);
  CHECK_CODE(ebb_pool_create(g_rt, options, NULL, NULL, &pool), EBB_INVALID_ARGUMENT, "-5");
  ebb_pool_options_set_cpu_budget(options, 0, 0.5);
  ebb_pool_options_set_cuda_budget(options, 0, NAN);
  CHECK_CODE(ebb_pool_create(g_rt, options, NULL, NULL, &pool), EBB_INVALID_ARGUMENT, "fraction");
  ebb_pool_options_set_cuda_budget(options, 0, 0.9);
  CHECK_OK(ebb_pool_create(g_rt, options, NULL, NULL, &pool));
  CHECK(ebb_pool_budget(pool, "cpu") > 0);
  ebb_pool_destroy(pool);
  ebb_pool_options_destroy(options);
}

/* Issue 32: the pool's last lease destroyed from on_event, on the pool's keep-alive thread, after
 * ebb_pool_destroy: the pool's destructor joined its own thread (std::terminate). */
static ebb_lease_t* _Atomic g_last_lease = NULL;
static atomic_int g_evictions = 0;

static void destroy_last_lease(void* user_data, const ebb_pool_event_t* event) {
  (void)user_data;
  if (ebb_pool_event_kind(event) != EBB_POOL_EVENT_EVICT) return;
  ebb_lease_destroy(atomic_exchange(&g_last_lease, NULL));
  atomic_fetch_add(&g_evictions, 1);
}

static void sleep_ms(long ms) {
  const struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static void test_last_lease_destroyed_on_the_keep_alive_thread(void) {
  ebb_pool_t* pool = NULL;
  CHECK_OK(ebb_pool_create(g_rt, NULL, destroy_last_lease, NULL, &pool));
  CHECK_OK(ebb_pool_add(pool, "held", model_path("tiny"), NULL, 0, NULL));
  CHECK_OK(ebb_pool_add(pool, "brief", model_path("convnet"), NULL, 0, NULL));
  ebb_lease_t* held = NULL;
  ebb_lease_t* brief = NULL;
  CHECK_OK(ebb_pool_acquire(pool, "held", NULL, 1, &held));
  const int64_t keep_alive_ms = 1;
  CHECK_OK(ebb_pool_acquire(pool, "brief", &keep_alive_ms, 1, &brief));
  atomic_store(&g_last_lease, held);
  ebb_pool_destroy(pool);  /* the lease keeps it */
  ebb_lease_destroy(brief);  /* idle: the keep-alive thread evicts it within ~50 ms, then the callback runs */
  for (int i = 0; i < 500 && atomic_load(&g_evictions) == 0; ++i) sleep_ms(10);
  CHECK(atomic_load(&g_evictions) == 1 && atomic_load(&g_last_lease) == NULL);
  sleep_ms(200);  /* the pool goes on a thread of its own: the process is still here */
}


/* The shared arena capped at 16 MiB: a 32x32 run fits, a 1024x1024 one (~128 MiB of activations)
 * gives EBB_RESOURCE_EXHAUSTED; the session is dropped and the next load builds it afresh. */
static void test_out_of_memory(void) {
  ebb_runtime_destroy(g_rt);  /* one shared-arena runtime at a time */
  g_rt = NULL;
  const char* policy = "{\"cpu\": {\"arena_settings\": {\"max_bytes\": 16777216}}}";
  ebb_runtime_t* rt = NULL;
  CHECK_OK(ebb_runtime_create(policy, strlen(policy), &rt));
  CHECK(arena_stat(rt, "cpu:shared", EBB_ARENA_LIMIT) == 16 << 20);
  ebb_session_t* s = NULL;
  CHECK_OK(ebb_runtime_load(rt, model_path("convnet"), NULL, &s));
  ebb_tensor_t* small = image(32, 32, 1);
  ebb_tensor_t* big = image(1024, 1024, 2);
  const char* names[] = {"x"};
  const ebb_tensor_t* fits[] = {small};
  const ebb_tensor_t* too_big[] = {big};
  ebb_tensors_t* out = NULL;
  CHECK_OK(ebb_session_run(s, names, fits, 1, NULL, 0, &out));
  ebb_tensors_destroy(out);
  const uint64_t loads = ebb_runtime_load_count(rt);
  CHECK_CODE(ebb_session_run(s, names, too_big, 1, NULL, 0, &out), EBB_RESOURCE_EXHAUSTED, "shared CPU arena");
  CHECK(out == NULL && ebb_runtime_cached_count(rt) == 0);
  ebb_session_t* fresh = NULL;
  CHECK_OK(ebb_runtime_load(rt, model_path("convnet"), NULL, &fresh));
  CHECK(!ebb_session_same(s, fresh) && ebb_runtime_load_count(rt) == loads + 1);
  CHECK_OK(ebb_session_run(fresh, names, fits, 1, NULL, 0, &out));
  CHECK(ebb_tensor_element_count(ebb_tensors_get(out, 0)) == 3 * 32 * 32);
  ebb_tensors_destroy(out);
  CHECK(shared_reserved(rt) <= 16 << 20);
  /* Inside an operation: the failed run ends it and its memory goes back. */
  ebb_operation_t* op = NULL;
  CHECK_OK(ebb_operation_create(rt, 2, NULL, &op));
  CHECK_OK(ebb_operation_run(op, fresh, names, fits, 1, NULL, 0, &out));
  ebb_tensors_destroy(out);
  CHECK_CODE(ebb_operation_run(op, fresh, names, too_big, 1, NULL, 0, &out), EBB_RESOURCE_EXHAUSTED, NULL);
  CHECK(ebb_operation_ended(op) && shared_reserved(rt) <= 64 * 1024);
  ebb_operation_destroy(op);
  ebb_tensor_destroy(small);
  ebb_tensor_destroy(big);
  ebb_session_destroy(s);
  ebb_session_destroy(fresh);
  ebb_runtime_destroy(rt);
}

int main(void) {
  if (!create_shared_runtime(&g_rt)) return 1;
  RUN_TEST(test_status_and_names);
  RUN_TEST(test_null_handles);
  RUN_TEST(test_bad_tensors);
  RUN_TEST(test_overflowing_shapes);
  RUN_TEST(test_bad_runtime_and_loads);
  RUN_TEST(test_bad_runs);
  RUN_TEST(test_bad_pool_calls);
  RUN_TEST(test_last_lease_destroyed_on_the_keep_alive_thread);
  RUN_TEST(test_out_of_memory);
  ebb_runtime_destroy(g_rt);
  return report_failures();
}
