/* JNI_OnLoad and the conversions every dev.ebb class uses (ebb_jni.h). */
#include <stdlib.h>
#include <string.h>

#include "ebb_jni.h"

ebb_jni_cache ebb_jni;
JavaVM* ebb_jni_vm = NULL;

_Static_assert(sizeof(jlong) == sizeof(int64_t), "jlong is 64 bits");
_Static_assert(sizeof(void*) <= sizeof(jlong), "a pointer fits a jlong");

static jclass global_class(JNIEnv* env, const char* name) {
  jclass local = (*env)->FindClass(env, name);
  if (!local) return NULL;
  jclass global = (jclass)(*env)->NewGlobalRef(env, local);
  (*env)->DeleteLocalRef(env, local);
  return global;
}

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void* reserved) {
  (void)reserved;
  JNIEnv* env = NULL;
  if ((*vm)->GetEnv(vm, (void**)&env, JNI_VERSION_1_8) != JNI_OK) return JNI_ERR;
  ebb_jni_vm = vm;
  ebb_jni_cache* c = &ebb_jni;
  if (!(c->string_class = global_class(env, "java/lang/String"))) return JNI_ERR;
  if (!(c->string_from_bytes = (*env)->GetMethodID(env, c->string_class, "<init>", "([BLjava/lang/String;)V"))) {
    return JNI_ERR;
  }
  if (!(c->byte_array_class = global_class(env, "[B"))) return JNI_ERR;
  if (!(c->object_class = global_class(env, "java/lang/Object"))) return JNI_ERR;
  if (!(c->exception_class = global_class(env, "dev/ebb/EbbException"))) return JNI_ERR;
  if (!(c->exception_of = (*env)->GetStaticMethodID(env, c->exception_class, "of",
                                                    "(ILjava/lang/String;)Ldev/ebb/EbbException;"))) {
    return JNI_ERR;
  }
  jclass listener = (*env)->FindClass(env, "dev/ebb/ProgressListener");
  if (!listener || !(c->progress = (*env)->GetMethodID(env, listener, "onProgress", "(II)Z"))) return JNI_ERR;
  jclass body = (*env)->FindClass(env, "dev/ebb/ModelPool$Body");
  if (!body || !(c->body_call = (*env)->GetMethodID(env, body, "call", "(J)[Ljava/lang/Object;"))) return JNI_ERR;
  if (!(c->integer_class = global_class(env, "java/lang/Integer"))) return JNI_ERR;
  c->integer_of = (*env)->GetStaticMethodID(env, c->integer_class, "valueOf", "(I)Ljava/lang/Integer;");
  c->integer_value = (*env)->GetMethodID(env, c->integer_class, "intValue", "()I");
  if (!(c->boolean_class = global_class(env, "java/lang/Boolean"))) return JNI_ERR;
  c->boolean_of = (*env)->GetStaticMethodID(env, c->boolean_class, "valueOf", "(Z)Ljava/lang/Boolean;");
  if (!(c->double_class = global_class(env, "java/lang/Double"))) return JNI_ERR;
  c->double_of = (*env)->GetStaticMethodID(env, c->double_class, "valueOf", "(D)Ljava/lang/Double;");
  if (!c->integer_of || !c->integer_value || !c->boolean_of || !c->double_of) return JNI_ERR;
  return JNI_VERSION_1_8;
}

jstring ebb_jni_string(JNIEnv* env, const char* utf8) {
  if (!utf8) utf8 = "";
  const size_t n = strlen(utf8);
  int ascii = 1;
  for (size_t i = 0; i < n && ascii; ++i) ascii = (unsigned char)utf8[i] < 0x80;
  if (ascii) return (*env)->NewStringUTF(env, utf8);  /* ASCII is modified UTF-8 */
  jbyteArray bytes = (*env)->NewByteArray(env, (jsize)n);
  if (!bytes) return NULL;
  (*env)->SetByteArrayRegion(env, bytes, 0, (jsize)n, (const jbyte*)utf8);
  jstring charset = (*env)->NewStringUTF(env, "UTF-8");
  jstring s = charset ? (jstring)(*env)->NewObject(env, ebb_jni.string_class, ebb_jni.string_from_bytes, bytes, charset)
                      : NULL;
  (*env)->DeleteLocalRef(env, bytes);
  if (charset) (*env)->DeleteLocalRef(env, charset);
  return s;
}

void ebb_jni_throw(JNIEnv* env, ebb_code_t code, const char* message) {
  jstring text = ebb_jni_string(env, message);
  if (!text) return;  /* an OutOfMemoryError is pending */
  jobject e = (*env)->CallStaticObjectMethod(env, ebb_jni.exception_class, ebb_jni.exception_of, (jint)code, text);
  (*env)->DeleteLocalRef(env, text);
  if (e) {
    (*env)->Throw(env, (jthrowable)e);
    (*env)->DeleteLocalRef(env, e);
  }
}

int ebb_jni_check(JNIEnv* env, ebb_status_t* status) {
  if (!status) return 0;
  ebb_jni_throw(env, ebb_status_code(status), ebb_status_message(status));
  ebb_status_destroy(status);
  return 1;
}

