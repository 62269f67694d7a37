/* dev.ebb.Runtime over ebb_runtime_t: policy, loads, cache, trim, memory readings and the
 * ready-made operations. */
#include <stdlib.h>
#include <string.h>

#include "ebb_jni.h"

#define RUNTIME(h) EBB_JNI_HANDLE(ebb_runtime_t, h)
#define MEMORY(h) EBB_JNI_HANDLE(ebb_memory_t, h)
#define SESSION(h) EBB_JNI_HANDLE(ebb_session_t, h)

JNIEXPORT jlong JNICALL Java_dev_ebb_Runtime_nativeCreate(JNIEnv* env, jclass cls, jstring policy) {
  (void)cls;
  ebb_jni_chars json;
  if (!ebb_jni_chars_get(env, policy, &json)) return 0;
  ebb_runtime_t* rt = NULL;
  ebb_status_t* st = ebb_runtime_create(json.chars, json.chars ? strlen(json.chars) : 0, &rt);
  ebb_jni_chars_release(env, &json);
  if (ebb_jni_check(env, st)) return 0;
  return EBB_JNI_JLONG(rt);
}

JNIEXPORT jlong JNICALL Java_dev_ebb_Runtime_nativeCreateFromFile(JNIEnv* env, jclass cls, jstring path) {
  (void)cls;
  ebb_jni_chars p;
  if (!ebb_jni_chars_get(env, path, &p)) return 0;
  ebb_runtime_t* rt = NULL;
  ebb_status_t* st = ebb_runtime_create_from_file(p.chars, &rt);
  ebb_jni_chars_release(env, &p);
  if (ebb_jni_check(env, st)) return 0;
  return EBB_JNI_JLONG(rt);
}

JNIEXPORT jstring JNICALL Java_dev_ebb_Runtime_nativeVersion(JNIEnv* env, jclass cls) {
  (void)cls;
  return ebb_jni_string(env, ebb_version());
}

JNIEXPORT jstring JNICALL Java_dev_ebb_Runtime_nativeOrtVersion(JNIEnv* env, jclass cls) {
  (void)cls;
  return ebb_jni_string(env, ebb_ort_version());
}

JNIEXPORT jint JNICALL Java_dev_ebb_Runtime_nativeAbiVersion(JNIEnv* env, jclass cls) {
  (void)env;
  (void)cls;
  return (jint)ebb_abi_version();
}

JNIEXPORT jstring JNICALL Java_dev_ebb_Runtime_nativePolicy(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  return ebb_jni_string(env, ebb_runtime_policy_json(RUNTIME(h)));
}

