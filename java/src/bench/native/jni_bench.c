/* dev.ebb.Bench: the C baseline of `make java-bench`, in a library of its own (libebb_jni_bench.so,
 * built beside the jar for the benchmark, never in it). Runs through the C API on the Java objects'
 * own handles: ebb_operation_run in the Java Operation's open operation, or ebb_session_run (one
 * whole operation), timed in C on the calling thread. Not API. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <time.h>

#include "ebb_jni.h"

static double seconds_of(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* `iterations` runs of `session`, inside `operation` when it is not NULL; wall[i] and cpu[i]: the wall
 * seconds and the calling thread's CPU seconds of run i (with one intra-op thread a run's work is on
 * the calling thread, and the JVM's own threads, JIT and GC, are not counted). Outputs are destroyed
 * after each run's timing, as the Java side closes its own. Errors: the first failed run's. */
static ebb_status_t* time_runs(ebb_operation_t* operation, ebb_session_t* session, const char* const* names,
                               const ebb_tensor_t* const* inputs, size_t count, int iterations, double* wall,
                               double* cpu) {
  ebb_status_t* st = NULL;
  for (int i = 0; i < iterations && !st; ++i) {
    ebb_tensors_t* out = NULL;
    const double w = seconds_of(CLOCK_MONOTONIC), c = seconds_of(CLOCK_THREAD_CPUTIME_ID);
    st = operation ? ebb_operation_run(operation, session, names, inputs, count, NULL, 0, &out)
                   : ebb_session_run(session, names, inputs, count, NULL, 0, &out);
    cpu[i] = seconds_of(CLOCK_THREAD_CPUTIME_ID) - c;
    wall[i] = seconds_of(CLOCK_MONOTONIC) - w;
    ebb_tensors_destroy(out);
  }
  return st;
}

JNIEXPORT jobjectArray JNICALL Java_dev_ebb_Bench_nativeTimeRuns(JNIEnv* env, jclass cls, jlong operation,
                                                                 jlong session, jobjectArray names, jlongArray inputs,
                                                                 jint iterations) {
  (void)cls;
  ebb_jni_strings n;
  if (!ebb_jni_strings_get(env, names, &n)) return NULL;
  size_t count = 0;
  const ebb_tensor_t** tensors = ebb_jni_tensors(env, inputs, &count);
  double* wall = calloc((size_t)iterations + 1, sizeof *wall);
  double* cpu = calloc((size_t)iterations + 1, sizeof *cpu);
  jobjectArray out = NULL;
  if (tensors && wall && cpu &&
      !ebb_jni_check(env, time_runs(operation ? EBB_JNI_HANDLE(jni_operation, operation)->op : NULL,
                                    EBB_JNI_HANDLE(ebb_session_t, session),
                                    n.items, tensors, count, iterations, wall, cpu))) {
    jclass double_array = (*env)->FindClass(env, "[D");
    out = double_array ? (*env)->NewObjectArray(env, 2, double_array, NULL) : NULL;
    for (int k = 0; out && k < 2; ++k) {
      jdoubleArray a = (*env)->NewDoubleArray(env, iterations);
      if (!a) {
        out = NULL;
        break;
      }
      (*env)->SetDoubleArrayRegion(env, a, 0, iterations, k == 0 ? wall : cpu);
      (*env)->SetObjectArrayElement(env, out, k, a);
      (*env)->DeleteLocalRef(env, a);
    }
  }
  free(wall);
  free(cpu);
  free((void*)tensors);
  ebb_jni_strings_release(env, &n);
  return out;
}
