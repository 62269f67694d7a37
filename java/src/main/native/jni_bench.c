/* dev.ebb.Bench: the C++ baseline of `make java-bench` (ebb_bench_time_runs). Not API. */
#include <stdlib.h>

#include "ebb_jni.h"

JNIEXPORT jobjectArray JNICALL Java_dev_ebb_Bench_nativeTimeRuns(JNIEnv* env, jclass cls, jlong session,
                                                                 jobjectArray names, jlongArray inputs,
                                                                 jint iterations, jboolean ends_operation) {
  (void)cls;
  ebb_jni_strings n;
  if (!ebb_jni_strings_get(env, names, &n)) return NULL;
  size_t count = 0;
  const ebb_tensor_t** tensors = ebb_jni_tensors(env, inputs, &count);
  double* wall = calloc((size_t)iterations + 1, sizeof *wall);
  double* cpu = calloc((size_t)iterations + 1, sizeof *cpu);
  jobjectArray out = NULL;
  if (tensors && wall && cpu &&
      !ebb_jni_check(env, ebb_bench_time_runs(EBB_JNI_HANDLE(ebb_session_t, session), n.items, tensors, count,
                                              iterations, ends_operation, wall, cpu))) {
    jclass double_array = (*env)->FindClass(env, "[D");
    out = double_array ? (*env)->NewObjectArray(env, 2, double_array, NULL) : NULL;
    for (int k = 0; out && k < 2; ++k) {
      jdoubleArray a = (*env)->NewDoubleArray(env, iterations);
      if (!a) return NULL;
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
