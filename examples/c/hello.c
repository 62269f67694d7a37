/* ebb's C API in 20-odd lines: load a model, run it once (one whole operation: the arena it grew
 * into is given back at its end), print what came out. Build: cc hello.c $(pkg-config --cflags --libs ebb) */
#include <ebb/c.h>
#include <stdio.h>

int main(int argc, char** argv) {
  static float pixels[3 * 64 * 64];  /* the caller's memory, read in place */
  const int64_t shape[4] = {1, 3, 64, 64};
  const char* names[1] = {"x"};
  ebb_runtime_t* rt = NULL;
  ebb_session_t* session = NULL;
  ebb_tensor_t* x = NULL;
  ebb_tensors_t* out = NULL;
  ebb_status_t* st = ebb_runtime_create(NULL, 0, &rt); /* ebb's default memory policy */
  if (!st) st = ebb_runtime_load(rt, argc > 1 ? argv[1] : "models/convnet/model.onnx", NULL, &session);
  if (!st) st = ebb_tensor_borrow(EBB_FLOAT32, shape, 4, pixels, sizeof pixels, &x);
  const ebb_tensor_t* inputs[1] = {x};
  if (!st) st = ebb_session_run(session, names, inputs, 1, NULL, 0, &out);
  if (st) fprintf(stderr, "%s: %s\n", ebb_code_name(ebb_status_code(st)), ebb_status_message(st));
  else printf("ebb %s: %s has %lld values\n", ebb_version(), ebb_tensors_name(out, 0),
              (long long)ebb_tensor_element_count(ebb_tensors_get(out, 0)));
  const int failed = st != NULL;
  ebb_status_destroy(st);
  ebb_tensors_destroy(out);
  ebb_tensor_destroy(x);
  ebb_session_destroy(session);
  ebb_runtime_destroy(rt);
  return failed;
}
