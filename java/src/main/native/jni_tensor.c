/* dev.ebb.Tensor and dev.ebb.Outputs over ebb_tensor_t and ebb_tensors_t. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ebb_jni.h"

JNIEXPORT jlong JNICALL Java_dev_ebb_Tensor_nativeBorrow(JNIEnv* env, jclass cls, jint dtype, jlongArray shape,
                                                         jobject buffer, jlong offset, jlong bytes) {
  (void)cls;
  char* base = (*env)->GetDirectBufferAddress(env, buffer);
  if (!base && (*env)->GetDirectBufferCapacity(env, buffer) != 0) {
    ebb_jni_throw(env, EBB_INVALID_ARGUMENT, "the buffer is not a direct buffer");
    return 0;
  }
  size_t rank = 0;
  int64_t* dims = ebb_jni_shape(env, shape, &rank);
  if (!dims) return 0;
  ebb_tensor_t* t = NULL;
  ebb_status_t* st = ebb_tensor_borrow((ebb_dtype_t)dtype, dims, rank, base ? base + offset : NULL, (size_t)bytes, &t);
  free(dims);
  if (ebb_jni_check(env, st)) return 0;
  return EBB_JNI_JLONG(t);
}

JNIEXPORT jlong JNICALL Java_dev_ebb_Tensor_nativeCreateCopy(JNIEnv* env, jclass cls, jint dtype, jlongArray shape,
                                                             jobject array, jlong bytes) {
  (void)cls;
  size_t rank = 0;
  int64_t* dims = ebb_jni_shape(env, shape, &rank);
  if (!dims) return 0;
  ebb_tensor_t* t = NULL;
  ebb_status_t* st = ebb_tensor_create((ebb_dtype_t)dtype, dims, rank, &t);
  free(dims);
  if (ebb_jni_check(env, st)) return 0;
  const size_t need = ebb_tensor_byte_size(t);
  if (need != (size_t)bytes) {
    char message[256];
    snprintf(message, sizeof message, "%lld values given, the shape takes %lld",
             (long long)(bytes / (jlong)(ebb_dtype_size((ebb_dtype_t)dtype) ? ebb_dtype_size((ebb_dtype_t)dtype) : 1)),
             (long long)ebb_tensor_element_count(t));
    ebb_tensor_destroy(t);
    ebb_jni_throw(env, EBB_INVALID_ARGUMENT, message);
    return 0;
  }
  if (need > 0) {
    void* src = (*env)->GetPrimitiveArrayCritical(env, array, NULL);
    if (!src) {
      ebb_tensor_destroy(t);
      return 0;
    }
    memcpy(ebb_tensor_mutable_data(t), src, need);
    (*env)->ReleasePrimitiveArrayCritical(env, array, src, JNI_ABORT);
  }
  return EBB_JNI_JLONG(t);
}

JNIEXPORT jlong JNICALL Java_dev_ebb_Tensor_nativeCreateStrings(JNIEnv* env, jclass cls, jlongArray shape,
                                                                jobjectArray values) {
  (void)cls;
  const jsize n = (*env)->GetArrayLength(env, values);
  size_t rank = 0;
  int64_t* dims = ebb_jni_shape(env, shape, &rank);
  const char** data = calloc((size_t)n + 1, sizeof *data);
  size_t* lengths = calloc((size_t)n + 1, sizeof *lengths);
  jbyteArray* refs = calloc((size_t)n + 1, sizeof *refs);
  jlong result = 0;
  jsize got = 0;
  if (!dims || !data || !lengths || !refs) {
    if (dims) ebb_jni_throw(env, EBB_RESOURCE_EXHAUSTED, "out of memory converting strings");
    goto done;
  }
  for (; got < n; ++got) {
    refs[got] = (jbyteArray)(*env)->GetObjectArrayElement(env, values, got);
    if (!refs[got]) {
      ebb_jni_throw(env, EBB_INVALID_ARGUMENT, "a string value is null");
      goto done;
    }
    lengths[got] = (size_t)(*env)->GetArrayLength(env, refs[got]);
    data[got] = (const char*)(*env)->GetByteArrayElements(env, refs[got], NULL);
    if (!data[got]) goto done;
  }
  ebb_tensor_t* t = NULL;
  if (!ebb_jni_check(env, ebb_tensor_create_strings(dims, rank, data, lengths, (size_t)n, &t))) {
    result = EBB_JNI_JLONG(t);
  }
done:
  for (jsize i = 0; refs && data && i < n; ++i) {  /* calloc'd: NULL where nothing was taken */
    if (data[i]) (*env)->ReleaseByteArrayElements(env, refs[i], (jbyte*)data[i], JNI_ABORT);
    if (refs[i]) (*env)->DeleteLocalRef(env, refs[i]);
  }
  free(dims);
  free((void*)data);
  free(lengths);
  free(refs);
  return result;
}

