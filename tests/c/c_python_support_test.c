/* The parts of the C API the Python package (python/ebb) needed besides the rest: images, model
 * resolution and config, a session's release targets and shared handles, and the pool's admission
 * details (acquire and run with every option, wait events, snapshots, predictions and admission as
 * JSON). Each against the real library on the bundled models and fixtures. */
#include "c_test.h"

static ebb_runtime_t* g_rt = NULL;

static void test_images_round_trip(void) {
  ebb_tensor_t* image = NULL;
  CHECK_OK(ebb_image_read(fixture("astronaut_96.png"), &image));
  CHECK(ebb_tensor_dtype(image) == EBB_UINT8 && ebb_tensor_rank(image) == 3);
  CHECK(ebb_tensor_shape(image)[0] == 96 && ebb_tensor_shape(image)[1] == 96 && ebb_tensor_shape(image)[2] == 3);
  ebb_tensor_t* tensor = NULL;
  CHECK_OK(ebb_image_to_tensor(image, 3, &tensor));
  CHECK(ebb_tensor_dtype(tensor) == EBB_FLOAT32 && ebb_tensor_rank(tensor) == 4 && ebb_tensor_shape(tensor)[1] == 3);
  const float first = ((const float*)ebb_tensor_data(tensor))[0];
  CHECK(first == (float)((const uint8_t*)ebb_tensor_data(image))[0] / 255.0f);
  ebb_tensor_t* back = NULL;
  CHECK_OK(ebb_tensor_to_image(tensor, &back));
  CHECK(ebb_tensor_bitwise_equal(back, image));
  char file[] = "/tmp/ebb_c_image_XXXXXX";
  const int fd = mkstemp(file);
  CHECK(fd >= 0);
  close(fd);
  CHECK_OK(ebb_image_write_png(file, image));
  ebb_tensor_t* again = NULL;
  CHECK_OK(ebb_image_read(file, &again));
  CHECK(ebb_tensor_bitwise_equal(again, image));
  CHECK_OK(ebb_image_write_png(file, tensor));  /* a float tensor in [0,1] is written as its image */
  ebb_tensor_t* from_tensor = NULL;
  CHECK_OK(ebb_image_read(file, &from_tensor));
  CHECK(ebb_tensor_bitwise_equal(from_tensor, image));
  unlink(file);
  const int64_t shape[2] = {2, 2};
  ebb_tensor_t* doubles = filled(EBB_FLOAT64, shape, 2, 1);
  CHECK_CODE(ebb_image_write_png(file, doubles), EBB_INVALID_ARGUMENT, "UINT8 tensor [H,W,C]");
  ebb_tensor_t* refused = NULL;  /* each failing call leaves its out-parameter NULL */
  CHECK_CODE(ebb_image_to_tensor(image, 2, &refused), EBB_INVALID_ARGUMENT, NULL);
  CHECK(refused == NULL);
  CHECK_CODE(ebb_image_read("/nonexistent/x.png", &refused), EBB_NOT_FOUND, NULL);
  CHECK(refused == NULL);
  CHECK_CODE(ebb_image_read(NULL, &refused), EBB_INVALID_ARGUMENT, "path is NULL");
  ebb_tensor_destroy(doubles);
  ebb_tensor_destroy(from_tensor);
  ebb_tensor_destroy(again);
  ebb_tensor_destroy(back);
  ebb_tensor_destroy(tensor);
  ebb_tensor_destroy(image);
}

static void test_model_resolution_and_config(void) {
  char* path = NULL;
  char* device = NULL;
  CHECK_OK(ebb_model_resolve("convnet", EBB_MODELS_DIR, "models=", "cpu", &path, &device));
  CHECK(strcmp(path, model_path("convnet")) == 0 && strcmp(device, "cpu") == 0);
  ebb_free(path);
  ebb_free(device);
  CHECK_OK(ebb_model_resolve(model_path("tiny"), NULL, NULL, NULL, &path, &device));
  CHECK(strcmp(path, model_path("tiny")) == 0 && strcmp(device, "auto") == 0);
  ebb_free(path);
  ebb_free(device);
  CHECK_CODE(ebb_model_resolve("no_such_model", EBB_MODELS_DIR, "models=", NULL, &path, &device), EBB_NOT_FOUND,
             "models=");
  CHECK(path == NULL && device == NULL);
  char folder[4096];
  snprintf(folder, sizeof folder, "%s/waifu2x_scale2x", EBB_MODELS_DIR);
  char* json = NULL;
  CHECK_OK(ebb_model_config_json(folder, &json));
  CHECK(strstr(json, "\"kind\":\"image_to_image\"") != NULL);
  ebb_free(json);
  snprintf(folder, sizeof folder, "%s/convnet", EBB_MODELS_DIR);
  CHECK_OK(ebb_model_config_json(folder, &json));
  CHECK(strstr(json, "\"kind\":\"tensor\"") != NULL);
  ebb_free(json);
}