/* The load options of a load or of a pool's model (NULL with an exception pending on failure). */
ebb_load_options_t* ebb_jni_load_options(JNIEnv* env, jstring device, jint strict, jstring name) {
  ebb_load_options_t* o = ebb_load_options_create();
  if (!o) {
    ebb_jni_throw(env, EBB_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  ebb_jni_chars d, n;
  if (!ebb_jni_chars_get(env, device, &d)) goto fail;
  ebb_status_t* st = d.chars ? ebb_load_options_set_device(o, d.chars) : NULL;
  ebb_jni_chars_release(env, &d);
  if (ebb_jni_check(env, st)) goto fail;
  ebb_load_options_set_strict(o, strict);
  if (!ebb_jni_chars_get(env, name, &n)) goto fail;
  st = n.chars ? ebb_load_options_set_name(o, n.chars) : NULL;
  ebb_jni_chars_release(env, &n);
  if (ebb_jni_check(env, st)) goto fail;
  return o;
fail:
  ebb_load_options_destroy(o);
  return NULL;
}

JNIEXPORT jlong JNICALL Java_dev_ebb_Runtime_nativeLoad(JNIEnv* env, jclass cls, jlong h, jstring path,
                                                        jbyteArray bytes, jstring device, jint strict, jstring name) {
  (void)cls;
  ebb_load_options_t* options = ebb_jni_load_options(env, device, strict, name);
  if (!options) return 0;
  ebb_session_t* session = NULL;
  ebb_status_t* st = NULL;
  if (path) {
    ebb_jni_chars p;
    if (ebb_jni_chars_get(env, path, &p)) {
      st = ebb_runtime_load(RUNTIME(h), p.chars, options, &session);
      ebb_jni_chars_release(env, &p);
    }
  } else {
    jbyte* data = bytes ? (*env)->GetByteArrayElements(env, bytes, NULL) : NULL;
    if (data || !bytes) {
      st = ebb_runtime_load_bytes(RUNTIME(h), data, bytes ? (size_t)(*env)->GetArrayLength(env, bytes) : 0, options,
                                  &session);
      if (data) (*env)->ReleaseByteArrayElements(env, bytes, data, JNI_ABORT);
    }
  }
  ebb_load_options_destroy(options);
  if ((*env)->ExceptionCheck(env) || ebb_jni_check(env, st)) return 0;
  return EBB_JNI_JLONG(session);
}

JNIEXPORT jlong JNICALL Java_dev_ebb_Runtime_nativeUnload(JNIEnv* env, jclass cls, jlong h, jstring path,
                                                          jlong session) {
  (void)cls;
  if (!path) return ebb_runtime_unload_session(RUNTIME(h), SESSION(session));
  ebb_jni_chars p;
  if (!ebb_jni_chars_get(env, path, &p)) return 0;
  const size_t n = ebb_runtime_unload_path(RUNTIME(h), p.chars);
  ebb_jni_chars_release(env, &p);
  return (jlong)n;
}

JNIEXPORT void JNICALL Java_dev_ebb_Runtime_nativeClear(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  ebb_runtime_clear(RUNTIME(h));
}

JNIEXPORT void JNICALL Java_dev_ebb_Runtime_nativeTrim(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  ebb_jni_check(env, ebb_runtime_trim(RUNTIME(h)));
}

JNIEXPORT jlong JNICALL Java_dev_ebb_Runtime_nativeLoadCount(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  return (jlong)ebb_runtime_load_count(RUNTIME(h));
}

JNIEXPORT jlong JNICALL Java_dev_ebb_Runtime_nativeCachedCount(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  return (jlong)ebb_runtime_cached_count(RUNTIME(h));
}

JNIEXPORT jlong JNICALL Java_dev_ebb_Runtime_nativeMemory(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  ebb_memory_t* m = NULL;
  if (ebb_jni_check(env, ebb_runtime_memory(RUNTIME(h), &m))) return 0;
  return EBB_JNI_JLONG(m);
}

JNIEXPORT jint JNICALL Java_dev_ebb_Runtime_nativeArenaCount(JNIEnv* env, jclass cls, jlong m) {
  (void)env;
  (void)cls;
  return (jint)ebb_memory_arena_count(MEMORY(m));
}

JNIEXPORT jstring JNICALL Java_dev_ebb_Runtime_nativeArenaName(JNIEnv* env, jclass cls, jlong m, jint i) {
  (void)cls;
  return ebb_jni_string(env, ebb_memory_arena_name(MEMORY(m), (size_t)i));
}

JNIEXPORT jlongArray JNICALL Java_dev_ebb_Runtime_nativeArenaStats(JNIEnv* env, jclass cls, jlong m, jint i) {
  (void)cls;
  int64_t v[8];
  for (int k = 0; k < 8; ++k) v[k] = ebb_memory_arena_stat(MEMORY(m), (size_t)i, (ebb_arena_stat_t)k);
  return ebb_jni_long_array(env, v, 8);
}

JNIEXPORT jlongArray JNICALL Java_dev_ebb_Runtime_nativeRss(JNIEnv* env, jclass cls, jlong m) {
  (void)cls;
  const int64_t v[2] = {ebb_memory_rss_bytes(MEMORY(m)), ebb_memory_peak_rss_bytes(MEMORY(m))};
  return ebb_jni_long_array(env, v, 2);
}

JNIEXPORT jstring JNICALL Java_dev_ebb_Runtime_nativeMemoryJson(JNIEnv* env, jclass cls, jlong m) {
  (void)cls;
  return ebb_jni_string(env, ebb_memory_json(MEMORY(m)));
}

JNIEXPORT void JNICALL Java_dev_ebb_Runtime_nativeMemoryDestroy(JNIEnv* env, jclass cls, jlong m) {
  (void)env;
  (void)cls;
  ebb_memory_destroy(MEMORY(m));
}

/* The frames and control of a ready-made operation as C values, for one call. */
typedef struct frames_args {
  const ebb_tensor_t** frames;
  size_t count;
  ebb_jni_control* jni_control; /* NULL: none */
  ebb_control_t* control;       /* its C control, or NULL */
} frames_args;

/* 0: failed, with an exception pending. */
static int frames_get(JNIEnv* env, jlongArray frames, jlong control, frames_args* out) {
  out->frames = ebb_jni_tensors(env, frames, &out->count);
  out->jni_control = EBB_JNI_HANDLE(ebb_jni_control, control);
  out->control = out->jni_control ? out->jni_control->control : NULL;
  return out->frames != NULL;
}

/* After the operation's call: its results as a handle, or 0 with what its listener threw or its
 * `status` thrown. Frees `a`'s conversions. */
static jlong frames_finish(JNIEnv* env, frames_args* a, ebb_status_t* status, ebb_tensors_t* results) {
  free((void*)a->frames);
  if (ebb_jni_finish(env, a->jni_control, status)) {
    ebb_tensors_destroy(results);
    return 0;
  }
  return EBB_JNI_JLONG(results);
}

/* ebb_run_per_frame and ebb_run_joint (one session; the same arguments). */
typedef ebb_status_t* (*one_session_run)(ebb_runtime_t* runtime, ebb_session_t* session,
                                         const ebb_tensor_t* const* frames, size_t frame_count,
                                         ebb_control_t* control, ebb_tensors_t** results);

static jlong run_one_session(JNIEnv* env, jlong h, jlong session, jlongArray frames, jlong control,
                             one_session_run run) {
  frames_args a;
  if (!frames_get(env, frames, control, &a)) return 0;
  ebb_tensors_t* results = NULL;
  ebb_status_t* st = run(RUNTIME(h), SESSION(session), a.frames, a.count, a.control, &results);
  return frames_finish(env, &a, st, results);
}

JNIEXPORT jlong JNICALL Java_dev_ebb_Runtime_nativeRunPerFrame(JNIEnv* env, jclass cls, jlong h, jlong session,
                                                               jlongArray frames, jlong control) {
  (void)cls;
  return run_one_session(env, h, session, frames, control, ebb_run_per_frame);
}

JNIEXPORT jlong JNICALL Java_dev_ebb_Runtime_nativeRunJoint(JNIEnv* env, jclass cls, jlong h, jlong session,
                                                            jlongArray frames, jlong control) {
  (void)cls;
  return run_one_session(env, h, session, frames, control, ebb_run_joint);
}

JNIEXPORT jlong JNICALL Java_dev_ebb_Runtime_nativeRunTiled(JNIEnv* env, jclass cls, jlong h, jlong session,
                                                            jlongArray frames, jlong tile, jlong overlap, jlong scale,
                                                            jint tiles_per_run, jlong control) {
  (void)cls;
  frames_args a;
  if (!frames_get(env, frames, control, &a)) return 0;
  ebb_tensors_t* results = NULL;
  ebb_status_t* st = ebb_run_tiled(RUNTIME(h), SESSION(session), a.frames, a.count, tile, overlap, scale,
                                   tiles_per_run, a.control, &results);
  return frames_finish(env, &a, st, results);
}

JNIEXPORT jlong JNICALL Java_dev_ebb_Runtime_nativeRunPipeline(JNIEnv* env, jclass cls, jlong h, jlongArray sessions,
                                                               jlongArray frames, jlong control) {
  (void)cls;
  size_t stage_count = 0;
  /* Session handles converted like tensor handles: both are pointers in a long[]. */
  ebb_session_t** stages = (ebb_session_t**)ebb_jni_tensors(env, sessions, &stage_count);
  if (!stages) return 0;
  frames_args a;
  jlong out = 0;
  if (frames_get(env, frames, control, &a)) {
    ebb_tensors_t* results = NULL;
    ebb_status_t* st = ebb_run_pipeline(RUNTIME(h), stages, stage_count, a.frames, a.count, a.control, &results);
    out = frames_finish(env, &a, st, results);
  }
  free((void*)stages);
  return out;
}

JNIEXPORT void JNICALL Java_dev_ebb_Runtime_nativeDestroy(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  ebb_runtime_destroy(RUNTIME(h));
}
