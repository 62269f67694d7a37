/* dev.ebb.ModelPool and dev.ebb.Lease over ebb_pool_t and ebb_lease_t.
 *
 * Events: the pool calls on_event on the thread that caused the event, which may be its own
 * keep-alive thread (not a Java thread). Rather than attach that thread to the JVM, the events
 * are kept here (the latest 1024, as the Python binding keeps them) and ModelPool.events() takes
 * them. The queue lives as long as the C pool: ModelPool.java frees it after every lease is gone. */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ebb_jni.h"

enum { kKeptEvents = 1024 };

typedef struct event {
  int kind;
  char* model;
  int on_demand;
  double load_ms;
  const char* reason; /* static storage (ebb's names) */
} event;

typedef struct jni_pool {
  ebb_pool_t* pool;
  pthread_mutex_t mu;
  event events[kKeptEvents]; /* a ring; guarded by mu */
  size_t head, count;        /* guarded by mu */
} jni_pool;

#define POOL(h) EBB_JNI_HANDLE(jni_pool, h)

static void on_event(void* user_data, const ebb_pool_event_t* e) {
  jni_pool* p = user_data;
  char* model = strdup(ebb_pool_event_model(e));
  if (!model) return;  /* out of memory: the event is dropped, as one past the 1024 kept */
  pthread_mutex_lock(&p->mu);
  if (p->count == kKeptEvents) {  /* drop the oldest */
    free(p->events[p->head].model);
    p->head = (p->head + 1) % kKeptEvents;
    --p->count;
  }
  event* slot = &p->events[(p->head + p->count) % kKeptEvents];
  *slot = (event){(int)ebb_pool_event_kind(e), model, ebb_pool_event_on_demand(e), ebb_pool_event_load_ms(e),
                  ebb_pool_event_reason(e)};
  ++p->count;
  pthread_mutex_unlock(&p->mu);
}

JNIEXPORT jlong JNICALL Java_dev_ebb_ModelPool_nativeCreate(JNIEnv* env, jclass cls, jlong runtime, jlong cpu_bytes,
                                                            jdouble cpu_fraction, jlong cuda_bytes,
                                                            jdouble cuda_fraction, jlong wait_ms,
                                                            jlong keep_alive_ms, jboolean memory_admission,
                                                            jlong wait_for_memory_ms) {
  (void)cls;
  jni_pool* p = calloc(1, sizeof *p);
  ebb_pool_options_t* o = ebb_pool_options_create();
  if (!p || !o) {
    free(p);
    ebb_pool_options_destroy(o);
    ebb_jni_throw(env, EBB_RESOURCE_EXHAUSTED, "out of memory");
    return 0;
  }
  pthread_mutex_init(&p->mu, NULL);
  ebb_pool_options_set_cpu_budget(o, cpu_bytes, cpu_fraction);
  ebb_pool_options_set_cuda_budget(o, cuda_bytes, cuda_fraction);
  ebb_pool_options_set_wait_for_capacity_ms(o, wait_ms);
  ebb_pool_options_set_keep_alive_ms(o, keep_alive_ms);
  ebb_pool_options_set_memory_admission(o, memory_admission, wait_for_memory_ms);
  ebb_status_t* st = ebb_pool_create(EBB_JNI_HANDLE(ebb_runtime_t, runtime), o, on_event, p, &p->pool);
  ebb_pool_options_destroy(o);
  if (ebb_jni_check(env, st)) {
    pthread_mutex_destroy(&p->mu);
    free(p);
    return 0;
  }
  return EBB_JNI_JLONG(p);
}

JNIEXPORT void JNICALL Java_dev_ebb_ModelPool_nativeAdd(JNIEnv* env, jclass cls, jlong h, jstring name, jstring path,
                                                        jstring device, jint strict, jboolean pinned,
                                                        jboolean has_keep_alive, jlong keep_alive_ms) {
  (void)cls;
  ebb_load_options_t* load = ebb_jni_load_options(env, device, strict, NULL);
  if (!load) return;
  ebb_jni_chars n, p;
  if (ebb_jni_chars_get(env, name, &n)) {
    if (ebb_jni_chars_get(env, path, &p)) {
      const int64_t keep = keep_alive_ms;
      ebb_jni_check(env, ebb_pool_add(POOL(h)->pool, n.chars, p.chars, load, pinned, has_keep_alive ? &keep : NULL));
      ebb_jni_chars_release(env, &p);
    }
    ebb_jni_chars_release(env, &n);
  }
  ebb_load_options_destroy(load);
}