static void test_session_targets_and_share(void) {
  ebb_load_options_t* options = ebb_load_options_create();
  CHECK_OK(ebb_load_options_set_device(options, "cpu"));
  ebb_session_t* s = NULL;
  CHECK_OK(ebb_runtime_load(g_rt, model_path("convnet"), options, &s));
  ebb_load_options_destroy(options);
  char* json = NULL;
  CHECK_OK(ebb_session_release_targets(s, &json));
  CHECK(strcmp(json, "[\"cpu:0\"]") == 0);
  ebb_free(json);
  ebb_session_t* shared = NULL;
  CHECK_OK(ebb_session_share(s, &shared));
  CHECK(ebb_session_same(s, shared));
  ebb_session_destroy(s);  /* the shared handle stays valid and runs */
  ebb_tensor_t* x = image(8, 8, 1);
  const char* names[] = {"x"};
  const ebb_tensor_t* inputs[] = {x};
  ebb_tensors_t* out = NULL;
  CHECK_OK(ebb_session_run(shared, names, inputs, 1, NULL, 0, &out));
  CHECK(ebb_tensors_count(out) == 1);
  ebb_tensors_destroy(out);
  ebb_tensor_destroy(x);
  ebb_session_destroy(shared);
  CHECK_CODE(ebb_session_share(NULL, &shared), EBB_INVALID_ARGUMENT, "session is NULL");
}

static int g_waits = 0;
static void count_waits(void* user_data, const ebb_pool_event_t* event) {
  (void)user_data;
  if (ebb_pool_event_kind(event) == EBB_POOL_EVENT_WAIT) ++g_waits;
}

static ebb_tensor_t* g_x = NULL;
static ebb_status_t* run_once(void* user_data, ebb_session_t* session) {
  (void)user_data;
  const char* names[] = {"x"};
  const ebb_tensor_t* inputs[] = {g_x};
  ebb_tensors_t* out = NULL;
  ebb_status_t* st = ebb_session_run(session, names, inputs, 1, NULL, 0, &out);
  ebb_tensors_destroy(out);
  return st;
}

static void test_pool_admission_details(void) {
  ebb_pool_options_t* options = ebb_pool_options_create();
  ebb_pool_options_set_memory_admission(options, 1, 1000);
  ebb_pool_options_set_wait_events(options, 1);
  ebb_pool_t* pool = NULL;
  CHECK_OK(ebb_pool_create(g_rt, options, count_waits, NULL, &pool));
  ebb_pool_options_destroy(options);
  CHECK_OK(ebb_pool_add(pool, "c", model_path("convnet"), NULL, 0, NULL));
  char* json = NULL;
  CHECK_OK(ebb_pool_predict_need_json(pool, "c", 3 * 32 * 32, &json));
  CHECK(strcmp(json, "null") == 0);  /* not measured yet */
  ebb_free(json);
  g_x = image(32, 32, 2);
  CHECK_OK(ebb_pool_run_within(pool, "c", NULL, 1, ebb_tensor_element_count(g_x), 5000, run_once, NULL));
  CHECK_OK(ebb_pool_predict_need_json(pool, "c", ebb_tensor_element_count(g_x), &json));
  CHECK(strstr(json, "\"memory_bytes\":") != NULL && strstr(json, "\"arena_at_least\":") != NULL);
  ebb_free(json);
  ebb_pool_snapshot_t* snapshot = NULL;
  CHECK_OK(ebb_pool_status(pool, "c", &snapshot));
  json = ebb_pool_snapshot_json(snapshot, 0);
  CHECK(json && strstr(json, "\"name\":\"c\"") && strstr(json, "\"state\":\"READY\"") &&
        strstr(json, "\"need_points\":[[3072,") && strstr(json, "\"out_of_memory\":0"));
  ebb_free(json);
  CHECK(ebb_pool_snapshot_json(snapshot, 1) == NULL);
  ebb_pool_snapshot_destroy(snapshot);
  json = ebb_pool_admission_json(pool);
  CHECK(json && strstr(json, "\"device\":\"cpu\"") && strstr(json, "\"admitted\":1"));
  ebb_free(json);
  ebb_lease_t* lease = NULL;
  CHECK_OK(ebb_pool_acquire_for_run(pool, "c", NULL, 1, ebb_tensor_element_count(g_x), 0, &lease));
  CHECK(ebb_pool_snapshot_count(NULL) == 0);
  run_once(NULL, ebb_lease_session(lease));
  ebb_lease_destroy(lease);
  CHECK_CODE(ebb_pool_acquire_for_run(pool, "nope", NULL, 1, -1, -1, &lease), EBB_NOT_FOUND, NULL);
  CHECK(g_waits == 0);  /* nothing had to wait: runs one at a time */
  ebb_tensor_destroy(g_x);
  ebb_pool_destroy(pool);
}

int main(void) {
  if (!create_shared_runtime(&g_rt)) return 1;
  RUN_TEST(test_images_round_trip);
  RUN_TEST(test_model_resolution_and_config);
  RUN_TEST(test_session_targets_and_share);
  RUN_TEST(test_pool_admission_details);
  ebb_runtime_destroy(g_rt);
  return report_failures();
}
