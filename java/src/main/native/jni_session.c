/* dev.ebb.Session over ebb_session_t. */
#include <stdlib.h>

#include "ebb_jni.h"

#define SESSION(h) EBB_JNI_HANDLE(ebb_session_t, h)

JNIEXPORT jstring JNICALL Java_dev_ebb_Session_nativeName(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  return ebb_jni_string(env, ebb_session_name(SESSION(h)));
}

JNIEXPORT jstring JNICALL Java_dev_ebb_Session_nativeSourcePath(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  return ebb_jni_string(env, ebb_session_source_path(SESSION(h)));
}

JNIEXPORT jstring JNICALL Java_dev_ebb_Session_nativeDevice(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  return ebb_jni_string(env, ebb_session_device(SESSION(h)));
}

JNIEXPORT jstring JNICALL Java_dev_ebb_Session_nativeProvider(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  return ebb_jni_string(env, ebb_session_provider(SESSION(h)));
}

JNIEXPORT jstring JNICALL Java_dev_ebb_Session_nativeFallbackReason(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  return ebb_jni_string(env, ebb_session_fallback_reason(SESSION(h)));
}

JNIEXPORT jint JNICALL Java_dev_ebb_Session_nativeCount(JNIEnv* env, jclass cls, jlong h, jboolean outputs) {
  (void)env;
  (void)cls;
  return (jint)(outputs ? ebb_session_output_count(SESSION(h)) : ebb_session_input_count(SESSION(h)));
}

static int describe(jlong h, jboolean outputs, jint index, const char** name, ebb_dtype_t* dtype,
                    const int64_t** shape, size_t* rank) {
  return outputs ? ebb_session_output(SESSION(h), (size_t)index, name, dtype, shape, rank)
                 : ebb_session_input(SESSION(h), (size_t)index, name, dtype, shape, rank);
}

JNIEXPORT jstring JNICALL Java_dev_ebb_Session_nativeIoName(JNIEnv* env, jclass cls, jlong h, jboolean outputs,
                                                            jint index) {
  (void)cls;
  const char* name = "";
  describe(h, outputs, index, &name, NULL, NULL, NULL);
  return ebb_jni_string(env, name);
}

JNIEXPORT jint JNICALL Java_dev_ebb_Session_nativeIoType(JNIEnv* env, jclass cls, jlong h, jboolean outputs,
                                                         jint index) {
  (void)env;
  (void)cls;
  ebb_dtype_t dtype = EBB_FLOAT32;
  describe(h, outputs, index, NULL, &dtype, NULL, NULL);
  return (jint)dtype;
}

JNIEXPORT jlongArray JNICALL Java_dev_ebb_Session_nativeIoShape(JNIEnv* env, jclass cls, jlong h, jboolean outputs,
                                                                jint index) {
  (void)cls;
  const int64_t* shape = NULL;
  size_t rank = 0;
  describe(h, outputs, index, NULL, NULL, &shape, &rank);
  return ebb_jni_long_array(env, shape, rank);
}

JNIEXPORT jstring JNICALL Java_dev_ebb_Session_nativeMetadata(JNIEnv* env, jclass cls, jlong h, jstring key) {
  (void)cls;
  ebb_jni_chars k;
  if (!ebb_jni_chars_get(env, key, &k)) return NULL;
  char* value = NULL;
  ebb_status_t* st = ebb_session_metadata(SESSION(h), k.chars, &value);
  ebb_jni_chars_release(env, &k);
  if (ebb_jni_check(env, st)) return NULL;
  jstring out = ebb_jni_string(env, value);
  ebb_free(value);
  return out;
}

JNIEXPORT jlong JNICALL Java_dev_ebb_Session_nativeRunCount(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  return (jlong)ebb_session_run_count(SESSION(h));
}

JNIEXPORT jlong JNICALL Java_dev_ebb_Session_nativeReleaseCount(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  return (jlong)ebb_session_release_count(SESSION(h));
}

JNIEXPORT jint JNICALL Java_dev_ebb_Session_nativeInFlight(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  return (jint)ebb_session_in_flight(SESSION(h));
}

JNIEXPORT jboolean JNICALL Java_dev_ebb_Session_nativeSame(JNIEnv* env, jclass cls, jlong a, jlong b) {
  (void)env;
  (void)cls;
  return ebb_session_same(SESSION(a), SESSION(b)) ? JNI_TRUE : JNI_FALSE;
}

static ebb_status_t* run(void* session, const char* const* names, const ebb_tensor_t* const* inputs, size_t count,
                         const char* const* outputs, size_t output_count, ebb_tensors_t** result) {
  return ebb_session_run(session, names, inputs, count, outputs, output_count, result);
}

JNIEXPORT jlong JNICALL Java_dev_ebb_Session_nativeRun(JNIEnv* env, jclass cls, jlong h, jobjectArray names,
                                                       jlongArray inputs, jobjectArray output_names) {
  (void)cls;
  return ebb_jni_run(env, names, inputs, output_names, run, SESSION(h));
}

JNIEXPORT void JNICALL Java_dev_ebb_Session_nativeDestroy(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  ebb_session_destroy(SESSION(h));
}