JNIEXPORT jboolean JNICALL Java_dev_ebb_ModelPool_nativeContains(JNIEnv* env, jclass cls, jlong h, jstring name) {
  (void)cls;
  ebb_jni_chars n;
  if (!ebb_jni_chars_get(env, name, &n)) return JNI_FALSE;
  const int found = ebb_pool_contains(POOL(h)->pool, n.chars);
  ebb_jni_chars_release(env, &n);
  return found ? JNI_TRUE : JNI_FALSE;
}

JNIEXPORT jlong JNICALL Java_dev_ebb_ModelPool_nativeAcquire(JNIEnv* env, jclass cls, jlong h, jstring name,
                                                             jboolean has_keep_alive, jlong keep_alive_ms,
                                                             jboolean load_on_demand) {
  (void)cls;
  ebb_jni_chars n;
  if (!ebb_jni_chars_get(env, name, &n)) return 0;
  const int64_t keep = keep_alive_ms;
  ebb_lease_t* lease = NULL;
  ebb_status_t* st = ebb_pool_acquire(POOL(h)->pool, n.chars, has_keep_alive ? &keep : NULL, load_on_demand, &lease);
  ebb_jni_chars_release(env, &n);
  if (ebb_jni_check(env, st)) return 0;
  return EBB_JNI_JLONG(lease);
}

/* The body of run_with_recovery: ModelPool$Body.call(session) on the calling Java thread. */
struct body {
  JNIEnv* env;
  jobject body;
  jthrowable escaped; /* a Throwable call() let through (an Error): rethrown after */
};

static ebb_status_t* call_body(void* user_data, ebb_session_t* session) {
  struct body* b = user_data;
  JNIEnv* env = b->env;
  jobjectArray status = (jobjectArray)(*env)->CallObjectMethod(env, b->body, ebb_jni.body_call, EBB_JNI_JLONG(session));
  jthrowable thrown = (*env)->ExceptionOccurred(env);
  if (thrown) {
    (*env)->ExceptionClear(env);
    if (!b->escaped) b->escaped = (jthrowable)(*env)->NewGlobalRef(env, thrown);
    (*env)->DeleteLocalRef(env, thrown);
    return ebb_status_create(EBB_INTERNAL, "the Java body threw");
  }
  if (!status) return NULL;
  jobject code = (*env)->GetObjectArrayElement(env, status, 0);
  jstring message = (jstring)(*env)->GetObjectArrayElement(env, status, 1);
  const jint value = code ? (*env)->CallIntMethod(env, code, ebb_jni.integer_value) : EBB_INTERNAL;
  ebb_jni_chars m = {0};
  ebb_jni_chars_get(env, message, &m);
  ebb_status_t* st = ebb_status_create((ebb_code_t)value, m.chars ? m.chars : "");
  ebb_jni_chars_release(env, &m);
  (*env)->DeleteLocalRef(env, status);
  if (code) (*env)->DeleteLocalRef(env, code);
  if (message) (*env)->DeleteLocalRef(env, message);
  return st;
}

JNIEXPORT void JNICALL Java_dev_ebb_ModelPool_nativeRunWithRecovery(JNIEnv* env, jclass cls, jlong h, jstring name,
                                                                    jboolean has_keep_alive, jlong keep_alive_ms,
                                                                    jboolean load_on_demand, jlong run_elements,
                                                                    jobject body) {
  (void)cls;
  ebb_jni_chars n;
  if (!ebb_jni_chars_get(env, name, &n)) return;
  const int64_t keep = keep_alive_ms;
  struct body b = {env, body, NULL};
  /* run_elements < 0: not given (AcquireOptions.runElements), nothing reserved. */
  ebb_status_t* st = run_elements >= 0 ? ebb_pool_run_admitted(POOL(h)->pool, n.chars, has_keep_alive ? &keep : NULL,
                                                               load_on_demand, run_elements, call_body, &b)
                                       : ebb_pool_run_with_recovery(POOL(h)->pool, n.chars,
                                                                    has_keep_alive ? &keep : NULL, load_on_demand,
                                                                    call_body, &b);
  ebb_jni_chars_release(env, &n);
  if (b.escaped) {
    ebb_status_destroy(st);
    (*env)->Throw(env, b.escaped);
    (*env)->DeleteGlobalRef(env, b.escaped);
    return;
  }
  ebb_jni_check(env, st);
}

