/* dev.ebb.OperationControl and dev.ebb.Operation over ebb_control_t and ebb_operation_t. */
#include <stdlib.h>

#include "ebb_jni.h"

/* The C control's progress callback: runs on the thread running the operation (a Java thread, in
 * a native call of dev.ebb), calls the listener, and cancels when it returns false or throws. */
static int on_progress(void* user_data, int done, int total) {
  ebb_jni_control* c = user_data;
  JNIEnv* env = NULL;
  if (!c->listener || (*ebb_jni_vm)->GetEnv(ebb_jni_vm, (void**)&env, JNI_VERSION_1_8) != JNI_OK) return 0;
  if (c->error) return 1;
  const jboolean go = (*env)->CallBooleanMethod(env, c->listener, ebb_jni.progress, (jint)done, (jint)total);
  jthrowable thrown = (*env)->ExceptionOccurred(env);
  if (thrown) {
    (*env)->ExceptionClear(env);
    c->error = (jthrowable)(*env)->NewGlobalRef(env, thrown);
    (*env)->DeleteLocalRef(env, thrown);
    return 1;
  }
  return go ? 0 : 1;
}

JNIEXPORT jlong JNICALL Java_dev_ebb_OperationControl_nativeCreate(JNIEnv* env, jclass cls, jobject listener) {
  (void)cls;
  ebb_jni_control* c = calloc(1, sizeof *c);
  if (c) c->control = ebb_control_create();
  if (!c || !c->control) {
    free(c);
    ebb_jni_throw(env, EBB_RESOURCE_EXHAUSTED, "out of memory");
    return 0;
  }
  if (listener) {
    c->listener = (*env)->NewGlobalRef(env, listener);
    ebb_control_set_progress(c->control, on_progress, c);
  }
  return EBB_JNI_JLONG(c);
}

JNIEXPORT void JNICALL Java_dev_ebb_OperationControl_nativeCancel(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  ebb_control_cancel(EBB_JNI_HANDLE(ebb_jni_control, h)->control);
}

JNIEXPORT jboolean JNICALL Java_dev_ebb_OperationControl_nativeCancelled(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  return ebb_control_cancelled(EBB_JNI_HANDLE(ebb_jni_control, h)->control) ? JNI_TRUE : JNI_FALSE;
}

JNIEXPORT void JNICALL Java_dev_ebb_OperationControl_nativeDestroy(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  ebb_jni_control* c = EBB_JNI_HANDLE(ebb_jni_control, h);
  ebb_control_destroy(c->control);
  if (c->listener) (*env)->DeleteGlobalRef(env, c->listener);
  if (c->error) (*env)->DeleteGlobalRef(env, c->error);
  free(c);
}

#define OPERATION(h) EBB_JNI_HANDLE(jni_operation, h)

JNIEXPORT jlong JNICALL Java_dev_ebb_Operation_nativeCreate(JNIEnv* env, jclass cls, jlong runtime, jint planned,
                                                            jlong control) {
  (void)cls;
  jni_operation* o = calloc(1, sizeof *o);
  if (!o) {
    ebb_jni_throw(env, EBB_RESOURCE_EXHAUSTED, "out of memory");
    return 0;
  }
  o->control = EBB_JNI_HANDLE(ebb_jni_control, control);
  ebb_status_t* st = ebb_operation_create(EBB_JNI_HANDLE(ebb_runtime_t, runtime), (int)planned,
                                          o->control ? o->control->control : NULL, &o->op);
  if (ebb_jni_check(env, st)) {
    free(o);
    return 0;
  }
  return EBB_JNI_JLONG(o);
}

struct run_context {
  ebb_operation_t* op;
  ebb_session_t* session;
};

static ebb_status_t* run(void* context, const char* const* names, const ebb_tensor_t* const* inputs, size_t count,
                         const char* const* outputs, size_t output_count, ebb_tensors_t** result) {
  struct run_context* c = context;
  return ebb_operation_run(c->op, c->session, names, inputs, count, outputs, output_count, result);
}

JNIEXPORT jlong JNICALL Java_dev_ebb_Operation_nativeRun(JNIEnv* env, jclass cls, jlong h, jlong session,
                                                         jobjectArray names, jlongArray inputs,
                                                         jobjectArray output_names) {
  (void)cls;
  jni_operation* o = OPERATION(h);
  struct run_context context = {o->op, EBB_JNI_HANDLE(ebb_session_t, session)};
  jlong result = ebb_jni_run(env, names, inputs, output_names, run, &context);
  /* What the listener threw, if it threw, goes before ebb's status (or the run's results). */
  if (o->control && o->control->error) {
    if ((*env)->ExceptionCheck(env)) (*env)->ExceptionClear(env);
    ebb_tensors_destroy(EBB_JNI_HANDLE(ebb_tensors_t, result));
    ebb_jni_finish(env, o->control, NULL);
    return 0;
  }
  return result;
}

JNIEXPORT void JNICALL Java_dev_ebb_Operation_nativeEnd(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  ebb_jni_check(env, ebb_operation_end(OPERATION(h)->op));
}

JNIEXPORT jint JNICALL Java_dev_ebb_Operation_nativeRunsDone(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  return (jint)ebb_operation_runs_done(OPERATION(h)->op);
}

JNIEXPORT jboolean JNICALL Java_dev_ebb_Operation_nativeReleased(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  return ebb_operation_released(OPERATION(h)->op) ? JNI_TRUE : JNI_FALSE;
}

JNIEXPORT jboolean JNICALL Java_dev_ebb_Operation_nativeEnded(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  return ebb_operation_ended(OPERATION(h)->op) ? JNI_TRUE : JNI_FALSE;
}

JNIEXPORT void JNICALL Java_dev_ebb_Operation_nativeDestroy(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  jni_operation* o = OPERATION(h);
  ebb_operation_destroy(o->op);
  free(o);
}
