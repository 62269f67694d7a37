/* The C++ baselines of python/bench/bench_python.py, for the benchmark only (never in the wheel):
 * loops over the C API's run boundary, timed in C in the same process, on the same sessions and input
 * tensors as the Python calls they are compared with. The C API's functions are the C++ library's
 * calls behind a handle (include/ebb/c.h: "it adds no behaviour"), so this is the C++ run boundary
 * reached without Python. Each timing is (wall seconds, process CPU seconds). Loaded by ctypes. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "ebb/c.h"

static double wall_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* `iterations` runs of `session`: with `operation` NULL, ebb_session_run (each run one whole operation,
 * released as it ends); else ebb_operation_run inside `operation`, the caller's open operation (the
 * Python Operation whose op.run this is compared with: the same operation, so both sides run in the
 * same arena state and neither ends an operation, nor trims, between samples). wall[i], cpu[i]:
 * seconds of run i. Outputs are discarded (after the timing, as the Python side frees its own). */
__attribute__((visibility("default"))) ebb_status_t* ebb_pybench_time_runs(
    ebb_operation_t* operation, ebb_session_t* session, const char* const* names, const ebb_tensor_t* const* inputs,
    size_t count, int iterations, double* wall, double* cpu) {
  ebb_status_t* st = NULL;
  for (int i = 0; i < iterations && !st; ++i) {
    ebb_tensors_t* out = NULL;
    const double w = wall_now(), c = cpu_now();
    st = operation ? ebb_operation_run(operation, session, names, inputs, count, NULL, 0, &out)
                   : ebb_session_run(session, names, inputs, count, NULL, 0, &out);
    wall[i] = wall_now() - w;
    cpu[i] = cpu_now() - c;
    ebb_tensors_destroy(out);
  }
  return st;
}

/* One ebb_run_tiled (tiles_per_run 1) or, with tile == 0, one ebb_run_per_frame over `frames`, timed;
 * *results: the results, for the caller to free (as the Python call's caller does). */
__attribute__((visibility("default"))) ebb_status_t* ebb_pybench_time_frames(
    ebb_runtime_t* runtime, ebb_session_t* session, const ebb_tensor_t* const* frames, size_t count, int64_t tile,
    int64_t overlap, double* wall, double* cpu, ebb_tensors_t** results) {
  const double w = wall_now(), c = cpu_now();
  ebb_status_t* st = tile > 0 ? ebb_run_tiled(runtime, session, frames, count, tile, overlap, 0, 1, NULL, results)
                              : ebb_run_per_frame(runtime, session, frames, count, NULL, results);
  *wall = wall_now() - w;
  *cpu = cpu_now() - c;
  return st;
}