/* load, unload and remove: `call` on the pool and the model's name (its status thrown). */
static void by_name(JNIEnv* env, jlong h, jstring name, ebb_status_t* (*call)(ebb_pool_t*, const char*)) {
  ebb_jni_chars n;
  if (!ebb_jni_chars_get(env, name, &n)) return;
  ebb_status_t* st = call(POOL(h)->pool, n.chars);
  ebb_jni_chars_release(env, &n);
  ebb_jni_check(env, st);
}

JNIEXPORT void JNICALL Java_dev_ebb_ModelPool_nativeLoad(JNIEnv* env, jclass cls, jlong h, jstring name) {
  (void)cls;
  by_name(env, h, name, ebb_pool_load);
}

JNIEXPORT void JNICALL Java_dev_ebb_ModelPool_nativeUnload(JNIEnv* env, jclass cls, jlong h, jstring name) {
  (void)cls;
  by_name(env, h, name, ebb_pool_unload);
}

JNIEXPORT void JNICALL Java_dev_ebb_ModelPool_nativeRemove(JNIEnv* env, jclass cls, jlong h, jstring name) {
  (void)cls;
  by_name(env, h, name, ebb_pool_remove);
}

JNIEXPORT void JNICALL Java_dev_ebb_ModelPool_nativeReapNow(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  ebb_pool_reap_now(POOL(h)->pool);
}

/* budget and used: `read` of the pool for a device. */
static jlong device_bytes(JNIEnv* env, jlong h, jstring device, int64_t (*read)(const ebb_pool_t*, const char*)) {
  ebb_jni_chars d;
  if (!ebb_jni_chars_get(env, device, &d)) return 0;
  const int64_t v = read(POOL(h)->pool, d.chars);
  ebb_jni_chars_release(env, &d);
  return (jlong)v;
}

JNIEXPORT jlong JNICALL Java_dev_ebb_ModelPool_nativeBudget(JNIEnv* env, jclass cls, jlong h, jstring device) {
  (void)cls;
  return device_bytes(env, h, device, ebb_pool_budget);
}

JNIEXPORT jlong JNICALL Java_dev_ebb_ModelPool_nativeUsed(JNIEnv* env, jclass cls, jlong h, jstring device) {
  (void)cls;
  return device_bytes(env, h, device, ebb_pool_used);
}

/* Each event as Object[]{Integer kind, String model, Boolean onDemand, Double loadMs, String reason}. */
static jobjectArray event_to_java(JNIEnv* env, const event* e) {
  jobjectArray out = (*env)->NewObjectArray(env, 5, ebb_jni.object_class, NULL);
  if (!out) return NULL;
  jobject values[5] = {
      (*env)->CallStaticObjectMethod(env, ebb_jni.integer_class, ebb_jni.integer_of, (jint)e->kind),
      ebb_jni_string(env, e->model),
      (*env)->CallStaticObjectMethod(env, ebb_jni.boolean_class, ebb_jni.boolean_of, (jboolean)(e->on_demand != 0)),
      (*env)->CallStaticObjectMethod(env, ebb_jni.double_class, ebb_jni.double_of, (jdouble)e->load_ms),
      ebb_jni_string(env, e->reason)};
  for (int i = 0; i < 5; ++i) {
    (*env)->SetObjectArrayElement(env, out, i, values[i]);
    if (values[i]) (*env)->DeleteLocalRef(env, values[i]);
  }
  return out;
}

JNIEXPORT jobjectArray JNICALL Java_dev_ebb_ModelPool_nativeEvents(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  jni_pool* p = POOL(h);
  event taken[kKeptEvents];
  pthread_mutex_lock(&p->mu);
  const size_t n = p->count;
  for (size_t i = 0; i < n; ++i) taken[i] = p->events[(p->head + i) % kKeptEvents];
  p->head = 0;
  p->count = 0;
  pthread_mutex_unlock(&p->mu);
  jobjectArray out = (*env)->NewObjectArray(env, (jsize)n, ebb_jni.object_class, NULL);
  for (size_t i = 0; i < n; ++i) {
    if (out && !(*env)->ExceptionCheck(env)) {
      jobjectArray e = event_to_java(env, &taken[i]);
      (*env)->SetObjectArrayElement(env, out, (jsize)i, e);
      if (e) (*env)->DeleteLocalRef(env, e);
    }
    free(taken[i].model);
  }
  return out;
}

