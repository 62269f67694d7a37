/* What the JNI files of dev.ebb share (one C file per Java class, as ONNX Runtime's Java binding
 * has): handles as jlong, the status-to-exception mapping, Java strings and arrays as C values.
 *
 * The rule of java/: conversions only, over include/ebb/c.h. Every behaviour is the library's
 * (reached through the C API, nothing else); a check made here is one the conversion needs. */
#ifndef EBB_JNI_H_
#define EBB_JNI_H_

#include <jni.h>
#include <stddef.h>
#include <stdint.h>

#include "ebb/c.h"

#define EBB_JNI_HANDLE(type, h) ((type*)(intptr_t)(h))
#define EBB_JNI_JLONG(p) ((jlong)(intptr_t)(p))

/* Cached in JNI_OnLoad (jni_common.c). */
typedef struct ebb_jni_cache {
  jclass string_class;       /* java/lang/String */
  jmethodID string_from_bytes; /* String(byte[], String charsetName) */
  jclass byte_array_class;   /* [B */
  jclass object_class;       /* java/lang/Object */
  jclass exception_class;    /* dev/ebb/EbbException */
  jmethodID exception_of;    /* static EbbException of(int, String) */
  jmethodID progress;        /* ProgressListener.onProgress(int, int) -> boolean */
  jmethodID body_call;       /* ModelPool$Body.call(long) -> Object[] */
  jclass integer_class;
  jmethodID integer_of, integer_value;
  jclass boolean_class;
  jmethodID boolean_of;
  jclass double_class;
  jmethodID double_of;
} ebb_jni_cache;

extern ebb_jni_cache ebb_jni;
extern JavaVM* ebb_jni_vm;

/* When `status` is an error: throws the dev.ebb exception of its code, destroys it, returns 1.
 * Returns 0 for NULL (success). */
int ebb_jni_check(JNIEnv* env, ebb_status_t* status);
/* Throws the dev.ebb exception of `code` with `message`. */
void ebb_jni_throw(JNIEnv* env, ebb_code_t code, const char* message);
/* A Java string of UTF-8 bytes (any bytes: invalid sequences become U+FFFD); NULL with an
 * exception pending when out of memory. */
jstring ebb_jni_string(JNIEnv* env, const char* utf8);

/* A Java String (may be NULL) as C chars for one call. Java's modified UTF-8, which is UTF-8 for
 * every name without NUL or characters beyond the BMP. */
typedef struct ebb_jni_chars {
  jstring string;
  const char* chars; /* NULL for a NULL string */
} ebb_jni_chars;
int ebb_jni_chars_get(JNIEnv* env, jstring s, ebb_jni_chars* out); /* 0: failed, exception pending */
void ebb_jni_chars_release(JNIEnv* env, ebb_jni_chars* c);

/* A Java String[] (may be NULL: no strings) as C strings for one call. */
typedef struct ebb_jni_strings {
  size_t count;
  const char** items;
  jstring* refs;
} ebb_jni_strings;
int ebb_jni_strings_get(JNIEnv* env, jobjectArray array, ebb_jni_strings* out); /* 0: failed */
void ebb_jni_strings_release(JNIEnv* env, ebb_jni_strings* s);

/* A Java long[] of tensor handles as a C array of tensor pointers (free with free()). */
const ebb_tensor_t** ebb_jni_tensors(JNIEnv* env, jlongArray handles, size_t* count);
/* A Java long[] of dims as int64_t (free with free()); NULL with an exception pending on failure. */
int64_t* ebb_jni_shape(JNIEnv* env, jlongArray shape, size_t* rank);
jlongArray ebb_jni_long_array(JNIEnv* env, const int64_t* values, size_t count);

/* The run of a Session or an Operation: names, tensors and outputs from Java, the call in `run`. */
typedef ebb_status_t* (*ebb_jni_run_fn)(void* context, const char* const* names, const ebb_tensor_t* const* inputs,
                                        size_t count, const char* const* outputs, size_t output_count,
                                        ebb_tensors_t** result);
jlong ebb_jni_run(JNIEnv* env, jobjectArray names, jlongArray inputs, jobjectArray output_names, ebb_jni_run_fn run,
                  void* context);

/* Load options from Java (device may be NULL: auto; strict -1/0/1; name may be NULL); NULL with an
 * exception pending on failure. Destroy with ebb_load_options_destroy. (jni_runtime.c) */
ebb_load_options_t* ebb_jni_load_options(JNIEnv* env, jstring device, jint strict, jstring name);

/* OperationControl's native handle: the C control, and the listener it calls into Java. */
typedef struct ebb_jni_control {
  ebb_control_t* control;
  jobject listener; /* global ref, or NULL */
  jthrowable error; /* global ref: what the listener threw, rethrown by the operation's call */
} ebb_jni_control;
/* After an operation ran with `control` (may be NULL): throws the listener's exception if it threw
 * one (the status is then dropped), else checks `status`. Returns 1 when something was thrown. */
int ebb_jni_finish(JNIEnv* env, ebb_jni_control* control, ebb_status_t* status);

/* Operation's native handle: the C operation and the control it runs with (jni_operation.c; the
 * benchmark's baseline, java/src/bench/native/jni_bench.c, runs in the same C operation). */
typedef struct jni_operation {
  ebb_operation_t* op;
  ebb_jni_control* control;
} jni_operation;

#endif /* EBB_JNI_H_ */