JNIEXPORT jint JNICALL Java_dev_ebb_Tensor_nativeDtype(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  return (jint)ebb_tensor_dtype(EBB_JNI_HANDLE(ebb_tensor_t, h));
}

JNIEXPORT jlongArray JNICALL Java_dev_ebb_Tensor_nativeShape(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  const ebb_tensor_t* t = EBB_JNI_HANDLE(ebb_tensor_t, h);
  return ebb_jni_long_array(env, ebb_tensor_shape(t), ebb_tensor_rank(t));
}

JNIEXPORT jlong JNICALL Java_dev_ebb_Tensor_nativeByteSize(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  return (jlong)ebb_tensor_byte_size(EBB_JNI_HANDLE(ebb_tensor_t, h));
}

/* REQUIRES (checked by Tensor.java): `array` is a primitive array of the tensor's element type and count. */
JNIEXPORT void JNICALL Java_dev_ebb_Tensor_nativeCopyOut(JNIEnv* env, jclass cls, jlong h, jobject array) {
  (void)cls;
  const ebb_tensor_t* t = EBB_JNI_HANDLE(ebb_tensor_t, h);
  const size_t size = ebb_tensor_byte_size(t);
  if (size == 0) return;
  void* dst = (*env)->GetPrimitiveArrayCritical(env, array, NULL);
  if (!dst) return;
  memcpy(dst, ebb_tensor_data(t), size);
  (*env)->ReleasePrimitiveArrayCritical(env, array, dst, 0);
}

JNIEXPORT jobjectArray JNICALL Java_dev_ebb_Tensor_nativeStrings(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  const ebb_tensor_t* t = EBB_JNI_HANDLE(ebb_tensor_t, h);
  const jsize n = (jsize)ebb_tensor_element_count(t);
  jobjectArray out = (*env)->NewObjectArray(env, n, ebb_jni.byte_array_class, NULL);
  for (jsize i = 0; out && i < n; ++i) {
    const char* data = NULL;
    size_t length = 0;
    if (ebb_jni_check(env, ebb_tensor_string(t, (size_t)i, &data, &length))) return NULL;
    jbyteArray bytes = (*env)->NewByteArray(env, (jsize)length);
    if (!bytes) return NULL;
    (*env)->SetByteArrayRegion(env, bytes, 0, (jsize)length, (const jbyte*)data);
    (*env)->SetObjectArrayElement(env, out, i, bytes);
    (*env)->DeleteLocalRef(env, bytes);
  }
  return out;
}

JNIEXPORT jobject JNICALL Java_dev_ebb_Tensor_nativeBuffer(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  static char empty;  /* a zero-capacity buffer still needs an address */
  ebb_tensor_t* t = EBB_JNI_HANDLE(ebb_tensor_t, h);
  const size_t size = ebb_tensor_byte_size(t);
  void* data = ebb_tensor_mutable_data(t);
  return (*env)->NewDirectByteBuffer(env, size && data ? data : &empty, (jlong)(size && data ? size : 0));
}

JNIEXPORT jboolean JNICALL Java_dev_ebb_Tensor_nativeEquals(JNIEnv* env, jclass cls, jlong a, jlong b) {
  (void)env;
  (void)cls;
  return ebb_tensor_bitwise_equal(EBB_JNI_HANDLE(ebb_tensor_t, a), EBB_JNI_HANDLE(ebb_tensor_t, b)) ? JNI_TRUE
                                                                                                      : JNI_FALSE;
}

JNIEXPORT void JNICALL Java_dev_ebb_Tensor_nativeDestroy(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  ebb_tensor_destroy(EBB_JNI_HANDLE(ebb_tensor_t, h));
}

JNIEXPORT jint JNICALL Java_dev_ebb_Outputs_nativeCount(JNIEnv* env, jclass cls, jlong list) {
  (void)env;
  (void)cls;
  return (jint)ebb_tensors_count(EBB_JNI_HANDLE(ebb_tensors_t, list));
}

JNIEXPORT jstring JNICALL Java_dev_ebb_Outputs_nativeName(JNIEnv* env, jclass cls, jlong list, jint index) {
  (void)cls;
  return ebb_jni_string(env, ebb_tensors_name(EBB_JNI_HANDLE(ebb_tensors_t, list), (size_t)index));
}

JNIEXPORT jlong JNICALL Java_dev_ebb_Outputs_nativeTake(JNIEnv* env, jclass cls, jlong list, jint index) {
  (void)env;
  (void)cls;
  return EBB_JNI_JLONG(ebb_tensors_take(EBB_JNI_HANDLE(ebb_tensors_t, list), (size_t)index));
}

JNIEXPORT void JNICALL Java_dev_ebb_Outputs_nativeDestroy(JNIEnv* env, jclass cls, jlong list) {
  (void)env;
  (void)cls;
  ebb_tensors_destroy(EBB_JNI_HANDLE(ebb_tensors_t, list));
}