JNIEXPORT jlong JNICALL Java_dev_ebb_ModelPool_nativeSnapshot(JNIEnv* env, jclass cls, jlong h, jstring name) {
  (void)cls;
  ebb_pool_snapshot_t* snap = NULL;
  ebb_status_t* st = NULL;
  if (name) {
    ebb_jni_chars n;
    if (!ebb_jni_chars_get(env, name, &n)) return 0;
    st = ebb_pool_status(POOL(h)->pool, n.chars, &snap);
    ebb_jni_chars_release(env, &n);
  } else {
    st = ebb_pool_snapshot(POOL(h)->pool, &snap);
  }
  if (ebb_jni_check(env, st)) return 0;
  return EBB_JNI_JLONG(snap);
}

#define SNAPSHOT(h) EBB_JNI_HANDLE(ebb_pool_snapshot_t, h)

JNIEXPORT jint JNICALL Java_dev_ebb_ModelPool_nativeSnapshotCount(JNIEnv* env, jclass cls, jlong s) {
  (void)env;
  (void)cls;
  return (jint)ebb_pool_snapshot_count(SNAPSHOT(s));
}

JNIEXPORT jobjectArray JNICALL Java_dev_ebb_ModelPool_nativeSnapshotText(JNIEnv* env, jclass cls, jlong s, jint i) {
  (void)cls;
  const char* text[3] = {ebb_pool_snapshot_name(SNAPSHOT(s), (size_t)i), ebb_pool_snapshot_device(SNAPSHOT(s), (size_t)i),
                         ebb_pool_snapshot_reason(SNAPSHOT(s), (size_t)i)};
  jobjectArray out = (*env)->NewObjectArray(env, 3, ebb_jni.string_class, NULL);
  for (int k = 0; out && k < 3; ++k) {
    jstring v = ebb_jni_string(env, text[k]);
    if (!v) return NULL;
    (*env)->SetObjectArrayElement(env, out, k, v);
    (*env)->DeleteLocalRef(env, v);
  }
  return out;
}

JNIEXPORT jint JNICALL Java_dev_ebb_ModelPool_nativeSnapshotState(JNIEnv* env, jclass cls, jlong s, jint i) {
  (void)env;
  (void)cls;
  return (jint)ebb_pool_snapshot_state(SNAPSHOT(s), (size_t)i);
}

JNIEXPORT jlongArray JNICALL Java_dev_ebb_ModelPool_nativeSnapshotValues(JNIEnv* env, jclass cls, jlong s, jint i) {
  (void)cls;
  const ebb_pool_snapshot_t* p = SNAPSHOT(s);
  const size_t k = (size_t)i;
  const int64_t v[6] = {ebb_pool_snapshot_charge_bytes(p, k), ebb_pool_snapshot_load_bytes(p, k),
                        ebb_pool_snapshot_transient_bytes(p, k), ebb_pool_snapshot_in_flight(p, k),
                        ebb_pool_snapshot_pinned(p, k), (int64_t)ebb_pool_snapshot_loads(p, k)};
  return ebb_jni_long_array(env, v, 6);
}

JNIEXPORT void JNICALL Java_dev_ebb_ModelPool_nativeSnapshotDestroy(JNIEnv* env, jclass cls, jlong s) {
  (void)env;
  (void)cls;
  ebb_pool_snapshot_destroy(SNAPSHOT(s));
}

JNIEXPORT void JNICALL Java_dev_ebb_ModelPool_nativeDestroy(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  jni_pool* p = POOL(h);
  ebb_pool_destroy(p->pool);  /* no lease is left (ModelPool.java): the pool and its thread end here */
  for (size_t i = 0; i < p->count; ++i) free(p->events[(p->head + i) % kKeptEvents].model);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

JNIEXPORT jstring JNICALL Java_dev_ebb_Lease_nativeName(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  return ebb_jni_string(env, ebb_lease_name(EBB_JNI_HANDLE(ebb_lease_t, h)));
}

JNIEXPORT jlong JNICALL Java_dev_ebb_Lease_nativeSession(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  return EBB_JNI_JLONG(ebb_lease_session(EBB_JNI_HANDLE(ebb_lease_t, h)));
}

JNIEXPORT void JNICALL Java_dev_ebb_Lease_nativeDestroy(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  ebb_lease_destroy(EBB_JNI_HANDLE(ebb_lease_t, h));
}