int ebb_jni_chars_get(JNIEnv* env, jstring s, ebb_jni_chars* out) {
  out->string = s;
  out->chars = NULL;
  if (!s) return 1;
  out->chars = (*env)->GetStringUTFChars(env, s, NULL);
  return out->chars != NULL;
}

void ebb_jni_chars_release(JNIEnv* env, ebb_jni_chars* c) {
  if (c->chars) (*env)->ReleaseStringUTFChars(env, c->string, c->chars);
  c->chars = NULL;
}

int ebb_jni_strings_get(JNIEnv* env, jobjectArray array, ebb_jni_strings* out) {
  out->count = 0;
  out->items = NULL;
  out->refs = NULL;
  if (!array) return 1;
  const jsize n = (*env)->GetArrayLength(env, array);
  if (n == 0) return 1;
  out->items = calloc((size_t)n, sizeof *out->items);
  out->refs = calloc((size_t)n, sizeof *out->refs);
  if (!out->items || !out->refs) {
    ebb_jni_strings_release(env, out);
    ebb_jni_throw(env, EBB_RESOURCE_EXHAUSTED, "out of memory converting names");
    return 0;
  }
  for (jsize i = 0; i < n; ++i) {
    jstring s = (jstring)(*env)->GetObjectArrayElement(env, array, i);
    if (!s) {
      ebb_jni_strings_release(env, out);
      ebb_jni_throw(env, EBB_INVALID_ARGUMENT, "a name is null");
      return 0;
    }
    out->refs[i] = s;
    out->count = (size_t)i + 1;
    if (!(out->items[i] = (*env)->GetStringUTFChars(env, s, NULL))) {
      ebb_jni_strings_release(env, out);
      return 0;
    }
  }
  return 1;
}

void ebb_jni_strings_release(JNIEnv* env, ebb_jni_strings* s) {
  for (size_t i = 0; i < s->count; ++i) {
    if (s->items && s->items[i]) (*env)->ReleaseStringUTFChars(env, s->refs[i], s->items[i]);
    if (s->refs && s->refs[i]) (*env)->DeleteLocalRef(env, s->refs[i]);
  }
  free((void*)s->items);
  free(s->refs);
  s->items = NULL;
  s->refs = NULL;
  s->count = 0;
}

const ebb_tensor_t** ebb_jni_tensors(JNIEnv* env, jlongArray handles, size_t* count) {
  const jsize n = handles ? (*env)->GetArrayLength(env, handles) : 0;
  *count = (size_t)n;
  const ebb_tensor_t** out = malloc(((size_t)n + 1) * sizeof *out);
  if (!out) {
    ebb_jni_throw(env, EBB_RESOURCE_EXHAUSTED, "out of memory converting tensors");
    return NULL;
  }
  for (jsize i = 0; i < n; ++i) {
    jlong h = 0;
    (*env)->GetLongArrayRegion(env, handles, i, 1, &h);
    out[i] = EBB_JNI_HANDLE(const ebb_tensor_t, h);
  }
  return out;
}

int64_t* ebb_jni_shape(JNIEnv* env, jlongArray shape, size_t* rank) {
  const jsize n = shape ? (*env)->GetArrayLength(env, shape) : 0;
  *rank = (size_t)n;
  int64_t* dims = malloc(((size_t)n + 1) * sizeof *dims);
  if (!dims) {
    ebb_jni_throw(env, EBB_RESOURCE_EXHAUSTED, "out of memory converting a shape");
    return NULL;
  }
  if (n > 0) (*env)->GetLongArrayRegion(env, shape, 0, n, (jlong*)dims);
  return dims;
}

jlongArray ebb_jni_long_array(JNIEnv* env, const int64_t* values, size_t count) {
  jlongArray out = (*env)->NewLongArray(env, (jsize)count);
  if (out && count > 0) (*env)->SetLongArrayRegion(env, out, 0, (jsize)count, (const jlong*)values);
  return out;
}

jlong ebb_jni_run(JNIEnv* env, jobjectArray names, jlongArray inputs, jobjectArray output_names, ebb_jni_run_fn run,
                  void* context) {
  ebb_jni_strings in_names, out_names;
  if (!ebb_jni_strings_get(env, names, &in_names)) return 0;
  if (!ebb_jni_strings_get(env, output_names, &out_names)) {
    ebb_jni_strings_release(env, &in_names);
    return 0;
  }
  size_t count = 0;
  const ebb_tensor_t** tensors = ebb_jni_tensors(env, inputs, &count);
  ebb_tensors_t* result = NULL;
  if (tensors) {
    ebb_status_t* st = run(context, in_names.items, tensors, count, out_names.items, out_names.count, &result);
    if (ebb_jni_check(env, st)) result = NULL;
  }
  free((void*)tensors);
  ebb_jni_strings_release(env, &in_names);
  ebb_jni_strings_release(env, &out_names);
  return EBB_JNI_JLONG(result);
}

int ebb_jni_finish(JNIEnv* env, ebb_jni_control* control, ebb_status_t* status) {
  if (control && control->error) {
    ebb_status_destroy(status);
    (*env)->Throw(env, control->error);
    (*env)->DeleteGlobalRef(env, control->error);
    control->error = NULL;
    return 1;
  }
  return ebb_jni_check(env, status);
}
